#!/usr/bin/env bash
# The whole GPU check of paradnn (issues 11 and 32), for one NVIDIA H100/H200 with paradnn
# installed (`pip install --no-deps -e .` in an image that has jax with a CUDA plugin, flax,
# optax, pandas, pyarrow, matplotlib, scikit-learn, pyyaml, pytest).
#
#   bash benchmarks/gpu_validation.sh [--cpu-smoke] [--part 1|2|all] [OUTDIR]
#
# OUTDIR defaults to $OUT when set, else gpu-validation-<UTC time>. The device machine returns
# at most 8 files, so OUTDIR receives exactly three: results-part<N>.tar.gz (every log, JSON,
# junit XML, the store gpu.db, steps.jsonl; repacked after every step, so that a run killed at
# its time limit still returns what it measured) and summary.md / summary.json beside it (every
# check with its value, target and verdict). The work happens in a scratch folder (WORK_DIR,
# default a fresh temporary folder). Unpack with `tar xzf results-part1.tar.gz`.
#
# Two parts, each one command on the GPU machine (docs/gpu.md gives both exactly):
#   part 1 (BUDGET_S 420 s): the GPU tests; the measured ceiling; the compute-bound FC in
#     bfloat16 and float32 with the matmul precision each framework used; ResNet-50 bfloat16
#     against a hand-written Flax loop; paradnn against the plain JAX and torch.compile loops
#     on the FC; the smoke sweep and its report (energy per example and the memory limit come
#     with every GPU record).
#   part 2 (BUDGET_S 200 s): PyTorch ResNet-50 against torch.compile, out-of-memory prediction,
#     op-level profile, issue 37's CNN and LSTM against the plain loops and `--framework best`
#     on its CNN, the paper LSTM and CNN, a 20-config FC grid, maxbatch, the Transformer
#     family, a CNN profile, the report of everything in the store.
# Steps run in priority order; a step that would not fit the budget is recorded as skipped, a
# failing step does not stop the others. The exit status is 0 when every check passed, 1
# otherwise; checks of steps not run (the other part, not in STEPS, cut by the budget) read "not run".
#
# --cpu-smoke runs the same steps and code paths on tiny sizes on the CPU (JAX_PLATFORMS=cpu,
# explicit memory limits where a CPU reports none). Its checks are only that each step worked:
# the GPU targets are reported as not applicable.
set -uo pipefail
cd "$(dirname "$0")/.."

MODE=gpu
PART=all
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu-smoke) MODE=cpu-smoke; shift ;;
    --part) PART="${2:-}"; shift 2 ;;
    *) break ;;
  esac
done
case "$PART" in 1|2|all) ;; *) echo "gpu_validation.sh: --part must be 1, 2 or all, not '$PART'" >&2; exit 2 ;; esac
OUT_DIR="${1:-${OUT:-gpu-validation-$(date -u +%Y%m%dT%H%M%SZ)}}"
# Budgets fit one device command each (10 minutes at most, the machine's start outside it).
# The CPU smoke compiles ResNet-50 on a CPU: a longer budget and 4x step limits there.
case "$MODE/$PART" in
  gpu/1) DEFAULT_BUDGET=420 ;; gpu/2) DEFAULT_BUDGET=200 ;; gpu/all) DEFAULT_BUDGET=560 ;; *) DEFAULT_BUDGET=1800 ;;
esac
BUDGET_S="${BUDGET_S:-$DEFAULT_BUDGET}"
if [ "$MODE" = gpu ]; then SCALE=1; else SCALE=4; fi
PY="${PYTHON:-python}"
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
RES="${WORK_DIR:-$(mktemp -d)}"
mkdir -p "$RES/logs"
RES="$(cd "$RES" && pwd)"
ARCHIVE="$OUT_DIR/results-part$PART.tar.gz"
: > "$RES/steps.jsonl"
START=$(date +%s)
# Probe caches and compiled programs stay in this run (repeated compiles of one program reuse it).
export PARADNN_CACHE="${PARADNN_CACHE:-$(mktemp -d)}"
export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-$(mktemp -d)}"
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=1
if [ "$MODE" = cpu-smoke ]; then export JAX_PLATFORMS=cpu; fi

# pack: the scratch folder into one archive in OUTDIR, written beside and renamed, so that a
# kill mid-pack leaves the previous archive whole. Raw XPlane protobufs stay out (the ops tables
# hold what they measured; the Chrome traces, small, come along), and so does any file over 8 MiB, listed in left_out.txt instead:
# the machine returns at most 16 MiB per file.
pack() {
  (cd "$RES" && find . -type f -size +8M) > "$RES/left_out.txt"
  tar czf "$ARCHIVE.tmp" -C "$RES" --exclude='*.xplane.pb' \
    -X "$RES/left_out.txt" . 2>/dev/null && mv -f "$ARCHIVE.tmp" "$ARCHIVE"
}
runs() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }

# step NAME TIMEOUT_S [--expect-rc N] [--stdout FILE] CMD...: run CMD with its output in
# logs/NAME.log (stdout in FILE when given), at most TIMEOUT_S seconds and never past the budget;
# record the outcome. --expect-rc: the exit status that means the step worked (`paradnn run`
# exits 1 for a record that is not ok, which is what the out-of-memory steps expect).
step() {
  local name="$1" limit="$2"; shift 2
  # STEPS (a comma list of step names): run only those, for a rerun of what failed.
  if [ -n "${STEPS:-}" ] && [[ ",$STEPS," != *",$name,"* ]]; then return 0; fi
  local stdout_file="" expect_rc=0
  if [ "$1" = "--expect-rc" ]; then expect_rc="$2"; shift 2; fi
  if [ "$1" = "--stdout" ]; then stdout_file="$2"; shift 2; fi
  local now left rc t0 t1
  limit=$((limit * SCALE))
  now=$(date +%s); left=$((BUDGET_S - (now - START)))
  if [ "$left" -lt 15 ]; then
    echo "{\"step\": \"$name\", \"status\": \"skipped\", \"reason\": \"time budget of ${BUDGET_S} s spent\"}" >> "$RES/steps.jsonl"
    echo "[$name] skipped: time budget spent"
    pack
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "[$name] up to ${limit} s ..."
  t0=$(date +%s%N)
  if [ -n "$stdout_file" ]; then
    timeout --signal=TERM --kill-after=10 "$limit" "$@" > "$stdout_file" 2> "$RES/logs/$name.log"
  else
    timeout --signal=TERM --kill-after=10 "$limit" "$@" > "$RES/logs/$name.log" 2>&1
  fi
  rc=$?
  t1=$(date +%s%N)
  local status=ok
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then status=timeout; elif [ "$rc" -ne "$expect_rc" ]; then status=failed; fi
  local ms=$(( (t1 - t0) / 1000000 ))
  printf '{"step": "%s", "status": "%s", "rc": %d, "seconds": %d.%01d, "limit_s": %d}\n' \
    "$name" "$status" "$rc" $((ms / 1000)) $((ms % 1000 / 100)) "$limit" >> "$RES/steps.jsonl"
  echo "[$name] $status (rc $rc)"
  pack
}

# Sizes: the GPU ones are the issue's; the CPU ones only exercise the same code paths.
if [ "$MODE" = gpu ]; then
  FC_ARGS=(--layers 4 --nodes 8192 --input 8192 --output 1000 --batch 8192)
  FC_BIG_ARGS=(--layers 4 --nodes 8192 --input 8192 --output 1000 --batch 16384)
  FC_SETTINGS=(--steps-per-call 5 --warmup-calls 1 --min-calls 6 --time-budget-s 3)
  # After 15 s of untimed calls: the board's sustained state (the H200 reached its power limit
  # within the 3-s runs above).
  SUSTAINED=(--warmup-s 15 --time-budget-s 30)
  OOM_LIMIT=()                        # the device's own limit (memory_stats bytes_limit)
  ACT_OOM_ARGS=(--layers 32 --nodes 8192 --input 8192 --output 1000 --batch 131072)
  RESNET_ARGS=(--batch 256 --image 224 --steps 30)
  LSTM_ARGS=(--cell lstm --layers 9 --embed 500 --length 50 --vocab 32 --batch 256)
  CNN_ARGS=(--block bottleneck --blocks 6 --filters 32 --image 200 --output 1000 --batch 128)
  RUN_SETTINGS=(--steps-per-call 5 --warmup-calls 1 --min-calls 6 --time-budget-s 3)
  # The compute-bound FC itself: on the first H100 it reached 74.5% of the measured GEMM
  # ceiling, and its per-operation times say where the rest of its step goes.
  PROFILE_ARGS=("${FC_ARGS[@]}")
  GRID_NODES="[512, 1024, 2048, 4096, 8192]"; GRID_BATCH="[256, 1024, 4096, 16384]"
  PEERS_ARGS=(--models fc1024,fc8192 --pair-timeout 110)
  PEERS_RESNET_ARGS=(--models resnet50 --frameworks torch --pair-timeout 190)
  PEERS_CNN_LSTM_ARGS=(--models cnn,lstm --pair-timeout 110)
  PEERS_LSTM_TORCH_ARGS=(--models lstm --frameworks torch --rounds 3 --pair-timeout 190)
  PEERS_CNN_TORCH_ARGS=(--models cnn --frameworks torch --rounds 3 --pair-timeout 140)
  # bench_peers.py's CNN (issue 37), bfloat16 as every GPU comparison here.
  BEST_CNN_ARGS=(--block residual --blocks 1 --filters 16 --image 64 --output 100 --batch 32 --dtype bfloat16)
  TRANSFORMER_FIXED="{layers: 2, d_model: 1024, heads: 16, d_ff: 4096, length: 512, vocab: 32000}"
  TRANSFORMER_BATCH="[8, 32, 128]"
  CNN_PROFILE_ARGS=(--block residual --blocks 4 --filters 64 --image 112 --output 1000 --batch 128)
else
  FC_ARGS=(--layers 2 --nodes 64 --input 64 --output 10 --batch 64)
  FC_BIG_ARGS=(--layers 2 --nodes 64 --input 64 --output 10 --batch 128)
  FC_SETTINGS=(--steps-per-call 2 --warmup-calls 1 --min-calls 6 --max-calls 6 --time-budget-s 0.2)
  SUSTAINED=(--warmup-s 0.2 --time-budget-s 0.5)
  OOM_LIMIT=(--memory-limit 30MB)
  ACT_OOM_ARGS=(--layers 4 --nodes 512 --input 128 --output 10 --batch 8192)  # state + batch 15 MB, activations more
  RESNET_ARGS=(--batch 4 --image 32 --dtype float32 --steps 2 --steps-per-call 1 --time-budget 0.2)
  LSTM_ARGS=(--cell lstm --layers 1 --embed 16 --length 4 --vocab 8 --batch 4)
  CNN_ARGS=(--block bottleneck --blocks 1 --filters 4 --image 32 --output 10 --batch 2)
  RUN_SETTINGS=("${FC_SETTINGS[@]}")
  PROFILE_ARGS=(--layers 2 --nodes 64 --input 64 --output 10 --batch 64)
  GRID_NODES="[16, 32, 64, 128, 256]"; GRID_BATCH="[8, 16, 32, 64]"
  PEERS_ARGS=(--tiny --models fc1024 --jax-step-loops host --torch-compile eager)
  PEERS_RESNET_ARGS=(--tiny --models resnet50 --frameworks torch --torch-compile eager)
  PEERS_CNN_LSTM_ARGS=(--tiny --models cnn,lstm --torch-compile eager)
  PEERS_LSTM_TORCH_ARGS=(--tiny --models lstm --frameworks torch --rounds 2 --torch-compile eager)
  PEERS_CNN_TORCH_ARGS=(--tiny --models cnn --frameworks torch --rounds 2 --torch-compile eager)
  BEST_CNN_ARGS=(--block residual --blocks 1 --filters 4 --image 32 --output 10 --batch 2)
  TRANSFORMER_FIXED="{layers: 1, d_model: 32, heads: 2, d_ff: 64, length: 8, vocab: 64}"
  TRANSFORMER_BATCH="[2, 4, 8]"
  CNN_PROFILE_ARGS=(--block residual --blocks 1 --filters 4 --image 32 --output 10 --batch 2)
fi

# 1. What ran where: GPU, driver, CUDA, software versions.
step env 60 --stdout "$RES/env.json" "$PY" - "$MODE" <<'EOF'
import json, platform, subprocess, sys
from importlib import metadata
import jax
out = {"mode": sys.argv[1], "python": platform.python_version(), "packages": {}}
for name in ("paradnn", "jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda12-pjrt",
             "jax-cuda13-pjrt", "flax", "optax", "numpy", "pandas", "torch", "torchvision", "nvidia-ml-py"):
    try:
        out["packages"][name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        out["packages"][name] = None
d = jax.devices()[0]
out.update(backend=d.platform, device_kind=d.device_kind, device_count=len(jax.devices()),
           memory_stats=(d.memory_stats() or None) if d.platform != "cpu" else None)
try:
    q = "name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit,compute_cap"
    out["nvidia_smi"] = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv"],
                                       capture_output=True, text=True, timeout=30).stdout
    out["nvidia_smi_full"] = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
except (OSError, subprocess.SubprocessError) as exc:
    out["nvidia_smi"] = f"not available: {type(exc).__name__}"
print(json.dumps(out, indent=1, default=str))
EOF

# ---- Part 1: the questions that matter most, in priority order. ----
if runs 1; then
# 2. The test suite's GPU tests (skipped with a reason on a CPU; part 2 runs the version-sensitive
#    CPU tests, peak table and jaxpr FLOP counter, under this machine's jax).
# The tests get a cache of their own: the suite measures peaks on a 2 s budget (tests/conftest.py),
# and a probe it cached here would be the ceiling of every measured step below (the H200 run of
# 2026-11-30: 666 TFLOP/s bfloat16 from XLA's GEMM alone, PyTorch's skipped).
step pytest_gpu 180 env PARADNN_CACHE="$(mktemp -d)" "$PY" -m pytest -q -rs -m gpu -p no:cacheprovider --junitxml="$RES/pytest_gpu.xml" \
  tests/test_gpu.py tests/test_transformer_family.py tests/test_gpuclocks.py

# 3. The measured ceiling (paradnn probe: GEMMs of N 4096 and 8192 per dtype, 1 GiB bandwidth
#    loop on a GPU), which the runs below then find in the cache; the compute-bound FC in
#    bfloat16 and float32 against the spec peak and that ceiling; float32 also pinned to full
#    float32 (JAX's default is TF32 on Hopper) and under PyTorch (whose default matmul is full
#    float32): the measured matmul_precision_used of each, and the peak it divides by.
step probe 90 --stdout "$RES/probe.json" "$PY" -m paradnn probe --json
for dt in bfloat16 float32; do
  step "fc_$dt" 90 --stdout "$RES/fc_$dt.json" "$PY" -m paradnn run fc "${FC_ARGS[@]}" --dtype "$dt" \
    "${FC_SETTINGS[@]}" --json
done
# The same FC at twice the batch: twice the GEMM time per step for the same optimizer work over
# the 277M float32 master weights (the first H100 run's bfloat16 FC spent 5.5 ms of its 21.5 ms
# step beyond its GEMMs at the ceiling; docs/gpu.md, "what the run found").
step fc_bfloat16_big 90 --stdout "$RES/fc_bfloat16_big.json" "$PY" -m paradnn run fc "${FC_BIG_ARGS[@]}" \
  --dtype bfloat16 "${FC_SETTINGS[@]}" --json
# The same FC timed after 15 s of untimed calls, with what held the clocks down
# (gpu_power_limited_fraction): the board's sustained rate, against the short run above, tells
# whether the power limit is what the FC's utilization misses (docs/gpu.md, "Where the FC's time
# went"; the H200's 3-s run drew 693 W of its 700 W).
step fc_bfloat16_sustained 90 --stdout "$RES/fc_bfloat16_sustained.json" "$PY" -m paradnn run fc "${FC_BIG_ARGS[@]}" \
  --dtype bfloat16 "${FC_SETTINGS[@]}" "${SUSTAINED[@]}" --json
step fc_float32_highest 90 --stdout "$RES/fc_float32_highest.json" "$PY" -m paradnn run fc "${FC_ARGS[@]}" \
  --dtype float32 --matmul-precision highest "${FC_SETTINGS[@]}" --json
step fc_float32_torch 120 --stdout "$RES/fc_float32_torch.json" "$PY" -m paradnn run fc "${FC_ARGS[@]}" \
  --dtype float32 --framework torch "${FC_SETTINGS[@]}" --json
# PyTorch pinned to TF32 (a small FC: the precision and torch.compile under the switch are the check).
step fc_float32_torch_tf32 90 --stdout "$RES/fc_float32_torch_tf32.json" "$PY" -m paradnn run fc --layers 2 \
  --nodes 1024 --input 1024 --output 1000 --batch 1024 --dtype float32 --framework torch --matmul-precision tf32 \
  "${FC_SETTINGS[@]}" --json

# 5. ResNet-50 bfloat16: paradnn against a hand-written Flax loop of the same network.
step resnet_loop 200 "$PY" benchmarks/bench_resnet_loop.py "${RESNET_ARGS[@]}" --json "$RES/resnet_loop.json"
# 5b. paradnn (JAX and PyTorch) against the plain loop of its own framework, bfloat16: the FC
#     4x1024 (launch-bound) and 4x8192 (compute-bound) and a Transformer block; JAX also with
#     the step loop auto does not pick (auto: host on a GPU, device on a CPU; paradnn/backends/
#     steploop.py), to measure what XLA:GPU's per-iteration wait costs the device loop
#     (benchmarks/bench_gpu_peers.py; ResNet-50 there with --models resnet50).
step gpu_peers 240 "$PY" benchmarks/bench_gpu_peers.py "${PEERS_ARGS[@]}" --json "$RES/gpu_peers.json"

# 8. The smoke sweep into the store, and its report.
# In-process: one JAX start-up for the whole sweep instead of one per config. No automatic
# retries of unstable configs (up to 4x their time each): this run's time budget is fixed.
step sweep_smoke 60 "$PY" -m paradnn sweep sweeps/smoke.yaml --store "$RES/gpu.db" --executor inprocess \
  --retry-unstable-s 0
step report_part1 60 "$PY" -m paradnn report "$RES/gpu.db" -o "$RES/report"
fi

# ---- Part 2: the rest. ----
if runs 2; then
step pytest_jax 60 env PARADNN_CACHE="$(mktemp -d)" "$PY" -m pytest -q -rs -p no:cacheprovider --junitxml="$RES/pytest_jax.xml" \
  tests/test_hardware.py tests/test_jaxpr_flops.py
# 5d. What the profiler's device events look like here (names, arguments, processes), against
#     the optimized HLO's module and operation names: the join of `paradnn profile` reads them.
step trace_diag 60 --stdout "$RES/trace_diag.json" "$PY" - "$RES/trace_diag" <<'EOF'
import glob, gzip, json, sys
import jax, jax.numpy as jnp
f = jax.jit(lambda a, b: jax.nn.relu(a @ b).sum())
a = jnp.ones((1024, 1024), jnp.bfloat16)
f(a, a).block_until_ready()
with jax.profiler.trace(sys.argv[1]):
    for _ in range(3):
        f(a, a).block_until_ready()
hlo = f.lower(a, a).compile().as_text()
events = json.load(gzip.open(sorted(glob.glob(sys.argv[1] + "/plugins/profile/*/*.trace.json.gz"))[-1], "rt"))["traceEvents"]
procs = {e.get("pid"): e.get("args", {}).get("name") for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
threads = {f"{e.get('pid')}/{e.get('tid')}": e.get("args", {}).get("name") for e in events
           if e.get("ph") == "M" and e.get("name") == "thread_name"}
xs = [e for e in events if e.get("ph") == "X"]
by_pid = {}
for e in xs:
    by_pid.setdefault(e.get("pid"), []).append({k: e.get(k) for k in ("name", "tid", "dur", "args")})
print(json.dumps({"hlo_head": hlo[:6000], "processes": procs, "threads": threads,
                  "events_per_pid": {str(k): len(v) for k, v in by_pid.items()},
                  "sample": {str(k): v[:25] for k, v in by_pid.items()}}, indent=1, default=str))
EOF
# 4. Out-of-memory predicted without allocating: weights + optimizer state just above 80 GB
#    (26 x 16384^2 float32 weights, 3 copies with rmsprop: ~80.9 GB), and activations above the
#    device's limit (compiled memory analysis).
step oom_80gb 60 --expect-rc 1 --stdout "$RES/oom_80gb.json" "$PY" -m paradnn run fc --layers 26 --nodes 16384 \
  --input 1024 --output 1000 --batch 64 --memory-limit 80GB --json
step oom_activations 90 --expect-rc 1 --stdout "$RES/oom_activations.json" "$PY" -m paradnn run fc "${ACT_OOM_ARGS[@]}" \
  "${OOM_LIMIT[@]}" "${FC_SETTINGS[@]}" --json

# 6. paradnn profile: per-operation times from the device trace joined with HLO costs.
step profile 60 "$PY" -m paradnn profile -o "$RES/profile" --steps 3 --warmup 1 fc "${PROFILE_ARGS[@]}" \
  --dtype bfloat16

# 6b. Issue 37 on the GPU: bench_peers.py's CNN and LSTM, paradnn (JAX and PyTorch) against the
#     plain loop of each framework, and paradnn at its best stack against the fastest plain loop
#     (the FC's are in gpu_peers' JSON).
step gpu_peers_cnn_lstm 330 "$PY" benchmarks/bench_gpu_peers.py "${PEERS_CNN_LSTM_ARGS[@]}" \
  --json "$RES/gpu_peers_cnn_lstm.json"
# 6b'. The PyTorch LSTM pair again, three rounds (plain, paradnn, plain, ...; the median of the
#     rounds' ratios): dispatch-bound on a GPU (3 ms steps of a few-microsecond kernels), it
#     read 0.887x on the H200 of 2026-11-30 with paradnn's own timing unstable (per-call step
#     times 3.18-3.79 ms) beside plain timings of 3.11 and 3.17 ms.
step gpu_peers_lstm_torch 200 "$PY" benchmarks/bench_gpu_peers.py "${PEERS_LSTM_TORCH_ARGS[@]}" \
  --json "$RES/gpu_peers_lstm_torch.json"
# 6b''. The PyTorch CNN pair, three rounds: paradnn's torch backend runs image models in
#     channels_last since record schema 7 (1.03-1.08x on the 2-core CPU host; on a GPU the layout
#     cuDNN's Tensor Core convolutions run in), the plain loop in torch's default NCHW.
step gpu_peers_cnn_torch 150 "$PY" benchmarks/bench_gpu_peers.py "${PEERS_CNN_TORCH_ARGS[@]}" \
  --json "$RES/gpu_peers_cnn_torch.json"
# 6c. `--framework best` on issue 37's CNN: its calibration on this GPU (JAX and PyTorch timed in
#     child processes; this image has no TensorFlow) and the record that names the framework that ran.
step best_cnn 180 --stdout "$RES/best_cnn.json" "$PY" -m paradnn run cnn "${BEST_CNN_ARGS[@]}" --framework best \
  "${RUN_SETTINGS[@]}" --json

# 7. A paper LSTM and a paper CNN (bfloat16).
step lstm 90 --stdout "$RES/lstm.json" "$PY" -m paradnn run rnn "${LSTM_ARGS[@]}" --dtype bfloat16 \
  "${RUN_SETTINGS[@]}" --json
step cnn 90 --stdout "$RES/cnn.json" "$PY" -m paradnn run cnn "${CNN_ARGS[@]}" --dtype bfloat16 \
  "${RUN_SETTINGS[@]}" --json

# 5c. PyTorch ResNet-50 bfloat16 against a plain torch.compile loop (JAX's is part 1's resnet_loop;
#     the first H100 run cut this pair at 108 s: torch.compile of ResNet-50 takes longer).
step gpu_peers_resnet 200 "$PY" benchmarks/bench_gpu_peers.py "${PEERS_RESNET_ARGS[@]}" --json "$RES/gpu_peers_resnet.json"

# 8. Sweeps into one store: the smoke sweep and a 20-config FC grid (5 widths x 4 batches).
cat > "$RES/fc_grid20.yaml" <<EOF
description: 20-config FC grid for the GPU check (5 widths x 4 batches, bfloat16)
family: fc
fixed: {layers: 4, input: 2000, output: 1000}
axes: {nodes: $GRID_NODES, batch: $GRID_BATCH}
dtypes: [bfloat16]
settings: {steps_per_call: 5, warmup_calls: 1, min_calls: 6, max_calls: 20, time_budget_s: 1.0}
EOF
step sweep_fc_grid20 150 "$PY" -m paradnn sweep "$RES/fc_grid20.yaml" --store "$RES/gpu.db" \
  --executor inprocess --retry-unstable-s 0


# 9. The largest ResNet-50 batch that fits (compiled memory analysis; powers of two from 512).
#    No trial run (each ResNet-50 compile costs tens of seconds); the CPU smoke uses a tiny FC.
step maxbatch 150 --stdout "$RES/maxbatch.json" "$PY" - "$MODE" <<'EOF'
import json, sys
from paradnn import FC, Real
from paradnn.experiments.maxbatch import max_batch
if sys.argv[1] == "gpu":
    result = max_batch(Real("resnet50"), dtype="bfloat16", start=512, limit=8192, trial=False)
else:
    result = max_batch(FC(2, 256, 512, 10), memory_limit_bytes=30_000_000, start=1024, limit=65536, trial=False)
print(json.dumps(result, default=str))
EOF

# 9b. The Transformer family at three batch sizes (bfloat16, JAX and PyTorch) into the same store,
#     and an operation-level profile of a CNN (the FC's is step 6).
cat > "$RES/transformer3.yaml" <<EOF
description: the Transformer family at three batch sizes for the GPU check (bfloat16)
family: transformer
fixed: $TRANSFORMER_FIXED
axes: {batch: $TRANSFORMER_BATCH, framework: [jax, torch]}
dtypes: [bfloat16]
settings: {warmup_calls: 1, min_calls: 6, max_calls: 20, time_budget_s: 1.0}
EOF
# The process executor (JAX and PyTorch never share a process: one worker each).
step sweep_transformer 150 "$PY" -m paradnn sweep "$RES/transformer3.yaml" --store "$RES/gpu.db" \
  --retry-unstable-s 0
step profile_cnn 90 "$PY" -m paradnn profile -o "$RES/profile_cnn" --steps 3 --warmup 1 cnn "${CNN_PROFILE_ARGS[@]}" \
  --dtype bfloat16

# 10. The report of the store (normally made on the CPU host after bringing gpu.db back).
step report 60 "$PY" -m paradnn report "$RES/gpu.db" -o "$RES/report"

fi

# Summary: every check with its value, target and verdict.
"$PY" - "$RES" "$MODE" "$BUDGET_S" "$(( $(date +%s) - START ))" <<'EOF'
import json, sys, xml.etree.ElementTree as ET
from pathlib import Path

from paradnn.gpuclocks import clocks_text
from paradnn.units import si

out, mode, budget, elapsed = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
gpu = mode == "gpu"
steps = {s["step"]: s for s in map(json.loads, (out / "steps.jsonl").read_text().splitlines())}


def load(name):
    """A step's JSON output: the whole file, else its last line (a library may print first)."""
    try:
        text = (out / name).read_text().strip()
    except OSError:
        return None
    for candidate in (text, text.splitlines()[-1] if text else ""):
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    return None


checks = []


def pct(x):
    """A fraction as a percentage; "n/a" where a record has none (no usable peak on a busy host)."""
    return "n/a" if x is None else f"{x:.1%}"


def num(x, spec=".1f"):
    return "n/a" if x is None else format(x, spec)


def check(name, value, target, ok, note="", step=None):
    """One row of the summary; a check whose step did not run reads "not run" (never FAIL: a
    step left out or cut by the budget measured nothing, right or wrong)."""
    if step is not None and step not in steps:
        value, verdict = "", "not run (the other part, or not in STEPS)"
    elif step is not None and steps[step].get("status") == "skipped":
        value, verdict = steps[step].get("reason", ""), "not run (skipped)"
    else:
        verdict = "n/a" if ok is None else ("pass" if ok else "FAIL")
    checks.append({"check": name, "value": value, "target": target, "verdict": verdict, "note": note})


def step_ok(name):
    return steps.get(name, {}).get("status") == "ok"


for xml_name, label in (("pytest_gpu.xml", "pytest -m gpu"), ("pytest_jax.xml", "peak table and FLOP counter tests")):
    step_name = xml_name.removesuffix(".xml")
    try:
        suite = ET.parse(out / xml_name).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        n, f, e, s = (int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
        value = f"{n - f - e - s} passed, {f + e} failed, {s} skipped"
        # On a GPU a skipped GPU test means the GPU was not the default backend: a failure.
        ok = f + e == 0 and n > 0 and (s == 0 if (gpu and "gpu" in xml_name) else True)
    except (OSError, ET.ParseError, AttributeError):
        value, ok = "no result", False
    check(label, value, "all pass" + (", none skipped" if gpu and "gpu" in xml_name else ""), ok, step=step_name)

probe = load("probe.json")
if probe:
    c, pk = probe["ceilings"]["bfloat16"], probe["peaks"]["bfloat16"]
    spec_bw = (probe.get("spec") or {}).get("peak_bytes_per_sec")
    value = (f"bfloat16 {si(c['flops'], 'FLOP/s')} ({c['flops'] / pk['flops']:.1%} of the {pk['source']} peak "
             f"{si(pk['flops'], 'FLOP/s')}); float32 {si(probe['ceilings']['float32']['flops'], 'FLOP/s')}; "
             f"bandwidth {si(c['bytes_per_sec'], 'B/s')}" + (f" ({c['bytes_per_sec'] / spec_bw:.1%} of spec)" if spec_bw else "")
             + "; bfloat16 by method (the ceiling is the best): "
             + ", ".join(f"{m} {si(v, 'FLOP/s')}" for m, v in (probe.get("gemm") or {}).get("bfloat16", {}).items())
             + f"; probe {c['id']}; clocks while its GEMMs ran: {clocks_text(probe.get('gemm_clocks') or {})}"
             ) if c.get("flops") and pk.get("flops") else (
                 f"no usable bfloat16 probe: {c.get('method')}; float32 ceiling "
                 f"{si(probe['ceilings']['float32'].get('flops'), 'FLOP/s')}")
    check("measured ceiling (paradnn probe)", value,
          "below the spec in every dtype and bandwidth (H100 SXM: about 790-800 TFLOP/s bf16 expected on 8192^3)",
          (not probe.get("above_spec") and bool(c.get("flops")) and pk["source"] == "spec"
           and c["flops"] <= pk["flops"]) if gpu
          # On a CPU (the rehearsal): that the probe measured; a busy shared host makes it
          # contended (no ceiling then, by design), and bfloat16 is emulated and often noisy.
          else bool((probe.get("peak_flops") or {}).get("float32")),
          "; ".join((probe.get("above_spec") or {}).values()), step="probe")
else:
    check("measured ceiling (paradnn probe)", steps.get("probe", {}).get("status"), "probe.json written", False,
          step="probe")

for dt in ("bfloat16", "float32"):
    r = load(f"fc_{dt}.json")
    if not r or r.get("status") != "ok":
        check(f"FC {dt} layers 4 nodes 8192 batch 8192", (r or {}).get("error") or steps.get(f"fc_{dt}", {}).get("status"),
              "status ok", False, step=f"fc_{dt}")
        continue
    util = r["flops_utilization"]
    value = (f"{si(r['flops_per_sec'], 'FLOP/s')} = {pct(util)} of {si(r['peak_flops'], 'FLOP/s')} "
             f"({r['peak_source']} peak); {num(r.get('examples_per_sec'), '.0f')} examples/s")
    if dt == "bfloat16":
        check("FC bfloat16 utilization", value, ">= 70% of the dense bf16 spec peak",
              (util is not None and util >= 0.70 and r["peak_source"] == "spec") if gpu else None, step="fc_bfloat16")
        against = r.get("ceiling_utilization")
        check("FC bfloat16 against the measured ceiling",
              f"{against:.1%} of {si(r['ceiling_flops'], 'FLOP/s')} (probe {r.get('ceiling_id')})"
              if against is not None else f"no ceiling: {r.get('ceiling_method')}",
              ">= 85% of the ceiling, never above it",
              (against is not None and 0.85 <= against <= 1.0) if gpu else None, step="fc_bfloat16")
        energy = r.get("energy_per_example_j")
        check("FC bfloat16 energy per example",
              f"{energy:.4g} J/example, {num(r.get('power_w'))} W ({r.get('energy_source')}, "
              f"{num(r.get('meter_window_s'), '.3g')} s window)" if energy is not None
              else f"{r.get('energy_source')}: {r.get('energy_note')}",
              "measured by NVML on a GPU", (energy is not None and str(r.get("energy_source")).startswith("nvml"))
              if gpu else None, step="fc_bfloat16")
        stats = (load("env.json") or {}).get("memory_stats") or {}
        check("FC bfloat16 memory limit", f"{si(r.get('memory_limit_bytes'), 'B')} ({r.get('memory_limit_source')}); "
              f"the device reports bytes_limit {si(stats.get('bytes_limit'), 'B')}",
              "the device's own limit (memory_stats bytes_limit)",
              (r.get("memory_limit_source") == "device" and r.get("memory_limit_bytes") == stats.get("bytes_limit"))
              if gpu else r.get("memory_limit_source") == "device", step="fc_bfloat16")
    else:
        from paradnn.hardware import spec_peak
        entry = spec_peak(r.get("device_kind", "")) or {}
        full = entry.get("float32_full")
        tf32 = full is not None and r["flops_per_sec"] > full
        check("FC float32 utilization (TF32 peak)", value,
              "recorded; above the non-tensor FP32 peak means TF32 tensor cores ran",
              (r["peak_source"] == "spec") if gpu else None,
              f"TF32 in use: {tf32} (non-tensor FP32 peak {si(full, 'FLOP/s')})" if full else "", step="fc_float32")

r = load("fc_bfloat16_big.json") or {}
check("FC bfloat16 at twice the batch" + (" (16384)" if gpu else ""),
      (f"{si(r['flops_per_sec'], 'FLOP/s')} = {pct(r.get('flops_utilization'))} of the {r['peak_source']} peak, "
       f"{pct(r.get('ceiling_utilization'))} of the measured ceiling; step {num((r.get('step_time_s') or 0) * 1e3)} ms; "
       f"{num(r.get('power_w'))} W; clocks: {clocks_text(r)} ({r.get('gpu_clocks_note')}); warnings {r.get('warnings')}")
      if r.get("status") == "ok" else (r.get("error") or steps.get("fc_bfloat16_big", {}).get("status")),
      ">= 70% of the dense bf16 spec peak and >= 85% of the ceiling, never above it",
      (r.get("status") == "ok" and (r.get("flops_utilization") or 0) >= 0.70
       and 0.85 <= (r.get("ceiling_utilization") or 0) <= 1.0) if gpu else r.get("status") == "ok",
      step="fc_bfloat16_big")

s = load("fc_bfloat16_sustained.json") or {}
short = r.get("examples_per_sec") if r.get("status") == "ok" else None
check("FC bfloat16 at twice the batch, sustained (15 s of warm-up)",
      (f"{si(s['flops_per_sec'], 'FLOP/s')} = {pct(s.get('flops_utilization'))} of the {s['peak_source']} peak, "
       f"{pct(s.get('ceiling_utilization'))} of the measured ceiling; "
       + (f"{s['examples_per_sec'] / short:.3f}x the 3-s run; " if short else "")
       + f"{num(s.get('power_w'))} W; clocks: {clocks_text(s)} ({s.get('gpu_clocks_note')}); "
       f"cv {pct(s.get('step_time_cv'))}; warnings {s.get('warnings')}")
      if s.get("status") == "ok" else (s.get("error") or steps.get("fc_bfloat16_sustained", {}).get("status")),
      "recorded with what held the clocks down (NVML) on a GPU",
      (s.get("status") == "ok" and "not read" not in str(s.get("gpu_clocks_note"))) if gpu else s.get("status") == "ok",
      step="fc_bfloat16_sustained")

# The precision each float32 run measured itself using, and the peak that follows from it: on an
# Ampere or later GPU JAX's default is TF32; the pinned run and PyTorch's default matmul are full
# float32 (divided by the non-tensor FP32 peak: an FC has no convolution, whose TF32 default in
# PyTorch would otherwise count).
torch_installed = bool(((load("env.json") or {}).get("packages") or {}).get("torch"))
expected = {"fc_float32": "tf32", "fc_float32_highest": "highest", "fc_float32_torch": "highest",
            "fc_float32_torch_tf32": "tf32"}
for name, want in expected.items():
    r = load(f"{name}.json") or {}
    if "_torch" in name and not torch_installed:
        check(f"matmul precision measured: {name}", "PyTorch is not installed here", f"{want} on an NVIDIA GPU", None,
              step=name)
        continue
    used = r.get("matmul_precision_used")
    value = (f"{used} ({r.get('matmul_precision_bits')} bits), setting {r.get('matmul_precision')}; "
             f"peak {si(r.get('peak_flops'), 'FLOP/s')} ({r.get('peak_method')}); "
             f"{si(r.get('flops_per_sec'), 'FLOP/s')}" if r.get("status") == "ok" else
             (r.get("error") or steps.get(name, {}).get("status")))
    check(f"matmul precision measured: {name}", value, f"{want} on an NVIDIA GPU",
          (used == want and (r.get("flops_utilization") or 0) <= 1) if gpu else None, step=name)

for name, label, needle in (("oom_80gb", "OOM predicted, weights+state just above 80 GB", "before compiling"),
                            ("oom_activations", "OOM predicted from compiled memory analysis", "memory analysis")):
    r = load(f"{name}.json") or {}
    check(label, f"{r.get('status')}: {r.get('error')}", f"status oom, '{needle}'",
          r.get("status") == "oom" and needle in (r.get("error") or ""), step=name)

r = load("resnet_loop.json")
if r:
    check("ResNet-50 bfloat16 batch 256 vs hand-written Flax loop" if gpu else "ResNet-50 vs hand-written loop (tiny)",
          f"paradnn {num(r.get('paradnn_examples_per_sec'))} vs {num(r.get('hand_examples_per_sec'))} examples/s = "
          f"{num(r.get('ratio'), '.3f')}x; utilization {pct(r.get('paradnn_flops_utilization'))} ({r.get('paradnn_peak_source')})",
          ">= 0.97x", ((r.get("ratio") or 0) >= 0.97) if gpu else None, step="resnet_loop")
else:
    check("ResNet-50 vs hand-written Flax loop", steps.get("resnet_loop", {}).get("status"), ">= 0.97x", False,
          step="resnet_loop")

for peers_step in ("gpu_peers", "gpu_peers_resnet", "gpu_peers_cnn_lstm", "gpu_peers_lstm_torch",
                   "gpu_peers_cnn_torch"):
  loaded = load(f"{peers_step}.json") or {}
  peers = loaded.get("pairs")
  # paradnn at its best stack against the fastest plain loop, per model (issue 37; the bench
  # leaves it empty where one framework was asked for, as in gpu_peers_resnet).
  for b in loaded.get("best_stack") or []:
      check(f"{b['model']}: paradnn at its best stack vs the fastest plain loop",
            (f"paradnn ({b['paradnn_framework']}) {num(b['paradnn_examples_per_sec'])} vs plain "
             f"({b['peer_framework']}) {num(b['peer_examples_per_sec'])} examples/s = {b['ratio']:.3f}x"
             + ("" if b["complete"] else f"; incomplete: {b['frameworks_not_ok']}")) if "ratio" in b
            else f"no pair ran: {b['frameworks_not_ok']}",
            f">= {b['target_ratio']}x, both frameworks ran", bool(b.get("pass")) if gpu else b.get("complete"),
            step=peers_step)
  if peers:
    for p in peers:
        label = f"{p['model']} {p['framework']} vs its plain loop ({p.get('dtype')}, batch {p.get('batch')})"
        if p.get("status") == "unsupported":
            check(label, p.get("error") or "unsupported", ">= 0.97x", None, step=peers_step)
            continue
        loops = p.get("paradnn_examples_per_sec_by_step_loop")
        check(label, (f"paradnn {num(p.get('paradnn_examples_per_sec'))} vs plain {num(p.get('plain_examples_per_sec'))} "
                      f"examples/s = {num(p.get('ratio'), '.3f')}x"
                      + (f"; by step loop {loops}" if loops else "")
                      + (f"; median of {p['rounds']} rounds: " + ", ".join(num(x, '.3f') for x in p["ratio_rounds"])
                         if p.get("rounds") else "")) if p.get("status") == "ok"
              else f"{p.get('status')}: {p.get('error')}",
              ">= 0.97x", ((p.get("ratio") or 0) >= 0.97) if gpu else p.get("status") == "ok", step=peers_step)
  else:
    check(f"paradnn vs plain loops (bench_gpu_peers.py, {peers_step})", steps.get(peers_step, {}).get("status"),
          f"{peers_step}.json written", False, step=peers_step)

for name in ("lstm", "cnn"):
    r = load(f"{name}.json") or {}
    ok = r.get("status") == "ok"
    value = (f"{num(r.get('examples_per_sec'))} examples/s, utilization {pct(r.get('flops_utilization'))} of "
             f"{si(r['peak_flops'], 'FLOP/s')} ({r['peak_source']} peak)") if ok else f"{r.get('status')}: {r.get('error')}"
    check(f"paper {name.upper()} config (bfloat16)", value, "status ok, recorded", ok, step=name)

r = load("best_cnn.json") or {}
try:
    calibration = json.loads(r.get("best_calibration") or "null") or {}
except ValueError:
    calibration = {}
check("--framework best on the bench CNN",
      (f"ran {r.get('framework')} ({r.get('framework_choice')}); calibration {calibration.get('id')}: "
       + ", ".join(f"{fw} {num(v, '.0f')}" for fw, v in (calibration.get("examples_per_sec") or {}).items())
       + " examples/s" + (f"; could not run: {calibration.get('errors')}" if calibration.get("errors") else "")
       + f"; {calibration.get('rule')}") if r.get("status") == "ok" else f"{r.get('status')}: {r.get('error')}",
      "status ok; the record names the framework that ran and its calibration",
      r.get("status") == "ok" and r.get("framework_choice") == "best" and calibration.get("chosen") == r.get("framework"),
      step="best_cnn")

attrs = load("profile/ops.json") if (out / "profile" / "ops.json").exists() else None
if attrs:
    # Profiles from before the split (2026-11-30) list every such operation under above_roof_ops only.
    above = attrs.get("above_compute_peak_ops", attrs.get("above_roof_ops"))
    check("paradnn profile per-operation times", f"device platform {attrs.get('device_platform')}, FLOPs matched "
          f"{attrs.get('flops_matched_fraction', float('nan')):.1%}, approximate={attrs.get('approximate')}, "
          f"operations above the compute peak: {above}; above the memory slope only (XLA's byte count an "
          f"upper bound): {attrs.get('above_memory_roof_ops')}",
          "device-event times; > 50% of HLO FLOPs matched; no operation above the compute peak (the H200's first "
          "profile counted each two-kernel GEMM twice)",
          (attrs.get("device_platform") == "gpu" and not attrs.get("approximate")
           and attrs.get("flops_matched_fraction", 0) > 0.5 and above == []) if gpu else step_ok("profile"),
          step="profile")
else:
    check("paradnn profile per-operation times", steps.get("profile", {}).get("status"), "ops.csv written", False,
          step="profile")

sweep_step = "sweep_smoke" if "sweep_smoke" in steps else "sweep_fc_grid20"
try:
    from paradnn import store
    df = store.load(out / "gpu.db")
    # The smoke sweep has 5 configs (part 1), the FC grid 20 and the Transformer sweep 6 (part 2).
    expected = 5 * ("sweep_smoke" in steps) + 20 * ("sweep_fc_grid20" in steps)
    fc_like = df[df["family"] != "transformer"] if "family" in df.columns else df
    counts = fc_like["status"].value_counts().to_dict()  # the Transformer sweep has its own check
    check("sweeps (smoke in part 1, 20-config FC grid in part 2) into gpu.db", f"{len(fc_like)} records: {counts}",
          f"{expected} records, none failed but oom", len(fc_like) >= expected and set(counts) <= {"ok", "oom"},
          step=sweep_step)
except Exception as exc:  # noqa: BLE001 - the store may be missing when its step failed
    df = None
    check("sweeps into gpu.db", f"{type(exc).__name__}: {exc}", "records", False, step=sweep_step)

try:
    t = df[df["family"] == "transformer"] if df is not None and "family" in df.columns else None
    if t is None:
        raise LookupError("no store")
    by = t.groupby(["framework", "status"]).size().to_dict() if len(t) else {}
    check("Transformer family, 3 batch sizes x JAX and PyTorch (bfloat16)",
          f"{len(t)} records: {by}" + ("; examples/s " + ", ".join(
              f"{r.framework} b{r.batch} {num(r.examples_per_sec, '.0f')}" for r in t.itertuples()) if len(t) else ""),
          "6 records, none failed but oom", len(t) >= 6 and set(t["status"]) <= {"ok", "oom"}, step="sweep_transformer")
except Exception as exc:  # noqa: BLE001 - no store when its steps failed
    check("Transformer family sweep", f"{type(exc).__name__}: {exc}", "6 records", False, step="sweep_transformer")

# Executed FLOPs (XLA's count plus the custom calls counted from the HLO) against the analytic
# count of every measured record: on a GPU the matmuls, convolutions and attention are cuBLAS and
# cuDNN custom calls, counted by paradnn (the first H100 run read ResNet-50 at 1.38x before the
# backward-convolution calls were counted right).
counted = {name: load(f"{name}.json") for name in ("fc_bfloat16", "fc_bfloat16_big", "fc_float32", "lstm", "cnn")}
counted["resnet50"] = (load("resnet_loop.json") or {}).get("paradnn_record")
if df is not None and "model_flops_per_step" in df.columns:
    for r in df.to_dict("records"):
        counted[f"{r.get('family')} {r.get('framework')} b{r.get('batch')} ({str(r.get('key'))[:6]})"] = r
ratios, flagged = {}, []
for name, r in counted.items():
    if not r or r.get("status") != "ok" or not r.get("flops_per_step") or not r.get("model_flops_per_step"):
        continue
    ratios[name] = r["flops_per_step"] / r["model_flops_per_step"]
    if "flops_mismatch" in str(r.get("warnings") or ""):
        flagged.append(name)
check("executed / analytic FLOPs of every ok record",
      (f"{len(ratios)} records, {min(ratios.values()):.3f}x to {max(ratios.values()):.3f}x; flops_mismatch: "
       + (", ".join(f"{n} {ratios[n]:.3f}x" for n in flagged) or "none")) if ratios else "no records",
      "no flops_mismatch on a GPU", (not flagged) if gpu and ratios else None,
      "; ".join(f"{n} {v:.3f}x" for n, v in ratios.items() if "(" not in n))

ops_cnn = load("profile_cnn/ops.json")
check("paradnn profile of a CNN", (f"device platform {ops_cnn.get('device_platform')}, FLOPs matched "
      f"{pct(ops_cnn.get('flops_matched_fraction'))}") if ops_cnn else steps.get("profile_cnn", {}).get("status"),
      "ops.csv written", ops_cnn is not None, step="profile_cnn")

r = load("maxbatch.json") or {}
check("maxbatch ResNet-50 bfloat16" if gpu else "maxbatch (tiny FC)",
      f"batch {r.get('batch')} within {r.get('memory_limit_bytes')} B ({r.get('limit_source')})",
      "a batch found", r.get("batch") is not None, step="maxbatch")
report_step = "report" if "report" in steps else "report_part1"
check("report of gpu.db", steps.get(report_step, {}).get("status"), "index.html written",
      (out / "report" / "index.html").exists(), step=report_step)

env = load("env.json") or {}
summary = {"mode": mode, "elapsed_s": elapsed, "budget_s": budget, "env": {k: env.get(k) for k in
           ("backend", "device_kind", "device_count", "python", "packages", "nvidia_smi")},
           "steps": list(steps.values()), "checks": checks}
(out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
lines = [f"# paradnn GPU validation ({mode})", "",
         f"Device: {env.get('device_kind')} ({env.get('backend')}); jax {(env.get('packages') or {}).get('jax')}; "
         f"{elapsed} s of a {budget} s budget.", "", "| check | value | target | verdict |", "|---|---|---|---|"]
lines += [f"| {c['check']} | {c['value']}{' — ' + c['note'] if c['note'] else ''} | {c['target']} | {c['verdict']} |"
          for c in checks]
lines += ["", "| step | status | seconds |", "|---|---|---|"]
lines += [f"| {s['step']} | {s['status']} | {s.get('seconds', '')} |" for s in steps.values()]
(out / "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
failed = [c for c in checks if c["verdict"] == "FAIL"]
sys.exit(1 if failed else 0)
EOF
rc=$?
cp "$RES/summary.json" "$RES/summary.md" "$OUT_DIR/" 2>/dev/null
pack
echo "results: $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1)), $OUT_DIR/summary.md, $OUT_DIR/summary.json"
exit $rc
