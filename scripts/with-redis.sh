#!/usr/bin/env bash
# Runs "$@" with REDIS_URL pointing at a Redis that answers:
# $REDIS_URL if set, else 127.0.0.1:6379, else a private redis-server on a
# free port (started here, stopped by pid on exit; installed first if missing
# and we are root with apt-get). Nested calls (`.ci/run` wraps `npm test`,
# which wraps itself) find REDIS_URL answering and start no second Redis.
set -euo pipefail

# --private: always a private redis-server (the benchmark's counters and memory figures are server-wide)
private=0
if [ "${1:-}" = --private ]; then private=1; shift; fi

answers() { redis-cli -u "$1" ping 2>/dev/null | grep -q PONG; }

if [ "$private" = 0 ] && [ -n "${REDIS_URL:-}" ] && answers "$REDIS_URL"; then
  exec "$@"
fi
if [ "$private" = 0 ] && command -v redis-cli >/dev/null && answers redis://127.0.0.1:6379; then
  REDIS_URL=redis://127.0.0.1:6379 exec "$@"
fi
if ! command -v redis-server >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    bash "$(dirname "$0")/ensure-test-deps.sh" redis-server
  else
    echo "No Redis answers and redis-server is not installed: install it (sudo apt-get install -y redis-server) or set REDIS_URL." >&2
    exit 1
  fi
fi
# the tests' one free-port helper (test/helpers/ports.ts)
root=$(cd "$(dirname "$0")/.." && pwd)
port=$(cd "$root" && node_modules/.bin/tsx -e 'import("./test/helpers/ports.ts").then((m) => (m.freePort ?? m.default.freePort)()).then((p) => console.log(p))')
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
trap 'kill "$(cat "$dir/redis.pid")" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do answers "redis://127.0.0.1:$port" && break; sleep 0.05; done
echo "Started a private redis-server on 127.0.0.1:$port" >&2
REDIS_URL="redis://127.0.0.1:$port" "$@"
