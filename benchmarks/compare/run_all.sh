#!/bin/bash
# The compare measurements of docs/compare.md, one sweep after another, A and B interleaved in
# time. Each sweep runs from a clean clone of one commit (/tmp/compare-src/<rev>), so its rows
# carry that commit as paradnn_revision and editing the worktree meanwhile changes nothing.
set -u
W="$(cd "$(dirname "$0")/../.." && pwd)"  # the repository root
cd $W
M=benchmarks/compare
run() {  # run NAME REV [taskset cores] [yaml]
  local name=$1 rev=$2 cores=${3:-} yaml=${4:-$M/ab.yaml}
  local pre=""
  [ -n "$cores" ] && pre="taskset -c $cores"
  echo "$(date -u +%FT%TZ) start $name rev=$rev cores=${cores:-all} yaml=$yaml load=$(cut -d' ' -f1 /proc/loadavg)"
  # Run inside the clone: `python -m` puts the working directory first on sys.path.
  (cd /tmp/compare-src/$rev && PYTHONPATH=/tmp/compare-src/$rev $pre ${PYTHON:-python3} \
    -m paradnn sweep $W/$yaml --store $W/$M/$name.db --cache-dir $W/$M/xla-cache --quiet)
  echo "$(date -u +%FT%TZ) end $name rc=$?"
}
# Every run pinned to core 0: on this shared 2-core host, a run whose XLA thread pool spans both
# cores waits for whichever core a neighbour holds, and identical runs then differ up to 7x
# (benchmarks/compare/v3, docs/compare.md); pinned runs differ far less.
C=0
R=1dc8abf
# Rounds, each running every variant once, so that the host's load, which drifts over minutes,
# falls on every side alike: the old revision (no per-call times), the code under test, the
# planted regression, and (rounds 1-4) bfloat16.
for i in 1 2 3 4 5 6; do
  run old$i f953315 $C
  run aa$i $R $C
  run pl$i planted $C
  [ $i -le 4 ] && run bf$i $R $C $M/ab_bf16.yaml
done
