"""Every plot returns an Agg Figure with the expected axes, labels (with units) and marks; and a
style check on the rendered figures: full page width, no text below the legible minimum, no
tick labels (or titles) drawn over each other."""

import io
import itertools
import re

import numpy as np
import pandas as pd
import pytest
from matplotlib import colors as mcolors
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import QuadMesh
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from paradnn import analysis as A
from paradnn import plots as P
from paradnn.errors import ParadnnError

from data import golden


@pytest.fixture(scope="module")
def gold():
    return golden.make_frame()


@pytest.fixture(scope="module")
def trust():
    with pytest.MonkeyPatch.context() as mp:
        golden.ensure_warning_registry(mp)
        yield golden.make_trust_frame()


def _check(fig):
    assert isinstance(fig, Figure) and isinstance(fig.canvas, FigureCanvasAgg)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"
    return fig.axes[0]


def _texts(ax):
    return [t.get_text() for t in ax.texts]


def _legend_texts(fig):
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    return [t.get_text() for lg in legends for t in lg.get_texts()]


# -- the style check, on the rendered figure ---------------------------------------------------

def _drawn_tick_labels(ax):
    """Tick labels the renderer drew: visible, non-empty, and at a tick inside the view."""
    out = []
    for axis in (ax.xaxis, ax.yaxis):
        lo, hi = sorted(axis.get_view_interval())
        span = hi - lo
        for tick in axis.get_major_ticks() + axis.get_minor_ticks():
            loc = tick.get_loc()
            if loc is None or not (lo - 1e-9 * abs(span) <= loc <= hi + 1e-9 * abs(span)):
                continue
            for label in (tick.label1, tick.label2):
                if label.get_visible() and label.get_text().strip():
                    out.append(label)
    return out


def _inside(box, width, height, tol=1.0):
    return box.x0 >= -tol and box.y0 >= -tol and box.x1 <= width + tol and box.y1 <= height + tol


def assert_legible(fig):
    """Width of a page; every visible text at least MIN_FONT_PT (10 px at 1x); no two tick
    labels, axis titles or panel titles overlapping anywhere on the figure."""
    assert fig.get_figwidth() == pytest.approx(P.PAGE_WIDTH_IN)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    # Tick labels count only where a tick is drawn (matplotlib keeps labels of ticks outside
    # the view, not drawn).
    tick_labels = {id(lb) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
                   for tick in axis.get_major_ticks() + axis.get_minor_ticks()
                   for lb in (tick.label1, tick.label2)}
    drawn = [lb for ax in fig.axes if ax.get_visible() for lb in _drawn_tick_labels(ax)]
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()
             and id(t) not in tick_labels] + drawn
    assert texts
    small = [(t.get_text(), t.get_fontsize()) for t in texts if t.get_fontsize() < P.MIN_FONT_PT]
    assert small == [], f"text below {P.MIN_FONT_PT} pt: {small[:5]}"
    # In pixels at 1x: 10 px or more.
    assert min(t.get_fontsize() for t in texts) * P.DPI_1X / 72 >= 10 - 1e-9
    # Nothing cut off at the figure's edges.
    w, h = fig.bbox.width, fig.bbox.height
    cut = [t.get_text() for t in texts if not _inside(t.get_window_extent(renderer), w, h)]
    assert cut == [], f"text outside the figure: {cut[:5]}"
    boxes = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        boxes += [(t.get_text(), t.get_window_extent(renderer)) for t in _drawn_tick_labels(ax)]
        title = ax.title
        if title.get_visible() and title.get_text():
            boxes.append((title.get_text(), title.get_window_extent(renderer)))
    overlaps = [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2)
                if ba.width > 0 and bb.width > 0 and ba.overlaps(bb)]
    assert overlaps == [], f"overlapping labels: {overlaps[:5]}"


def test_style_check_catches_small_text_and_overlaps():
    # The check itself can fail: tiny text, and two tick labels at the same place.
    fig = Figure(figsize=(P.PAGE_WIDTH_IN, 3))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.text(0.5, 0.5, "tiny", fontsize=5)
    with pytest.raises(AssertionError, match="below"):
        assert_legible(fig)
    fig = Figure(figsize=(P.PAGE_WIDTH_IN, 3))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_xticks([0.0, 0.001], ["3x10^3", "4x10^3"], fontsize=10)
    with pytest.raises(AssertionError, match="overlapping"):
        assert_legible(fig)
    fig = Figure(figsize=(P.PAGE_WIDTH_IN, 3))
    FigureCanvasAgg(fig)
    fig.text(0.9, 0.5, "a text running off the right edge of the page")
    with pytest.raises(AssertionError, match="outside the figure"):
        assert_legible(fig)


def _paper_size_grid():
    """FC at the paper's grid sizes (6 layers x 9 nodes x 9 batches x 2 dtypes): 12 panels of
    9 x 9 cells, the densest heat map the report draws."""
    rng = np.random.default_rng(0)
    rows = [dict(family="fc", layers=la, nodes=n, input=2000, output=1000, batch=b, dtype=d,
                 status="ok" if n * la < 200_000 else "oom",
                 examples_per_sec=b * 1e6 / (n * la) * rng.uniform(0.5, 2))
            for la, n, b, d in itertools.product((4, 8, 16, 32, 64, 128), 2 ** np.arange(5, 14),
                                                 2 ** np.arange(6, 15), ("float32", "bfloat16"))]
    return pd.DataFrame(rows)


def _every_figure(gold, trust):
    fc = gold[gold.family == "fc"]
    c = [c for c in A.comparisons(trust) if c.kind == "dtype"][0]
    plat = [c for c in A.comparisons(gold) if c.kind == "platform"][0]
    ops = _ops()
    return {
        "heatmap-panels": lambda: P.heatmap(A.heatmap(fc, "batch", "nodes", "examples_per_sec", panels=True)),
        "heatmap-trust": lambda: P.heatmap(A.heatmap(
            trust[trust.family == "fc"], "batch", "nodes", "model_flops_utilization", panels=True)),
        "heatmap-paper-size": lambda: P.heatmap(A.heatmap(
            _paper_size_grid(), "batch", "nodes", "examples_per_sec", panels=True)),
        "heatmap-cnn": lambda: P.heatmap(A.heatmap(gold[gold.family == "cnn"], "batch", "filters",
                                                   "flops_utilization", panels=True)),
        "heatmap-rnn": lambda: P.heatmap(A.heatmap(gold[gold.family == "rnn"], "batch", "embed",
                                                   "examples_per_sec", panels=True)),
        "sensitivity": lambda: P.sensitivity(A.sensitivity(
            fc[fc.device_kind == "synthetic-b"], "flops_utilization", ["layers", "nodes", "batch"], log2=True)),
        "roofline": lambda: P.roofline(A.roofline(gold)),
        "roofline-trust": lambda: P.roofline(A.roofline(trust[trust.device_kind == "synthetic-a"])),
        "roofline-batch": lambda: P.roofline(A.roofline(gold), color_by="batch"),
        "speedup": lambda: P.speedup(A.speedup_of(plat)),
        "speedup-dtype": lambda: P.speedup(A.speedup_of(c, include_unstable=True)),
        "speedup-ranges": lambda: P.family_ranges(A.family_ranges(A.speedup_of(plat), "speedup")),
        "params": lambda: P.params_range(A.params_range(gold)),
        "utilization": lambda: P.utilization_comparison(
            A.family_ranges(gold, "flops_utilization", by="device_kind")),
        "utilization-unstable": lambda: P.utilization_comparison(
            A.family_ranges(trust, "model_flops_utilization", by="device_kind", include_unstable=True)),
        "saturation": lambda: P.saturation(A.saturation(fc)),
        "saturation-trust": lambda: P.saturation(A.saturation(trust[trust.family == "fc"]), max_models=8),
        "op_roofline": lambda: P.op_roofline(A.op_roofline(ops, 1e11, 1e9)),
        "op_breakdown": lambda: P.op_breakdown(A.op_breakdown(ops)),
    }


FIGURES = ["heatmap-panels", "heatmap-trust", "heatmap-paper-size", "heatmap-cnn", "heatmap-rnn", "sensitivity",
           "roofline", "roofline-trust", "roofline-batch", "speedup", "speedup-dtype",
           "speedup-ranges", "params", "utilization", "utilization-unstable", "saturation", "saturation-trust",
           "op_roofline", "op_breakdown"]


@pytest.mark.parametrize("name", FIGURES)
def test_every_figure_is_legible_at_page_width(name, gold, trust):
    assert_legible(_every_figure(gold, trust)[name]())


# -- heat maps --------------------------------------------------------------------------------

def _mesh_axes(fig):
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"
            and any(isinstance(c, QuadMesh) for c in ax.collections)]


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
    cbar_ax = fig.axes[-1]
    assert cbar_ax.get_ylabel() == "FLOPS utilization (fraction of peak), log scale"
    assert "OOM: out of memory" in _legend_texts(fig)


def test_heatmap_small_multiples_share_one_log_colour_scale(gold):
    hm = A.heatmap(gold[gold.family == "fc"], "batch", "nodes", "examples_per_sec", panels=True)
    fig = P.heatmap(hm)
    _check(fig)
    panels = _mesh_axes(fig)
    assert len(panels) == len(hm.attrs["panels"]) >= 6
    norms = {id(ax.collections[0].norm) for ax in panels}
    assert len(norms) == 1  # one colour scale for all panels
    norm = panels[0].collections[0].norm
    assert isinstance(norm, mcolors.LogNorm)
    titles = [ax.get_title() for ax in panels]
    assert any("layers=16" in t for t in titles) and any("layers=4" in t for t in titles)
    assert any("bfloat16" in t for t in titles) and any("jax 0.9.0" in t for t in titles)
    # Every cell label in one number format: 3 significant digits and an SI suffix, no exponents.
    labels = [t for ax in panels for t in _texts(ax) if t != "OOM"]
    assert labels and all(re.fullmatch(r"\d+(\.\d+)?[kMGTP]?!?", t) for t in labels), labels[:10]
    assert all(len(t.rstrip("!").rstrip("kMGTP").replace(".", "")) <= 3 for t in labels)


def test_heatmap_marks_unstable_and_flagged_cells(trust):
    fc = trust[(trust.family == "fc") & (trust.device_kind == "synthetic-a")]
    hm = A.heatmap(fc, "batch", "nodes", "examples_per_sec", fixed={"layers": 4, "dtype": "bfloat16"})
    fig = P.heatmap(hm)
    ax = _check(fig)
    hatched = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_hatch() == "xx"]
    assert len(hatched) == int(hm["unstable"].sum()) == 4
    red = [p for p in ax.patches if isinstance(p, Rectangle)
           and mcolors.to_hex(p.get_edgecolor()) == mcolors.to_hex(P.WARNING_COLOR)]
    assert len(red) == 1
    assert sum(t.endswith("!") for t in _texts(ax)) == 1
    legend = _legend_texts(fig)
    assert any("unstable timing" in t for t in legend) and any("physics warning" in t for t in legend)
    # The colour scale is set by the stable cells: the 7x noisy cells lie above it.
    norm = ax.collections[0].norm
    shaky = hm[hm.unstable]["examples_per_sec"]
    assert norm.vmax < shaky.max()
    assert norm.vmax == pytest.approx(hm[~hm.unstable]["examples_per_sec"].max())


def test_heatmap_throughput_unit_and_bad_input(gold):
    hm = A.heatmap(gold[gold.family == "rnn"], "batch", "embed", "examples_per_sec")
    fig = P.heatmap(hm)
    _check(fig)
    assert fig.axes[-1].get_ylabel() == "throughput (examples/s), log scale"
    with pytest.raises(ParadnnError, match="analysis.heatmap"):
        P.heatmap(pd.DataFrame({"a": [1]}))


def test_compact_is_one_number_format():
    assert [P.compact(v) for v in (510, 3810, 12_345_678, 0.4234, 1.0, 0.0)] == \
        ["510", "3.81k", "12.3M", "0.423", "1", "0"]
    assert P.si(1.2e14, "FLOP/s") == "120 TFLOP/s" and P.si(9e11, "B/s") == "900 GB/s"


# -- other figures ----------------------------------------------------------------------------

def test_sensitivity_bars(gold):
    fc = gold[(gold.family == "fc") & (gold.device_kind == "synthetic-b")]
    s = A.sensitivity(fc, "flops_utilization", ["layers", "nodes", "batch"], log2=True)
    ax = _check(P.sensitivity(s))
    assert len(ax.patches) == 3
    assert ax.get_xlabel() == "standardized weight (SD of flops_utilization per SD of feature)"
    assert "R^2 = " in ax.get_title() and "bootstrap CI" in ax.get_title()
    assert [t.get_text() for t in ax.get_yticklabels()] == list(s["feature"][::-1])


def test_roofline_marks_family_dtype_and_labels_roofs(gold):
    rf = A.roofline(gold)
    fig = P.roofline(rf)
    ax = _check(fig)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlabel() == "arithmetic intensity (FLOP/B, log scale)"
    assert ax.get_ylabel() == "achieved (FLOP/s, log scale)"
    legend = " | ".join(_legend_texts(fig))
    for text in ("FC", "CNN", "RNN", "real model (star)", "dtype float32", "dtype bfloat16",
                 "float32 roof, spec-sheet peak", "bfloat16 roof, spec-sheet peak",
                 "float32 roof, measured peak (paradnn probe)"):
        assert text in legend, text
    # roofs labelled on the plot itself, by dtype and source
    assert {"float32 (spec)", "bfloat16 (spec)", "float32 (measured)"} <= set(_texts(ax))
    assert {"resnet50", "transformer"} <= set(_texts(ax))
    # marker shapes differ by family
    markers = {tuple(np.round(c.get_paths()[0].vertices[:4].ravel(), 3)) for c in ax.collections
               if len(c.get_offsets())}
    assert len(markers) >= 4
    one = P.roofline(A.roofline(gold[gold.device_kind == "synthetic-b"]))
    legend = " | ".join(_legend_texts(one))
    assert "measured peak" in legend and "spec-sheet peak" not in legend


def test_roofline_without_real_models_shows_no_stars(gold):
    fig = P.roofline(A.roofline(gold[gold.kind != "real"]))
    _check(fig)
    assert not any("real" in t or "star" in t for t in _legend_texts(fig))


def test_roofline_colour_by_a_hyperparameter(gold):
    fig = P.roofline(A.roofline(gold), color_by="batch")
    _check(fig)
    assert fig.axes[1].get_ylabel().startswith("batch (examples")


def test_roofline_marks_unstable_hollow_and_warnings_red(trust):
    rows = trust[trust.device_kind == "synthetic-a"]
    fig = P.roofline(A.roofline(rows))
    ax = _check(fig)
    legend = " | ".join(_legend_texts(fig))
    assert "hollow: unstable timing" in legend and "red ring: physics warning" in legend
    hollow = sum(len(c.get_offsets()) for c in ax.collections
                 if len(c.get_offsets()) and c.get_facecolor().size == 0)
    rings = [c for c in ax.collections if len(c.get_offsets()) and c.get_facecolor().size == 0
             and mcolors.to_hex(c.get_edgecolor()[0]) == mcolors.to_hex(P.WARNING_COLOR)]
    assert sum(len(c.get_offsets()) for c in rings) == 1  # the one impossible run
    assert hollow - 1 == int((rows.stable == False).sum()) == 4  # noqa: E712


def test_roofline_on_a_frame_with_given_peaks():
    df = pd.DataFrame({"arithmetic_intensity": [1.0, 100.0], "flops_per_sec": [5.0, 80.0]})
    fig = P.roofline(A.roofline(df, peak_flops=100.0, peak_bytes_per_sec=10.0))
    _check(fig)
    assert any("roof, given peak" in t for t in _legend_texts(fig))


def test_speedup_scatter_has_a_plain_ratio_axis(gold):
    c = [c for c in A.comparisons(gold) if c.kind == "platform"][0]
    sp = A.speedup_of(c)
    fig = P.speedup(sp)
    ax = _check(fig)
    fig.canvas.draw()
    assert ax.get_xlabel() == "trainable parameters (count), log scale"
    assert ax.get_ylabel() == "speedup (x, ratio of examples_per_sec [examples/s])"
    assert c.a in ax.get_title() and c.b in ax.get_title()
    assert any(line.get_ydata()[0] == 1.0 for line in ax.get_lines())  # the no-speedup line
    ticks = [t.get_text() for t in _drawn_tick_labels(ax) if t in ax.yaxis.get_ticklabels()]
    assert ticks and all(re.fullmatch(r"\d+(\.\d+)?x", t) for t in ticks) and "1x" in ticks
    legend = _legend_texts(fig)
    assert ("real model (star)" in legend) == bool((sp["kind"] == "real").any())


def test_speedup_marks_included_unstable_workloads_hollow(trust):
    c = [c for c in A.comparisons(trust) if c.kind == "dtype"][0]
    fig = P.speedup(A.speedup_of(c, include_unstable=True))
    ax = _check(fig)
    hollow = sum(len(col.get_offsets()) for col in ax.collections
                 if len(col.get_offsets()) and col.get_facecolor().size == 0)
    assert hollow == 4
    assert not any("star" in t for t in _legend_texts(fig))  # no real models in this comparison


def test_family_ranges_params_and_utilization(gold):
    pr = A.params_range(gold)
    fig = P.params_range(pr)
    ax = _check(fig)
    assert ax.get_xlabel() == "trainable parameters (count), log scale"
    assert [t.get_text() for t in ax.get_yticklabels()] == list(dict.fromkeys(pr["label"]))
    ur = A.family_ranges(gold, "flops_utilization", by="device_kind")
    fig = P.utilization_comparison(ur)
    ax = _check(fig)
    assert ax.get_xlabel() == "FLOPS utilization (fraction of peak)"
    assert _legend_texts(fig) == ["synthetic-a", "synthetic-b"]


def test_speedup_ranges_use_ratio_ticks(gold):
    c = [c for c in A.comparisons(gold) if c.kind == "platform"][0]
    fig = P.family_ranges(A.family_ranges(A.speedup_of(c), "speedup"))
    ax = _check(fig)
    fig.canvas.draw()
    ticks = [t.get_text() for t in _drawn_tick_labels(ax) if t in ax.xaxis.get_ticklabels()]
    assert ticks and all(t.endswith("x") for t in ticks)


def test_saturation_plot_hides_no_line(gold):
    curves = A.saturation(gold[gold.family == "fc"])
    fig = P.saturation(curves, max_models=5)
    ax = _check(fig)
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "batch (examples, log2 scale)"
    assert ax.get_ylabel() == "throughput (examples/s) / model's best (fraction)"
    assert "90%" in ax.get_title() and "first 5 of" in ax.get_title()
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 1 and ln.get_linestyle() != "--"]
    assert len(lines) == 5
    # Offsets along the batch axis: no two models' points coincide, even with equal values.
    xs = [tuple(np.round(ln.get_xdata(), 6)) for ln in lines]
    assert len(set(xs)) == 5
    # And each model has its own marker.
    markers = [col.get_paths()[0].vertices.tobytes() for col in ax.collections[:10:2]]
    assert len(set(markers)) >= 4
    assert "TBD" not in ax.get_title() or "TBD benchmark suite" in ax.get_title()
    with pytest.raises(ParadnnError, match="two or more batch sizes"):
        P.saturation(curves.iloc[0:0])


def _ops():
    ops = pd.DataFrame({
        "name": ["dot", "ew", "copy"], "category": [A.oplevel.MATMUL, A.oplevel.ELEMENTWISE,
                                                    A.oplevel.FORMATTING],
        "time_s": [0.5, 0.4, 0.1], "flops": [1e10, 1e6, 0.0], "bytes": [1e8, 4e6, 1e6],
    })
    ops["time_fraction"] = ops["time_s"] / ops["time_s"].sum()
    ops["flops_per_sec"] = ops["flops"] / ops["time_s"]
    ops["arithmetic_intensity"] = ops["flops"] / ops["bytes"]
    ops.attrs.update(approximate=True, peak_source="measured")
    return ops


def test_op_plots():
    ops = _ops()
    fig = P.op_roofline(A.op_roofline(ops, 1e11, 1e9))
    ax = _check(fig)
    assert ax.get_xlabel() == "arithmetic intensity (FLOP/B, log scale)"
    assert ax.get_ylabel() == "achieved by the operation (FLOP/s, log scale)"
    assert "approximate (CPU)" in ax.get_title()
    legend = " | ".join(_legend_texts(fig))
    assert "matmul/convolution fusion" in legend and "roof, measured peak" in legend
    ax = _check(P.op_breakdown(A.op_breakdown(ops)))
    assert ax.get_xlabel() == "share of step time (%)"
    assert "approximate on CPU" in ax.get_title()


def test_roofline_rings_points_above_their_roof_without_a_warnings_column():
    df = pd.DataFrame({"arithmetic_intensity": [1.0, 100.0], "flops_per_sec": [5.0, 150.0]})
    fig = P.roofline(A.roofline(df, peak_flops=100.0, peak_bytes_per_sec=10.0))
    ax = _check(fig)
    rings = [c for c in ax.collections if len(c.get_offsets()) and c.get_facecolor().size == 0
             and mcolors.to_hex(c.get_edgecolor()[0]) == mcolors.to_hex(P.WARNING_COLOR)]
    assert [tuple(c.get_offsets()[0]) for c in rings] == [(100.0, 150.0)]
    assert any("above its roof" in t for t in _legend_texts(fig))


def test_heatmap_frames_utilization_above_one_without_a_warnings_column():
    df = pd.DataFrame({"family": "fc", "nodes": [64, 64, 128, 128], "batch": [8, 16, 8, 16],
                       "status": "ok", "flops_utilization": [0.2, 0.5, 0.7, 1.4]})
    hm = A.heatmap(df, "batch", "nodes", "flops_utilization")
    fig = P.heatmap(hm)
    ax = _check(fig)
    red = [p for p in ax.patches if isinstance(p, Rectangle)
           and mcolors.to_hex(p.get_edgecolor()) == mcolors.to_hex(P.WARNING_COLOR)]
    assert len(red) == 1 and [t for t in _texts(ax) if t.endswith("!")] == ["1.4!"]


def test_every_figure_function_is_importable_from_plots_under_its_name():
    import importlib
    import inspect


    kinds = ("heatmaps", "sensitivities", "rooflines", "speedups", "ranges", "saturations",
             "resources", "infeeds", "system")
    for kind in kinds:
        module = importlib.import_module(f"paradnn.plots.{kind}")
        public = [name for name, obj in vars(module).items() if inspect.isfunction(obj)
                  and obj.__module__ == module.__name__ and not name.startswith("_")]
        assert public, kind
        for name in public:
            assert getattr(P, name) is getattr(module, name), f"plots.{name} (from plots.{kind})"
            assert name in P.__all__
    # One number format: the figures' is the units formatter.
    from paradnn import units

    assert P.compact is units.compact and P.si is units.si


def test_utilization_ranges_draw_unstable_runs_hatched_and_counted(trust):
    ur = A.family_ranges(trust, "model_flops_utilization", by="device_kind", include_unstable=True)
    assert ur["n_unstable"].sum() >= 1
    fig = P.utilization_comparison(ur)
    hatched = [p for p in fig.axes[0].patches if p.get_hatch()]
    assert len(hatched) == int((ur[ur["kind"] != "real"]["n_unstable"] > 0).sum())
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert any(t.endswith("unstable") for t in texts)
    legend = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert any("includes unstable runs" in t for t in legend)
