#!/usr/bin/env bash
# `npm test`: the type check, every jest suite, then the core suites on a private Redis Cluster.
# `npm test -- C6 C11`: the tests of those clauses of docs/contract.md only (the folders each names).
# Any other argument goes to jest as it is (`npm test -- -t 'a title'`).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
  npx tsc --noEmit -p .
  npx jest
  exec npm run test:core:cluster
fi
args=()
for a in "$@"; do
  if [[ "$a" =~ ^C[0-9]+$ ]]; then
    line=$(awk -v c="$a" 'index($0, "**" c " —") == 1 { f = 1 } f && /^Tests: / { print; exit }' docs/contract.md)
    [ -n "$line" ] || { echo "No clause $a in docs/contract.md" >&2; exit 2; }
    while read -r folder; do args+=("$folder"); done < <(grep -o '`[^`]*`' <<<"$line" | tr -d '`')
  else
    args+=("$a")
  fi
done
exec npx jest "${args[@]}"
