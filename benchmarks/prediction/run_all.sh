#!/bin/bash
# The measurements of docs/prediction.md, one after the other (the host has 2 cores).
cd "$(dirname "$0")/../.." || exit 1
export PYTHONPATH=$PWD
PY=${PYTHON:-python3}
set -x
taskset -c 0 $PY -m paradnn sweep benchmarks/prediction/fc.yaml --store benchmarks/prediction/fc_1cpu.db
taskset -c 0,1 $PY -m paradnn sweep benchmarks/prediction/cnn.yaml --store benchmarks/prediction/cnn_2cpu.db
taskset -c 0,1 $PY -m paradnn sweep benchmarks/prediction/rnn.yaml --store benchmarks/prediction/rnn_2cpu.db
