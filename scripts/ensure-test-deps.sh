#!/usr/bin/env bash
# What `npm test` needs besides node_modules (run by `pretest`):
#   chromium      at /usr/bin/chromium, for the Bull Board browser test (test/browser/)
#   redis-server  for the private Redis of scripts/with-redis.sh and the Redis Cluster of
#                 `npm run test:core:cluster` (scripts/with-cluster.ts)
#   python3-redis Debian's redis-py under /usr/bin/python3, for the Python producer test
#                 (test/contract/C19-producer-contract/python-producer.test.ts)
# Installs what is missing where it can (root, with apt-get); otherwise prints one line
# saying how, and exits 1. Usage: ensure-test-deps.sh [chromium] [redis-server] [python3-redis]
# (default: all three).
set -euo pipefail

if [ "$#" -gt 0 ]; then wanted=("$@"); else wanted=(chromium redis-server python3-redis); fi

present() {
  case "$1" in
    chromium) [ -x /usr/bin/chromium ] ;;
    redis-server) command -v redis-server >/dev/null ;;
    python3-redis) [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import redis' 2>/dev/null ;;
    *)
      echo "ensure-test-deps.sh: unknown dependency '$1' (chromium, redis-server, python3-redis)" >&2
      exit 2
      ;;
  esac
}

missing=()
for dep in "${wanted[@]}"; do present "$dep" || missing+=("$dep"); done
[ "${#missing[@]}" -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "Installing ${missing[*]} for the tests (apt-get)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; }
  for dep in "${missing[@]}"; do
    present "$dep" || { echo "apt-get installed ${dep}, but it is still missing" >&2; exit 1; }
  done
  exit 0
fi

echo "npm test needs ${missing[*]} (chromium at /usr/bin/chromium): install with 'sudo apt-get install -y ${missing[*]}' and run it again" >&2
exit 1
