"""Operation-level capture on real compiled XLA programs and a real profiler trace."""

import gzip
import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import optax
import pytest

from paradnn import analysis as A
from paradnn.experiments import profile
from paradnn.errors import ParadnnError

ROOT = Path(__file__).resolve().parents[1]
B, D_IN, HIDDEN, D_OUT = 128, 256, 512, 10


def _mlp():
    """A tiny hand-written MLP training step (two Dense layers, RMSProp), state donated."""
    opt = optax.rmsprop(0.01)

    def loss(p, x, y):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        return optax.softmax_cross_entropy_with_integer_labels(h @ p["w2"], y).mean()

    @partial(jax.jit, donate_argnums=0)
    def step(state, batch):
        p, o = state
        value, g = jax.value_and_grad(loss)(p, *batch)
        u, o = opt.update(g, o, p)
        return (optax.apply_updates(p, u), o), value

    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    p = {"w1": jax.random.normal(k1, (D_IN, HIDDEN)) * 0.05, "b1": jnp.zeros(HIDDEN),
         "w2": jax.random.normal(k2, (HIDDEN, D_OUT)) * 0.05}
    batch = (jnp.ones((B, D_IN)), jnp.zeros(B, jnp.int32))
    return step, (p, opt.init(p)), batch


@pytest.fixture(scope="module")
def mlp_ops():
    step, state, batch = _mlp()
    compiled = step.lower(state, batch).compile()
    return profile.capture_step(step, state, batch, steps=3, warmup=1), compiled.cost_analysis()


def test_flops_and_bytes_agree_with_xla(mlp_ops):
    ops, cost = mlp_ops
    assert ops.attrs["flops_matched_fraction"] == pytest.approx(1.0, abs=1e-3)
    assert ops.attrs["hlo_flops_per_step"] == pytest.approx(cost["flops"], rel=0.01)
    assert ops["flops"].sum() == pytest.approx(cost["flops"], rel=0.01)
    assert ops["transcendentals"].sum() == pytest.approx(cost["transcendentals"], rel=0.01)
    # matmuls: forward 2 layers, weight gradients of both, input gradient of the second only
    analytic = 2 * B * (2 * D_IN * HIDDEN + 3 * HIDDEN * D_OUT)
    matmul = ops[ops["category"] == A.oplevel.MATMUL]["flops"].sum()
    assert matmul == pytest.approx(analytic, rel=1e-6)


def test_times_joined_and_marked_approximate_on_cpu(mlp_ops):
    ops, _ = mlp_ops
    assert len(ops) >= 10 and ops["name"].is_unique
    assert (ops["time_s"] > 0).all() and ops["time_fraction"].sum() == pytest.approx(1.0)
    assert (ops["executions"] == 1).all()
    assert set(ops["category"]) <= set(A.oplevel.CATEGORIES)
    assert A.oplevel.MATMUL in set(ops["category"]) and A.oplevel.ELEMENTWISE in set(ops["category"])
    assert ops.attrs["device_platform"] == jax.devices()[0].platform
    if ops.attrs["device_platform"] == "cpu":
        assert ops.attrs["approximate"] is True and "approximate on CPU" in ops.attrs["note"]
    orf = A.op_roofline(ops, peak_flops=3e11, peak_bytes_per_sec=5e10)
    assert (orf["time_fraction"] >= 0.01).all() and (orf["flops"] > 0).all()
    assert set(orf["bound"]) <= {"memory", "compute"}


def test_convolution_flops():
    f = jax.jit(lambda x, k: jax.lax.conv_general_dilated(
        x, k, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    x, k = jnp.ones((2, 16, 16, 8)), jnp.ones((3, 3, 8, 16))
    ops = profile.hlo_ops(f.lower(x, k).compile().as_text())
    conv = ops[ops["category"] == A.oplevel.MATMUL]
    assert conv["flops"].sum() == 2 * (2 * 14 * 14 * 16) * (3 * 3 * 8)


def test_loop_body_ops_count_every_iteration():
    @jax.jit
    def step(state, batch):
        s = jax.lax.fori_loop(0, 4, lambda i, s: jnp.tanh(s @ batch), state)
        return s, s.sum()

    state, batch = jnp.ones((64, 64)), jnp.full((64, 64), 0.01)
    ops = profile.capture_step(step, state, batch, steps=2, warmup=1)
    assert "while" not in set(ops["opcode"])  # its time is its body's
    body = ops[ops["category"] == A.oplevel.MATMUL]
    assert list(body["executions"]) == [4.0]
    assert body["flops"].iloc[0] == 4 * 2 * 64 * 64 * 64


def test_bad_hlo_and_arguments():
    with pytest.raises(ParadnnError, match="ENTRY"):
        profile.parse_hlo("not hlo")
    step, state, batch = _mlp()
    with pytest.raises(ParadnnError, match="steps"):
        profile.capture_step(step, state, batch, steps=0)


def test_capture_of_a_workload():
    pytest.importorskip("paradnn.backends.jax.step")
    from paradnn.families.fc import FC
    from paradnn.workload import Workload

    ops = profile.capture(Workload(FC(layers=2, nodes=64, input=32, output=10), batch=16),
                          steps=2, warmup=1)
    assert ops.attrs["workload"]["nodes"] == 64
    assert A.oplevel.MATMUL in set(ops["category"])
    assert ops.attrs["flops_matched_fraction"] > 0.99


def test_cli_profile(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-m", "paradnn", "profile", "-o", str(tmp_path), "--steps", "2",
         "--peak-flops", "3e11", "--peak-bytes-per-sec", "5e10",
         "fc", "--layers", "2", "--nodes", "64", "--input", "32", "--output", "10", "--batch", "16"],
        capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "matmul/convolution fusion" in r.stdout and "note: per-operation times" in r.stdout
    # On a CPU an operation's event can end before its work does: one may read above the roof,
    # and the command names it.
    above = json.loads((tmp_path / "ops.json").read_text())["above_roof_ops"]
    assert all(name in r.stdout for name in above[:8])
    assert ("above the roof" in r.stdout) == bool(above)
    # (.paradnn-outputs.json is the output guard's ledger of what paradnn wrote there)
    assert {p.name for p in tmp_path.iterdir() if p.name != ".paradnn-outputs.json"} == {
        "ops.csv", "ops.json", "op_roofline.png", "op_breakdown.png"}
    # the capture feeds the report's operation-level section
    from paradnn.store import Store
    from data import golden

    with Store(tmp_path / "s.db") as s:
        s.add_rows(golden.make_frame().head(12).to_dict("records"))
    r = subprocess.run([sys.executable, "-m", "paradnn", "report", str(tmp_path / "s.db"), "-o",
                        str(tmp_path / "rep"), "--ops", str(tmp_path / "ops.csv")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "rep" / "index.html").read_text()
    assert 'data-analysis="oplevel"' in page and "approximate on CPU" in page


def test_cli_profile_without_a_quiet_peak_divides_by_the_nominal_one(tmp_path):
    """Only a contended probe on record (a spread threshold no probe meets): the op roofline
    divides by the CPU's nominal peak and says so, and the profile, its table and breakdown
    are written."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PARADNN_CACHE": str(tmp_path / "cache"),
           "PARADNN_PROBE_MAX_CV": "1e-9", "PARADNN_PROBE_BUDGET_S": "2"}
    r = subprocess.run(
        [sys.executable, "-m", "paradnn", "profile", "-o", str(tmp_path / "out"), "--steps", "2",
         "fc", "--layers", "2", "--nodes", "64", "--input", "32", "--output", "10", "--batch", "16"],
        capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "(nominal" in r.stdout and "matmul/convolution fusion" in r.stdout
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {"ops.csv", "ops.json", "op_breakdown.png",
                                                              "op_roofline.png"}


def test_cli_profile_flags_operations_above_the_roof(tmp_path):
    """A roof far below what the CPU does (1 MFLOP/s): every matmul is above it, which the
    command says, naming them, and stores in ops.json."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-m", "paradnn", "profile", "-o", str(tmp_path), "--steps", "1", "--warmup", "1",
         "--peak-flops", "1e6", "--peak-bytes-per-sec", "5e10",
         "fc", "--layers", "1", "--nodes", "32", "--input", "16", "--output", "10", "--batch", "8"],
        capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    above = json.loads((tmp_path / "ops.json").read_text())["above_roof_ops"]
    assert above and "above the roof (given peak), their times are approximate on CPU" in r.stdout
    assert all(name in r.stdout for name in above[:8])


# An optimized GPU module as XLA:GPU prints it: the matmul is a cuBLASLt custom call, to which
# XLA's cost analysis gives no FLOPs (seen on an H100 with jax 0.11.2: 2% of an FC's FLOPs).
_CUBLAS_HLO = '''HloModule jit_step, entry_computation_layout={(bf16[64,32]{1,0}, bf16[32,16]{1,0})->bf16[64,16]{1,0}}

ENTRY %main.4 (p0: bf16[64,32], p1: bf16[32,16]) -> bf16[64,16] {
  %p0 = bf16[64,32]{1,0} parameter(0)
  %p1 = bf16[32,16]{1,0} parameter(1)
  %custom-call.1 = (bf16[64,16]{1,0}, s8[4194304]{0}) custom-call(bf16[64,32]{1,0} %p0, bf16[32,16]{1,0} %p1), custom_call_target="__cublas$lt$matmul", backend_config={"gemm_backend_config":{"alpha_real":1,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"epilogue":"DEFAULT"}}
  ROOT %get-tuple-element.1 = bf16[64,16]{1,0} get-tuple-element((bf16[64,16]{1,0}, s8[4194304]{0}) %custom-call.1), index=0
}
'''


def test_custom_call_flops_counts_cublas_gemms_from_their_shapes():
    assert profile.custom_call_flops(_CUBLAS_HLO) == 2 * 64 * 16 * 32
    # A module without GEMM or convolution custom calls (every CPU module here) adds nothing.
    assert profile.custom_call_flops(_CUBLAS_HLO.replace("__cublas$lt$matmul", "Sharding")) == 0.0


def _gpu_trace(trace_dir: Path, events: list[dict]) -> None:
    """A profiler trace in the form jax 0.11.2 wrote on an H200 (device and host processes,
    kernel events carrying ``hlo_op``, ``hlo_module`` and ``scope_range_id``)."""
    meta = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:GPU:0"}},
            {"ph": "M", "pid": 701, "name": "process_name", "args": {"name": "/host:CPU"}}]
    folder = trace_dir / "plugins" / "profile" / "2026_11_29_22_16_08"
    folder.mkdir(parents=True)
    with gzip.open(folder / "vm.trace.json.gz", "wt") as f:
        json.dump({"traceEvents": meta + events}, f)


def test_gpu_trace_counts_runs_not_kernels(tmp_path):
    """A cuBLAS GEMM that launches two kernels per run (the GEMM and a split-K reduction, one
    ``scope_range_id``) runs once per step: its FLOPs are counted once per step and its time is
    both kernels'. Host events of the same operation are left out."""
    def kernel(ts, dur, scope, pid=1):
        return {"ph": "X", "pid": pid, "tid": 14, "ts": ts, "dur": dur, "name": "sm90_xmma_gemm",
                "args": {"hlo_module": "jit_step", "hlo_op": "custom-call.1", "scope_range_id": str(scope)}}

    _gpu_trace(tmp_path, [kernel(0, 10.0, 7), kernel(11, 2.0, 7), kernel(50, 10.0, 9), kernel(61, 2.0, 9),
                          kernel(49, 30.0, 9, pid=701)])
    times = profile.trace_times(str(tmp_path), "jit_step")
    assert times.set_index("name").loc["custom-call.1", ["events", "executions"]].tolist() == [4, 2]
    ops = profile.op_times(_CUBLAS_HLO, str(tmp_path), steps=2)
    row = ops.set_index("name").loc["custom-call.1"]
    assert row["executions"] == 1.0
    assert row["flops"] == 2 * 64 * 32 * 16
    assert row["time_s"] == pytest.approx(12e-6)
    # Without annotation ids (XLA:CPU's events) every event is one run.
    bare = {"hlo_module": "jit_step", "hlo_op": "custom-call.1"}
    _gpu_trace(tmp_path / "bare", [{**kernel(0, 10.0, 7), "args": bare}, {**kernel(50, 10.0, 9), "args": bare}])
    assert profile.op_times(_CUBLAS_HLO, str(tmp_path / "bare"), steps=2).loc[0, "executions"] == 1.0


def test_custom_calls_are_added_whatever_xla_counted_beside_them():
    # On an H200 a small Transformer's XLA count (its Triton GEMM fusions) came to more than its
    # cuDNN attention calls' FLOPs, and the calls were dropped: they are always added now. The
    # module is the cuBLAS one above; the compiled program's two methods are all _cost_dict reads.
    from paradnn.backends.jax import costs

    class Compiled:
        def cost_analysis(self):
            return {"flops": 1e9, "bytes accessed": 10.0}

        def as_text(self):
            return _CUBLAS_HLO

    out = costs._cost_dict(Compiled())
    assert out["custom_call_flops"] == 2 * 64 * 16 * 32
    assert out["flops"] == 1e9 + 2 * 64 * 16 * 32


def _xla_count(compiled) -> float:
    """XLA's own FLOP count of a compiled program (its CPU cost analysis)."""
    cost = compiled.cost_analysis()
    return (cost[0] if isinstance(cost, (list, tuple)) else cost)["flops"]


def _xla_conv_flops(x_shape, w_shape, layout, stride, pad):
    """XLA's own count of one strided, padded convolution."""
    def conv(x, w):
        return jax.lax.conv_general_dilated(x, w, stride, pad, dimension_numbers=layout)
    return _xla_count(jax.jit(conv).lower(jnp.ones(x_shape), jnp.ones(w_shape)).compile())


def _cudnn_call(target, operands, result, labels):
    """A cuDNN convolution custom call as XLA:GPU prints it (window and dim_labels are those of
    the forward convolution, whatever the kind)."""
    params = ", ".join(f"p{i}: bf16[{s}]" for i, s in enumerate(operands))
    body = "\n".join(f"  %p{i} = bf16[{s}]{{3,2,1,0}} parameter({i})" for i, s in enumerate(operands))
    args = ", ".join(f"bf16[{s}]{{3,2,1,0}} %p{i}" for i, s in enumerate(operands))
    return f'''HloModule jit_step

ENTRY %main ({params}) -> bf16[{result}] {{
{body}
  %conv = (bf16[{result}]{{3,2,1,0}}, u8[0]{{0}}) custom-call({args}), window={{size=3x3 stride=2x2 pad=1_1x1_1}}, dim_labels={labels}, custom_call_target="{target}"
  ROOT %gte = bf16[{result}]{{3,2,1,0}} get-tuple-element((bf16[{result}]{{3,2,1,0}}, u8[0]{{0}}) %conv), index=0
}}
'''


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_cudnn_convolution_calls_count_the_forward_convolutions_multiply_adds(layout):
    # Input [4, 9x9, 8], kernel 3x3 8 -> 16 with stride 2 and padding 1: output [4, 5x5, 16]. The
    # backward-input and backward-filter calls of the same convolution do its multiply-adds again
    # (their operands and result are the forward one's output, kernel and input in other roles).
    # Before: the backward-input call counted 2 x input-gradient elements x kernel / output
    # features (0.5x here, 4x for a 1x1 convolution from 256 to 64 features), the backward-filter
    # call read the output gradient as a kernel (its batch as output features in `oi01`), so
    # ResNet-50 read 1.38x its analytic count on an H100.
    if layout == "NHWC":
        x, w, y, labels = "4,9,9,8", "16,3,3,8", "4,5,5,16", "b01f_o01i->b01f"
        expected = _xla_conv_flops((4, 9, 9, 8), (16, 3, 3, 8), ("NHWC", "OHWI", "NHWC"), (2, 2), "SAME")
    else:
        x, w, y, labels = "4,8,9,9", "16,8,3,3", "4,16,5,5", "bf01_oi01->bf01"
        expected = _xla_conv_flops((4, 8, 9, 9), (16, 8, 3, 3), ("NCHW", "OIHW", "NCHW"), (2, 2), "SAME")
    # XLA's count leaves out the taps on padding: per spatial dimension the first output
    # position has one on the low pad and the last one on the high pad, so 5 x 3 - 2 taps.
    assert expected == 2 * 4 * 16 * 8 * 13 ** 2
    calls = {"__cudnn$convForward": ([x, w], y), "__cudnn$convBackwardInput": ([y, w], x),
             "__cudnn$convBackwardFilter": ([x, y], w)}
    for target, (operands, result) in calls.items():
        got = profile.custom_call_flops(_cudnn_call(target, operands, result, labels))
        assert got == pytest.approx(expected, rel=1e-6), target


def test_native_convolutions_count_what_xla_counts_padding_and_input_holes_left_out():
    # A strided, padded 7x7 convolution and its gradients: XLA:CPU writes the input gradient as a
    # convolution over the output gradient dilated by the stride, whose holes do no work.
    x, w = jnp.ones((2, 14, 14, 8)), jnp.ones((7, 7, 8, 16))

    def loss(x, w):
        y = jax.lax.conv_general_dilated(x, w, (2, 2), [(3, 3), (3, 3)],
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.sum(y)

    compiled = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(x, w).compile()
    ops = profile.hlo_ops(compiled.as_text())
    assert compiled.as_text().count(" convolution(") >= 1
    assert ops["flops"].sum() == pytest.approx(_xla_count(compiled), rel=1e-3)


def _convolution_flops_by_output(hlo: str) -> dict[tuple[int, ...], set[float]]:
    """Output dims -> the FLOPs counted for the convolutions (instructions or custom calls) giving them."""
    comps, _, _ = profile.parse_hlo(hlo)
    found: dict[tuple[int, ...], set[float]] = {}
    for comp in comps.values():
        for i in comp.instructions:
            if i.opcode == "convolution" or "onednn$convolution" in i.attrs:
                dims = tuple(profile._arrays(i.shape)[0][1])
                found.setdefault(dims, set()).add(profile._flops(i, comp, comps)[0])
    return found


ONEDNN_CONV = {"xla_cpu_experimental_onednn_custom_call": True}


@pytest.mark.parametrize("stride,pad,groups,dilation", [
    (2, [(3, 3), (3, 3)], 1, 1), (1, "SAME", 2, 1), (2, [(2, 1), (0, 3)], 1, 1), (1, "VALID", 1, 2)])
def test_onednn_convolution_calls_count_what_the_same_convolutions_count_without_them(stride, pad, groups, dilation):
    # XLA:CPU's oneDNN convolution calls (the option above) carry no dim_labels or window: their
    # dimensions, strides, padding and dilation are in the backend config. Before it was read,
    # each call counted 0 FLOPs and a CNN compiled with the option read a third of its count.
    x, w = jnp.ones((2, 9, 9, 8)), jnp.ones((3, 3, 8 // groups, 16))

    def loss(x, w):
        y = jax.lax.conv_general_dilated(x, w, (stride, stride), pad, rhs_dilation=(dilation, dilation),
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups)
        return jnp.sum(y * y)

    lowered = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(x, w)
    try:
        onednn = lowered.compile(ONEDNN_CONV).as_text()
    except jax.errors.JaxRuntimeError as e:  # an older jaxlib without the option
        pytest.skip(f"this jaxlib has no {next(iter(ONEDNN_CONV))} compile option: {e}")
    plain = lowered.compile().as_text()
    if "__onednn$convolution" not in onednn:
        pytest.skip("this jaxlib's XLA:CPU makes no oneDNN convolution calls (oneDNN is built for x86 only)")
    assert profile.custom_call_flops(onednn) > 0
    # Matched by output shape (forward, input gradient, kernel gradient: three distinct shapes
    # here), not summed: XLA may run a oneDNN forward convolution twice where it keeps one
    # native convolution (measured with jaxlib 0.12.0.1 on sum(y * y)).
    counted = _convolution_flops_by_output(onednn)
    assert counted == _convolution_flops_by_output(plain) and len(counted) == 3
    assert all(len(f) == 1 and min(f) > 0 for f in counted.values())


def _fmha_module(backward: bool, mask: str, b=2, t=128, h=4, d=64):
    """cuDNN fused-attention calls as ``jax.nn.dot_product_attention(implementation="cudnn")``
    compiles them on a GPU: Q, K, V ``[batch, length, heads, head_dim]`` first, the score matrix
    ``[batch, heads, queries, keys]`` in the backend config."""
    qkv = f"bf16[{b},{t},{h},{d}]{{3,2,1,0}}"
    stats = f"f32[{b},{h},{t}]{{2,1,0}}"
    names = ["q", "k", "v"] + (["stats", "do", "o"] if backward else [])
    shapes = [qkv, qkv, qkv] + ([stats, qkv, qkv] if backward else [])
    result = f"({qkv}, {qkv}, {qkv}, u8[0]{{0}})" if backward else f"({qkv}, {stats}, u8[0]{{0}})"
    target = "__cudnn$fmhaSoftmaxBackward" if backward else "__cudnn$fmhaSoftmax"
    config = ('{"operation_queue_id":"0","cudnn_fmha_backend_config":{"fmha_scale":0.125,'
              f'"intermediate_tensor_shape":{{"element_type":"BF16","dimensions":["{b}","{h}","{t}","{t}"],'
              f'"tuple_shapes":[],"layout":{{"minor_to_major":["3","2","1","0"]}}}},"mask_type":"{mask}"}}}}')
    params = "\n".join(f"  %{n} = {s} parameter({i})" for i, (n, s) in enumerate(zip(names, shapes)))
    args = ", ".join(f"{s} %{n}" for n, s in zip(names, shapes))
    return f'''HloModule jit_attention

ENTRY %main ({", ".join(f"{n}: {s.split('{')[0]}" for n, s in zip(names, shapes))}) -> {qkv} {{
{params}
  %fmha = {result} custom-call({args}), custom_call_target="{target}", backend_config={config}
  ROOT %out = {qkv} get-tuple-element({result} %fmha), index=0
}}
'''


def _xla_attention_product_flops(b=2, t=128, h=4, d=64):
    """XLA's own count of attention's two products, Q.K^T and P.V."""
    q, p = jnp.ones((b, t, h, d)), jnp.ones((b, h, t, t))

    def products(q, k, v, p):
        return jnp.einsum("bqhd,bkhd->bhqk", q, k), jnp.einsum("bhqk,bkhd->bqhd", p, v)

    return _xla_count(jax.jit(products).lower(q, q, q, p).compile())


def test_fused_attention_calls_count_their_matrix_products():
    forward = profile.custom_call_flops(_fmha_module(False, "NO_MASK"))
    backward = profile.custom_call_flops(_fmha_module(True, "NO_MASK"))
    assert forward == 2 * 2 * 4 * 128 * 128 * (64 + 64)
    assert forward == _xla_attention_product_flops()
    # The backward pass: the gradients of both operands of both products (twice the forward),
    # and the scores Q.K^T once more (flash attention keeps no score matrix): 2.5x the forward.
    assert backward == 2.5 * forward
    # A causal mask: cuDNN computes the scores on and below the diagonal only.
    causal = profile.custom_call_flops(_fmha_module(False, "CAUSAL"))
    assert causal == forward * (128 + 1) / (2 * 128)
