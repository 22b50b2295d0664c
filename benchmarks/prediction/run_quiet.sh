#!/bin/bash
# Third round of the measurements of docs/prediction.md (2026-11-25), at a time when the shared
# host was quiet (nothing else of ours running, no steal time): the FC grid on one CPU twice (for
# the noise floor), the live adaptive sweep with a budget of 20% right after (scored against a
# reference measured under the same load), the CNN and RNN grids on one CPU twice, and the FC
# grid on two CPUs (the other platform of the cross-platform check).
cd "$(dirname "$0")/../.." || exit 1
export PYTHONPATH=$PWD
PY=${PYTHON:-python3}
B=benchmarks/prediction
set -x
uptime
taskset -c 0 $PY -m paradnn sweep $B/fc.yaml --store $B/fc_1cpu_quiet.db --repeat 2
taskset -c 0 $PY -m paradnn sweep $B/fc.yaml --budget 36 --store $B/fc_1cpu_quiet_budget.db
uptime
taskset -c 0 $PY -m paradnn sweep $B/cnn.yaml --store $B/cnn_1cpu_quiet.db --repeat 2
taskset -c 0 $PY -m paradnn sweep $B/rnn.yaml --store $B/rnn_1cpu_quiet.db --repeat 2
uptime
taskset -c 0,1 $PY -m paradnn sweep $B/fc.yaml --store $B/fc_2cpu_quiet.db
uptime
