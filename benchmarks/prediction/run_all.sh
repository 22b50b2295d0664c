#!/bin/bash
# The measurements of docs/prediction.md, one after the other (the host has 2 cores).
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH=$PWD
PY=/work/venv/bin/python
set -x
taskset -c 0 $PY -m paradnn sweep measure/fc.yaml --store measure/fc_1cpu.db
taskset -c 0,1 $PY -m paradnn sweep measure/cnn.yaml --store measure/cnn_2cpu.db
taskset -c 0,1 $PY -m paradnn sweep measure/rnn.yaml --store measure/rnn_2cpu.db
