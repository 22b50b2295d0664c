"""Operator micro-benchmarks: the paper's FLOP counts, parsers, real op rows in the store and on
the roofline next to model points, the CPU thread scan, the CLI."""

import io
import json
import os
import subprocess

import pandas as pd
import pytest

import paradnn
from paradnn.experiments import ops
from paradnn.errors import SpecError
from paradnn.store import Store


def test_paper_shapes_reproduce_the_table_flops():
    # "Benchmarking the Performance and Power of AI Accelerators for AI Training", Table 4.
    table = [1.72e10, 1.37e11, 1.10e12, 5.72e10, 2.28e11, 4.40e11]
    for shape, flops in zip(ops.PAPER_SHAPES, table):
        assert shape.flops() == pytest.approx(flops, rel=0.005), shape.label()
    assert ops.PAPER_SHAPES[3].out_hw() == (109, 109)  # VALID padding, stride 2


def test_parsers_and_bad_shapes():
    assert ops.parse_matmul("2x3x4").fields() == {"op": "matmul", "batch": 1, "m": 2, "n": 3, "k": 4}
    assert ops.parse_matmul("5x2x3x4").flops() == 2 * 5 * 2 * 3 * 4
    conv = ops.parse_conv2d("256,224,224,3:7,7,64:2")
    assert conv == ops.PAPER_SHAPES[3]
    for bad in ("12x3", "0x1x1", "axbxc", "1x1x1x1x1"):
        with pytest.raises(SpecError, match="matmul"):
            ops.parse_matmul(bad)
    for bad in ("1,8,8,3:3,3,4", "1,8,8:3,3,4:1", "1,8,8,3:3,3,4:0"):
        with pytest.raises(SpecError, match="conv2d"):
            ops.parse_conv2d(bad)
    with pytest.raises(SpecError, match="kernel"):
        ops.parse_conv2d("1,2,2,3:3,3,4:1")


def test_op_rows_in_the_store_and_on_the_roofline_with_model_points(tiny_settings, tmp_path):
    from paradnn import analysis, plots
    from paradnn.runner import run
    from paradnn.families.fc import FC

    db = tmp_path / "ops.db"
    records = [ops.measure_op(ops.parse_matmul("32x32x32"), "float32", tiny_settings),
               ops.measure_op(ops.parse_conv2d("1,8,8,3:3,3,4:1"), "float32", tiny_settings)]
    model = run(FC(layers=1, nodes=16, input=8, output=4), batch=8, settings=tiny_settings)
    with Store(db) as store:
        for rec in [*records, model]:
            assert store.add(rec)
    df = paradnn.load(db)
    assert sorted(df["family"]) == ["fc", "op", "op"]
    op = df[df["family"] == "op"].set_index("op")
    assert (op["status"] == "ok").all() and set(op["kind"]) == {"op"}
    mm = op.loc["matmul"]
    assert mm["model_flops_per_step"] == 2 * 32**3
    # The op's own measured precision under its setting (XLA:CPU: full float32).
    assert mm["matmul_precision_used"] == "highest" == op.loc["conv2d"]["matmul_precision_used"]
    assert mm["matmul_precision"] == "default" and mm["matmul_precision_bits"] > 19
    assert mm["flops_per_sec"] == pytest.approx(2 * 32**3 / mm["step_time_s"])
    assert mm["flops_utilization"] == pytest.approx(mm["flops_per_sec"] / mm["peak_flops"])
    # On a CPU the ceiling is the peak's own probe.
    assert mm["ceiling_id"] == mm["peak_id"] and mm["ceiling_utilization"] == pytest.approx(mm["flops_utilization"])
    assert mm["arithmetic_intensity"] == pytest.approx(2 * 32**3 / mm["bytes_per_step"])
    # XLA counts the same matmul FLOPs as the analytic formula.
    assert mm["xla_flops_per_op"] == pytest.approx(2 * 32**3, rel=0.01)
    # Analyses that select a model family never see op rows.
    assert len(df[df["family"] == "fc"]) == 1
    assert len(analysis.roofline(df[df["family"] == "fc"])) == 1

    # The HTML report reads model rows only: op rows at two dtypes (a would-be dtype
    # comparison with nothing to join) must not break it.
    from paradnn.report import write_report

    half = df[df["family"] == "op"].assign(dtype="bfloat16", key=lambda d: d["key"] + "h")
    write_report(pd.concat([df, half], ignore_index=True), tmp_path / "report")
    assert (tmp_path / "report" / "index.html").exists()

    points = ops.roofline_points(df)
    assert sorted(points["point"]) == ["model", "op", "op"]
    assert set(points.loc[points["point"] == "op", "label"]) == {
        "matmul 32x32x32", "conv2d F(1,8,8,3) K(3,3,3,4) S1"}
    assert points.loc[points["point"] == "model", "label"].iloc[0] == "fc"
    assert (points["roof_fraction"] == points["flops_per_sec"] / points["roof_flops_per_sec"]).all()
    fig = plots.ops_roofline(points)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:4] == b"\x89PNG"
    ax = fig.axes[0]
    assert "[FLOP/B]" in ax.get_xlabel() and "[FLOP/s]" in ax.get_ylabel()
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {"models", "matmul 32x32x32"}


@pytest.mark.slow
def test_thread_scan_limits_xla_cpu_threads_by_affinity(tiny_settings):
    cpus = len(os.sched_getaffinity(0))
    threads = [1, 2] if cpus >= 2 else [1]
    rows = ops.thread_scan([ops.parse_matmul("64x64x64")], threads, settings=tiny_settings)
    assert [r["threads"] for r in rows] == threads
    assert all(r["status"] == "ok" and r["thread_limit"] == "sched_setaffinity" for r in rows)
    assert len(rows[0]["cpu_affinity"].split(",")) == 1
    # Every count divides by the same (whole-host) peak, probed in this process.
    assert len({r["peak_flops"] for r in rows}) == 1 and "the whole host" in rows[0]["peak_method"]
    if cpus >= 2:
        # XLA:CPU sizes its thread pools from the affinity at start: more CPUs, more threads.
        assert rows[1]["os_threads"] > rows[0]["os_threads"]
    with pytest.raises(SpecError, match="threads"):
        ops.thread_scan([ops.parse_matmul("8x8x8")], [cpus + 1])


def test_cli_ops_json_store_and_bad_input(paradnn_cmd, tmp_path):
    db = tmp_path / "o.db"
    proc = subprocess.run(
        [*paradnn_cmd, "ops", "--matmul", "16x16x16", "--steps-per-call", "2", "--warmup-s", "0",
         "--min-calls", "6", "--max-calls", "6", "--time-budget-s", "0.2", "--json", "--store", str(db)],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["rows"]
    assert [(r["op"], r["m"], r["dtype"], r["status"]) for r in rows] == [("matmul", 16, "float32", "ok")]
    assert len(paradnn.load(db)) == 1
    bad = subprocess.run([*paradnn_cmd, "ops", "--conv2d", "1,8,8,3:3,3,4"], capture_output=True, text=True)
    assert bad.returncode == 2 and "conv2d" in bad.stderr and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
