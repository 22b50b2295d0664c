# Settings shared by the scripts in this directory. Override any of them in the environment.
# shellcheck shell=bash
: "${PROJECT:?set PROJECT to your Google Cloud project id}"
: "${ZONE:=us-central2-b}"                 # a zone that has the accelerator type below
: "${ACCELERATOR:=v4-8}"                   # one TPU VM host with 4 chips
: "${RUNTIME:=tpu-ubuntu2204-base}"        # TPU VM image for v4; v5e/v6e use other images
: "${PREFIX:=paradnn}"                     # VM names: $PREFIX-0, $PREFIX-1, ...
: "${COUNT:=2}"                            # number of TPU VMs
: "${PARADNN_SPEC:=paradnn[tpu,ray]}"      # what pip installs on every VM
: "${RAY_PORT:=6379}"
: "${SWEEP:=sweeps/fc.yaml}"               # a sweep file from the paradnn source tree
: "${STORE:=paradnn-results.db}"           # store file on the head VM (the Ray driver)
export PROJECT ZONE ACCELERATOR RUNTIME PREFIX COUNT PARADNN_SPEC RAY_PORT SWEEP STORE

vm_names() { for i in $(seq 0 $((COUNT - 1))); do echo "$PREFIX-$i"; done; }
on_vm() {  # on_vm NAME COMMAND...: run a command on every worker of a TPU VM
  local name=$1; shift
  gcloud compute tpus tpu-vm ssh "$name" --project="$PROJECT" --zone="$ZONE" --worker=all \
    --command="$*"
}
