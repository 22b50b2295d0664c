#!/usr/bin/env bash
# Create $COUNT TPU VMs and install paradnn (with JAX for TPU and Ray) on each.
set -euo pipefail
cd "$(dirname "$0")"
source ./config.sh
for name in $(vm_names); do
  gcloud compute tpus tpu-vm create "$name" --project="$PROJECT" --zone="$ZONE" \
    --accelerator-type="$ACCELERATOR" --version="$RUNTIME"
done
for name in $(vm_names); do
  on_vm "$name" "python3 -m pip install --upgrade pip && python3 -m pip install '$PARADNN_SPEC'
                 && python3 -c 'import jax; print(jax.devices())'"
done
