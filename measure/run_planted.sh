#!/bin/bash
# The history demo of docs/compare.md: the sweep at a throwaway revision with a planted
# regression (/tmp/compare-src/planted, a clone whose last commit adds four passes over the
# parameters to every training step). Waits for run_all.sh (same functions) to finish.
set -u
W=/work/wt/compare
cd $W
while kill -0 "$(cat measure/run_all.pid)" 2>/dev/null; do sleep 15; done
source <(sed -n '/^M=measure/,/^}/p' measure/run_all.sh)
run pl1 planted
run aa7 1dc8abf
run pl2 planted
