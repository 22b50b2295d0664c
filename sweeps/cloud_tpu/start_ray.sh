#!/usr/bin/env bash
# Start a Ray head on the first VM and join the others as workers. Ray detects the TPU chips of
# each host and offers them as the "TPU" resource, which paradnn's Ray executor asks for.
set -euo pipefail
cd "$(dirname "$0")"
source ./config.sh
head=$(vm_names | head -1)
head_ip=$(gcloud compute tpus tpu-vm describe "$head" --project="$PROJECT" --zone="$ZONE" \
  --format='value(networkEndpoints[0].ipAddress)')
# Token authentication: Ray >= 2.5x supports RAY_AUTH_MODE=token; keep the cluster on the VPC
# (no external access to $RAY_PORT) or turn it on and copy the token to every node and driver.
on_vm "$head" "ray stop --force >/dev/null 2>&1 || true; ray start --head --port=$RAY_PORT --disable-usage-stats"
for name in $(vm_names | tail -n +2); do
  on_vm "$name" "ray stop --force >/dev/null 2>&1 || true; ray start --address=$head_ip:$RAY_PORT --disable-usage-stats"
done
on_vm "$head" "ray status"
echo "$head_ip:$RAY_PORT" > .ray_address
