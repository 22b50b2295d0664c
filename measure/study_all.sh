#!/bin/bash
# Every number of docs/prediction.md from the stores that run_all.sh and run_more.sh measured.
cd "$(dirname "$0")/.." || exit 1
export PYTHONPATH=$PWD
PY="nice -n 19 /work/venv/bin/python"
R=measure/results
mkdir -p $R
for s in fc_1cpu cnn_1cpu rnn_1cpu fc_2cpu; do
  $PY -m paradnn predict --score --store measure/$s.db > $R/score_$s.txt 2>&1
  $PY measure/study_score.py measure/$s.db --target cpu > $R/score_${s}_cputime.txt 2>&1
done
$PY -m paradnn predict --score --train measure/fc_1cpu.db --store measure/fc_2cpu.db > $R/cross_1to2.txt 2>&1
$PY -m paradnn predict --score --train measure/fc_2cpu.db --store measure/fc_1cpu.db > $R/cross_2to1.txt 2>&1
$PY measure/score_live.py measure/fc_1cpu_budget.db measure/fc_1cpu.db > $R/live_budget.txt 2>&1
$PY measure/study_budget.py measure/fc_1cpu.db > $R/budget_fc_1cpu.txt 2>&1
$PY measure/study_budget.py measure/fc_1cpu.db --target cpu > $R/budget_fc_1cpu_cputime.txt 2>&1
$PY measure/study_corrections.py measure/fc_1cpu.db > $R/corrections_fc_1cpu.txt 2>&1
$PY measure/study_corrections.py measure/fc_1cpu.db --target-cpu > $R/corrections_fc_1cpu_cputime.txt 2>&1
