"""Every plot returns an Agg Figure with the expected axes, labels (with units) and marks."""

import io
import sys
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from paradnn import analysis as A
from paradnn import plots as P
from paradnn.errors import ParadnnError

sys.path.insert(0, str(Path(__file__).parent / "data"))
import golden  # noqa: E402


@pytest.fixture(scope="module")
def gold():
    return golden.make_frame()


def _check(fig):
    assert isinstance(fig, Figure) and isinstance(fig.canvas, FigureCanvasAgg)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"
    return fig.axes[0]


def _texts(ax):
    return [t.get_text() for t in ax.texts]


def test_heatmap_log2_axes_oom_and_colorbar(gold):
    hm = A.heatmap(gold[gold.family == "fc"], "batch", "nodes", "flops_utilization",
                   fixed={"layers": 16, "device_kind": "synthetic-a"})
    fig = P.heatmap(hm)
    ax = _check(fig)
    assert ax.get_xlabel() == "batch (examples, log2 scale)"
    assert ax.get_ylabel() == "nodes (units/layer, log2 scale)"
    # log2 axes: ticks at log2 of the values, labelled with the values
    assert [t.get_text() for t in ax.get_xticklabels()] == ["64", "256", "1024", "4096"]
    assert list(ax.get_xticks()) == [6.0, 8.0, 10.0, 12.0]
    assert _texts(ax).count("OOM") == (hm.status == "oom").sum() == 4
    cbar_ax = fig.axes[1]
    assert cbar_ax.get_ylabel() == "FLOPS utilization (fraction of peak)"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "out of memory (oom)" in legend


def test_heatmap_throughput_unit_and_bad_input(gold):
    hm = A.heatmap(gold[gold.family == "rnn"], "batch", "embed", "examples_per_sec")
    fig = P.heatmap(hm)
    _check(fig)
    assert fig.axes[1].get_ylabel() == "throughput (examples/s)"
    with pytest.raises(ParadnnError, match="analysis.heatmap"):
        P.heatmap(pd.DataFrame({"a": [1]}))


def test_sensitivity_bars(gold):
    fc = gold[(gold.family == "fc") & (gold.device_kind == "synthetic-b")]
    s = A.sensitivity(fc, "flops_utilization", ["layers", "nodes", "batch"], log2=True)
    ax = _check(P.sensitivity(s))
    assert len(ax.patches) == 3
    assert ax.get_xlabel() == "standardized weight (SD of flops_utilization per SD of feature)"
    assert "R^2 = " in ax.get_title() and "bootstrap CI" in ax.get_title()
    assert [t.get_text() for t in ax.get_yticklabels()] == list(s["feature"][::-1])


def test_roofline_roof_source_real_models_and_colour(gold):
    rf = A.roofline(gold)
    fig = P.roofline(rf, color_by="batch")
    ax = _check(fig)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlabel() == "arithmetic intensity (FLOP/B)"
    assert ax.get_ylabel() == "achieved (FLOP/s)"
    legend = " | ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert "spec peak" in legend and "measured peak" in legend and "real models" in legend
    assert {"resnet50", "transformer"} <= set(_texts(ax))
    assert fig.axes[1].get_ylabel().startswith("batch (examples")
    one = P.roofline(A.roofline(gold[gold.device_kind == "synthetic-b"]))
    legend = " | ".join(t.get_text() for t in one.axes[0].get_legend().get_texts())
    assert "measured peak" in legend and "spec peak" not in legend


def test_roofline_on_a_frame_with_given_peaks():
    df = pd.DataFrame({"arithmetic_intensity": [1.0, 100.0], "flops_per_sec": [5.0, 80.0]})
    ax = _check(P.roofline(A.roofline(df, peak_flops=100.0, peak_bytes_per_sec=10.0)))
    legend = " | ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert "roof (given peak)" in legend


def test_speedup_scatter(gold):
    c = [c for c in A.comparisons(gold) if c.kind == "platform"][0]
    sp = A.speedup_of(c)
    fig = P.speedup(sp)
    ax = _check(fig)
    assert ax.get_xlabel() == "trainable parameters (count), log scale"
    assert ax.get_ylabel() == "speedup (x, ratio of examples_per_sec [examples/s])"
    assert c.a in ax.get_title() and c.b in ax.get_title()
    assert any(line.get_ydata()[0] == 1.0 for line in ax.get_lines())  # the no-speedup line


def test_family_ranges_params_and_utilization(gold):
    pr = A.params_range(gold)
    ax = _check(P.params_range(pr))
    assert ax.get_xlabel() == "trainable parameters (count), log scale"
    assert [t.get_text() for t in ax.get_yticklabels()] == list(dict.fromkeys(pr["label"]))
    ur = A.family_ranges(gold, "flops_utilization", by="device_kind")
    ax = _check(P.utilization_comparison(ur))
    assert ax.get_xlabel() == "FLOPS utilization (fraction of peak)"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["synthetic-a", "synthetic-b"]


def test_saturation_plot(gold):
    curves = A.saturation(gold[gold.family == "fc"])
    ax = _check(P.saturation(curves, max_models=5))
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "batch (examples, log2 scale)"
    assert ax.get_ylabel() == "throughput (examples/s) / model's best (fraction)"
    assert "90%" in ax.get_title() and "first 5 of" in ax.get_title()
    with pytest.raises(ParadnnError, match="two or more batch sizes"):
        P.saturation(curves.iloc[0:0])


def test_op_plots():
    ops = pd.DataFrame({
        "name": ["dot", "ew", "copy"], "category": [A.oplevel.MATMUL, A.oplevel.ELEMENTWISE,
                                                    A.oplevel.FORMATTING],
        "time_s": [0.5, 0.4, 0.1], "flops": [1e10, 1e6, 0.0], "bytes": [1e8, 4e6, 1e6],
    })
    ops["time_fraction"] = ops["time_s"] / ops["time_s"].sum()
    ops["flops_per_sec"] = ops["flops"] / ops["time_s"]
    ops["arithmetic_intensity"] = ops["flops"] / ops["bytes"]
    ops.attrs.update(approximate=True, peak_source="measured")
    ax = _check(P.op_roofline(A.op_roofline(ops, 1e11, 1e9)))
    assert ax.get_xlabel() == "arithmetic intensity (FLOP/B)"
    assert ax.get_ylabel() == "achieved by the operation (FLOP/s)"
    assert "approximate (CPU)" in ax.get_title()
    legend = " | ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert "matmul/convolution fusion" in legend and "roof (measured peak)" in legend
    ax = _check(P.op_breakdown(A.op_breakdown(ops)))
    assert ax.get_xlabel() == "share of step time (%)"
    assert "approximate on CPU" in ax.get_title()
