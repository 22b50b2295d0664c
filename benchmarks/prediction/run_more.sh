#!/bin/bash
# Second round of the measurements of docs/prediction.md (after run_all.sh). One CPU
# (taskset -c 0) measured far less noisily than two on this shared 2-core host, so it is the
# main platform: repeats of the FC grid (configs without a stable run twice), the live adaptive
# sweep with a budget of 20%, the CNN and RNN grids on one CPU with repeats, then repeats of
# the two-CPU FC grid (the other platform of the cross-platform check).
cd "$(dirname "$0")/../.." || exit 1
export PYTHONPATH=$PWD
PY=${PYTHON:-python3}
set -x
taskset -c 0 $PY -m paradnn sweep benchmarks/prediction/fc.yaml --store benchmarks/prediction/fc_1cpu.db --repeat 2 --remeasure-unstable
taskset -c 0 $PY -m paradnn sweep benchmarks/prediction/fc.yaml --budget 36 --store benchmarks/prediction/fc_1cpu_budget.db
taskset -c 0 $PY -m paradnn sweep benchmarks/prediction/rnn.yaml --store benchmarks/prediction/rnn_1cpu.db --repeat 2 --remeasure-unstable
taskset -c 0 $PY -m paradnn sweep benchmarks/prediction/cnn.yaml --store benchmarks/prediction/cnn_1cpu.db --repeat 2 --remeasure-unstable
taskset -c 0,1 $PY -m paradnn sweep benchmarks/prediction/fc.yaml --store benchmarks/prediction/fc_2cpu.db --repeat 2 --remeasure-unstable
