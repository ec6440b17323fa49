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
# a clause id (C7, c7, C7,C8) runs the folders docs/contract.md names for it; anything else goes to jest
for a in "$@"; do
  if [[ "$a" =~ ^[cC][0-9]+(,[cC][0-9]+)*$ ]]; then
    for id in ${a//,/ }; do
      id="C${id:1}"
      line=$(awk -v c="$id" 'index($0, "**" c " —") == 1 { f = 1 } f && /^Tests: / { print; exit }' docs/contract.md)
      [ -n "$line" ] || { echo "No clause $id in docs/contract.md" >&2; exit 2; }
      while read -r folder; do args+=("$folder"); done < <(grep -o '`[^`]*`' <<<"$line" | tr -d '`')
    done
  else
    args+=("$a")
  fi
done
exec npx jest "${args[@]}"
