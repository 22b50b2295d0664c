#!/bin/bash
# Every number of docs/prediction.md's quiet-host study (2026-11-25) from the stores that
# run_quiet.sh measured, into results/quiet/ (no measurement; each line timestamped in
# results/quiet/study.log). Run from anywhere; about 10 minutes on two cores.
cd "$(dirname "$0")/../.." || exit 1
export PYTHONPATH=${PYTHONPATH:-$PWD}
PY="nice -n 10 ${PYTHON:-python3}"
B=benchmarks/prediction
R=$B/results/quiet
mkdir -p $R
LOG=$R/study.log
source $B/study_step.sh
for s in fc_1cpu_quiet cnn_1cpu_quiet rnn_1cpu_quiet fc_2cpu_quiet; do
  step score_$s.txt $PY -m paradnn predict --score --store $B/$s.db
done
step live_budget.txt $PY $B/score_live.py $B/fc_1cpu_quiet_budget.db $B/fc_1cpu_quiet.db
step cross_1to2.txt $PY -m paradnn predict --score --train $B/fc_1cpu_quiet.db --store $B/fc_2cpu_quiet.db
step cross_2to1.txt $PY -m paradnn predict --score --train $B/fc_2cpu_quiet.db --store $B/fc_1cpu_quiet.db
step drift.txt $PY $B/study_drift.py $B/fc_1cpu_quiet.db $B/fc_1cpu_quiet_budget.db --speedup $B/fc_2cpu_quiet.db
step budget_fc_1cpu_quiet.txt $PY $B/study_budget.py $B/fc_1cpu_quiet.db
step corrections_fc_1cpu_quiet.txt $PY $B/study_corrections.py $B/fc_1cpu_quiet.db
