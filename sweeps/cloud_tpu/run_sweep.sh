#!/usr/bin/env bash
# Run a sweep from the head VM (the Ray driver writes the store there). Safe to run again after
# an interruption: configs already in the store are skipped. Runs inside tmux so that a dropped
# ssh connection does not stop it.
set -euo pipefail
cd "$(dirname "$0")"
source ./config.sh
head=$(vm_names | head -1)
sweep_file=$(basename "$SWEEP")
gcloud compute tpus tpu-vm scp "../$sweep_file" "$head:~/$sweep_file" --project="$PROJECT" --zone="$ZONE" --worker=0
gcloud compute tpus tpu-vm ssh "$head" --project="$PROJECT" --zone="$ZONE" --worker=0 --command="
  tmux new-session -d -s paradnn 'paradnn sweep ~/$sweep_file --store ~/$STORE --executor ray --address 127.0.0.1:$RAY_PORT 2>&1 | tee -a ~/paradnn-sweep.log'
  echo 'started; follow with: tmux attach -t paradnn  (or tail -f ~/paradnn-sweep.log)'"
