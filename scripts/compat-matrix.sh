#!/usr/bin/env bash
# The compatibility matrix (issue 13.1): runs the type check and the core and
# BullMQ-level suites against each supported bullmq/ioredis pair. Each pair gets
# a scratch copy of the repository (as test/package/pack.test.ts does) with the
# pair installed over the locked devDependencies (`npm install --no-save`); the
# working tree is never touched.
#
#   npm run test:compat                      # the pairs below
#   npm run test:compat -- 5.81:5            # one pair: bullmq@5.81 with ioredis@5
#   bash scripts/compat-matrix.sh 6.7.0:5.11.1 ~5.81.0:^5.11.0
#
# A pair is BULLMQ:IOREDIS, each an npm version or range. The main test run covers
# the devDependencies (bullmq 6.7 with ioredis 6), so the default pairs are the others
# the README's support table promises: the latest bullmq 5.x (5.81) with ioredis 5,
# the devDependency's bullmq 6 with ioredis 5, and the lowest bullmq 6 (6.0.0, the
# bottom of the peer range ^6.0.0) with ioredis 6. Needs REDIS_URL or Redis on
# 127.0.0.1:6379 (`npm run test:compat` wraps it in scripts/with-redis.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

dev_bullmq=$(node -p "require('./package.json').devDependencies.bullmq")
if [ "$#" -eq 0 ]; then
  set -- "~5.81.0:^5.11.0" "$dev_bullmq:^5.11.0" "6.0.0:^6.0.0"
fi

suites=(
  # core
  test/contract/C1-deferral/dispatch.test.ts test/contract/C3-wake-up-runs/worker.test.ts test/contract/C9-cancel/cancel-and-clear.test.ts
  test/contract/C18-enqueue/enqueue.test.ts test/contract/C14-crash-recovery/crash-recovery.test.ts test/contract/C8-wake-deferred/wake-deferred.test.ts test/contract/C16-retry-by-hand/operator-paths.test.ts
  # BullMQ-level: the job a user's Worker/Bull Board sees, retries, locks, errors, the adapter
  test/contract/C15-bull-board/wake-up-readable.test.ts test/contract/C12-one-in-flight/in-flight-retry.test.ts test/contract/C12-one-in-flight/lock-renewal.test.ts
  test/contract/C17-promote-remove/marker-deleted.test.ts test/contract/C23-observability/error-codes.test.ts test/contract/C25-start-up/producer-only.test.ts test/contract/C25-start-up/bullmq-versions.test.ts test/contract/C25-start-up/engine-edges.test.ts
  # a Worker's custom backoff strategy and BullMQ's stalled count, read by the engine
  test/contract/C11-retry-budget/custom-backoff-type.test.ts test/contract/C14-crash-recovery/crash-after-fail-record.test.ts
  # BullMQ's stalled check failing a job whose frozen worker still runs, and its lock token read by
  # the engine
  test/contract/C12-one-in-flight/stalled-job-lock-lives.test.ts test/contract/C12-one-in-flight/kept-job-frozen.test.ts
)

for pair in "$@"; do
  case "$pair" in
    ?*:?*) ;;
    *)
      echo "compat-matrix: a pair is BULLMQ:IOREDIS (e.g. 5.81:5), not \"$pair\"" >&2
      exit 2
      ;;
  esac
done

scratch=$(mktemp -d "${TMPDIR:-/tmp}/sd-compat-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# one scratch copy for every pair: the sources as they are now (committed or not) and the
# locked install; each pair is installed over it in turn (npm puts back what the last one changed)
tar --exclude=./node_modules --exclude=./.git --exclude=./dist --exclude=./reports -cf - . | tar -xf - -C "$scratch"
# the contents, not the link: a worktree whose node_modules is a symlink (to another checkout's
# install) would otherwise have each pair installed into the link's target
mkdir "$scratch/node_modules"
cp -a node_modules/. "$scratch/node_modules/"
failed=()
for pair in "$@"; do
  bullmq=${pair%%:*}
  ioredis=${pair#*:}
  start=$SECONDS
  (
    cd "$scratch"
    npm install --no-save --no-audit --no-fund --ignore-scripts --prefer-offline "bullmq@$bullmq" "ioredis@$ioredis" >/dev/null
    got=$(node -p "require('bullmq/package.json').version + ' + ioredis ' + require('ioredis/package.json').version")
    echo "=== compat-matrix: bullmq $got (asked: bullmq@$bullmq ioredis@$ioredis)"
    node_modules/.bin/tsc --noEmit -p .
    node_modules/.bin/jest "${suites[@]}"
  ) || failed+=("$pair")
  echo "=== compat-matrix: $pair took $((SECONDS - start)) s"
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "compat-matrix: FAILED for ${failed[*]}" >&2
  exit 1
fi
echo "compat-matrix: all pairs passed ($*)"
