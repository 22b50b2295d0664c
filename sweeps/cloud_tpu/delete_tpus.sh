#!/usr/bin/env bash
# Delete the TPU VMs (they are billed while they exist). Fetch the store first.
set -euo pipefail
cd "$(dirname "$0")"
source ./config.sh
for name in $(vm_names); do
  gcloud compute tpus tpu-vm delete "$name" --project="$PROJECT" --zone="$ZONE" --quiet
done
