#!/usr/bin/env bash
# Bring the store home: an online SQLite backup on the head VM (consistent even while the sweep
# writes), then scp. Merge stores of several runs with: paradnn merge a.db b.db -o all.db
set -euo pipefail
cd "$(dirname "$0")"
source ./config.sh
head=$(vm_names | head -1)
gcloud compute tpus tpu-vm ssh "$head" --project="$PROJECT" --zone="$ZONE" --worker=0 --command="
  python3 -c \"import sqlite3; s=sqlite3.connect('$STORE'); d=sqlite3.connect('$STORE.copy'); s.backup(d); d.close()\""
gcloud compute tpus tpu-vm scp "$head:~/$STORE.copy" "./$STORE" --project="$PROJECT" --zone="$ZONE" --worker=0
paradnn status "./$STORE"
