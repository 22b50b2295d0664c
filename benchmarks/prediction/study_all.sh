#!/bin/bash
# Every number of docs/prediction.md from the stores that run_all.sh and run_more.sh measured,
# most important first; each line timestamped in results/study_all.log.
cd "$(dirname "$0")/../.." || exit 1
export PYTHONPATH=${PYTHONPATH:-$PWD}
PY="nice -n 19 ${PYTHON:-python3}"
B=benchmarks/prediction
R=$B/results
mkdir -p $R
LOG=$R/study_all.log
source $B/study_step.sh
for s in fc_1cpu cnn_1cpu rnn_1cpu; do
  step score_$s.txt $PY -m paradnn predict --score --store $B/$s.db
done
step cross_1to2.txt $PY -m paradnn predict --score --train $B/fc_1cpu.db --store $B/fc_2cpu.db
step live_budget.txt $PY $B/score_live.py $B/fc_1cpu_budget.db $B/fc_1cpu.db
step budget_fc_1cpu.txt $PY $B/study_budget.py $B/fc_1cpu.db
step drift.txt $PY $B/study_drift.py $B/fc_1cpu.db $B/fc_1cpu_budget.db --speedup $B/fc_2cpu.db
step score_fc_2cpu.txt $PY -m paradnn predict --score --store $B/fc_2cpu.db
step cross_2to1.txt $PY -m paradnn predict --score --train $B/fc_2cpu.db --store $B/fc_1cpu.db
for s in fc_1cpu cnn_1cpu rnn_1cpu fc_2cpu; do
  step score_${s}_cputime.txt $PY $B/study_score.py $B/$s.db --target cpu
done
step budget_fc_1cpu_cputime.txt $PY $B/study_budget.py $B/fc_1cpu.db --target cpu
step corrections_fc_1cpu.txt $PY $B/study_corrections.py $B/fc_1cpu.db
step corrections_fc_1cpu_cputime.txt $PY $B/study_corrections.py $B/fc_1cpu.db --target-cpu
