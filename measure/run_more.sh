#!/bin/bash
# Second round of the measurements of docs/prediction.md (after run_all.sh): repeats of the FC
# grid (unstable configs twice), then the live adaptive sweep with a budget of 20%.
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH=$PWD
PY=/work/venv/bin/python
while pgrep -f measure/run_all.sh > /dev/null; do sleep 20; done
set -x
taskset -c 0 $PY -m paradnn sweep measure/fc.yaml --store measure/fc_1cpu.db --repeat 2 --remeasure-unstable
taskset -c 0 $PY -m paradnn sweep measure/fc.yaml --budget 36 --store measure/fc_1cpu_budget.db
taskset -c 0,1 $PY -m paradnn sweep measure/fc.yaml --store measure/fc_2cpu.db --repeat 2 --remeasure-unstable
