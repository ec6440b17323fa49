#!/usr/bin/env bash
# Runs the cluster scale-out suite (concurrency + SIGKILL failover) N times,
# each on a fresh 3+3 cluster, and prints the figures of every run.
# Usage: bash scripts/cluster-soak.sh [runs=5]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
failed=0
mkdir -p test/artifacts
for i in $(seq 1 "$runs"); do
  if npx jest --runInBand test/cluster/cluster.scale-out.test.ts >"test/artifacts/cluster-soak-$i.log" 2>&1; then rc=ok; else rc=FAILED; failed=$((failed + 1)); fi
  for f in concurrency failover; do
    node -e 'const r=require(process.argv[1]);const d=r.during||{};console.log(`run '"$i"' '"$rc"' ${process.argv[2]}: stages=${r.stages} processes=${r.processes} calls=${r.calls} deferrals=${r.deferrals} lost=${r.lost.length} duplicated=${r.duplicated.length} insideWindow=${r.insideWindow.length} overlaps=${r.overlaps.length} failovers=${r.failovers} replicaLags=${r.replicaLags} failoverMs=${d.failoverMs??"-"} deferredAtKill=${d.deferredAtKill??"-"} workerErrors=${r.errorCount} ms=${r.ms}`)' \
      "$PWD/test/artifacts/cluster-$f.json" "$f" 2>/dev/null || echo "run $i $rc $f: no figures"
  done
done
echo "$failed of $runs runs failed"
[ "$failed" -eq 0 ]
