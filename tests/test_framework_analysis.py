"""Frameworks in the analyses: the speedup of one framework over another on the same workloads
(ratios and bootstrap interval recovered from planted factors), heat maps and rooflines that
never average rows of different frameworks, and old frames without a framework read as JAX.

Rows come from real tiny JAX runs (tests/data/fwrows.py) stored in a real SQLite store, plus
planted copies under another framework."""

import io
import math

import numpy as np
import pandas as pd
import pytest

import paradnn
from paradnn import analysis as A
from paradnn import plots as P
from paradnn.analysis.framework import (
    device_platform, framework_of, framework_pairs, frameworks, platform_column, with_framework,
)
from paradnn.errors import ParadnnError
from paradnn.store import Store

from data import fwrows


FACTORS = [2.0, 0.5, 1.5]  # tensorflow over jax, one per config of fwrows.CONFIGS


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A store of the real JAX rows and planted TensorFlow rows, loaded back."""
    jax_rows = fwrows.jax_rows()
    path = tmp_path_factory.mktemp("fw") / "fw.db"
    with Store(path) as s:
        s.add_rows(jax_rows + fwrows.planted(jax_rows, "tensorflow", FACTORS))
    return paradnn.load(path)


def test_framework_speedup_recovers_planted_ratios_with_a_bootstrap_interval(stored):
    assert frameworks(stored) == ["jax", "tensorflow"]
    sp = A.framework_speedup(stored, "tensorflow", "jax")
    assert len(sp) == 3 and sp.attrs["a"] == "tensorflow" and sp.attrs["b"] == "jax"
    assert "framework" not in sp.attrs["on"] and "device_kind" in sp.attrs["on"]
    got = sp.sort_values(["family", "batch"])["speedup"].to_numpy()
    # fwrows.CONFIGS sorted by family then batch: fc b4, fc b8, rnn b2.
    np.testing.assert_allclose(got, FACTORS, rtol=1e-12)
    summ = A.speedup_summary(sp)
    gm = math.exp(np.mean(np.log(FACTORS)))
    assert summ["n"] == 3 and summ["geomean"] == pytest.approx(gm, rel=1e-12)
    assert min(FACTORS) <= summ["ci_low"] <= gm <= summ["ci_high"] <= max(FACTORS)
    assert summ["ci_low"] < summ["ci_high"]  # three different ratios: a real spread
    assert summ["faster"] == pytest.approx(2 / 3)
    # The inverse comparison is the reciprocal.
    inv = A.framework_speedup(stored, "jax", "tensorflow")
    assert A.speedup_summary(inv)["geomean"] == pytest.approx(1 / gm, rel=1e-12)


def test_comparisons_find_the_framework_pair_per_platform(stored):
    comps = A.comparisons(stored, kinds=("framework",))
    assert [c.kind for c in comps] == ["framework"]
    c = comps[0]
    assert c.a.startswith("tensorflow on ") and c.b.startswith("jax on ")
    sp = A.speedup_of(c)
    np.testing.assert_allclose(sorted(sp["speedup"]), sorted(FACTORS), rtol=1e-12)
    # The other kinds never join rows of two frameworks: workload_key differs.
    assert not [c for c in A.comparisons(stored) if c.kind != "framework"]
    with pytest.raises(ParadnnError, match="kinds"):
        A.comparisons(stored, kinds=("frameworks",))


def test_unstable_rows_are_left_out_and_counted():
    rows = fwrows.jax_rows()
    tf = fwrows.planted(rows, "tensorflow", FACTORS)
    tf[0]["stable"] = False
    df = pd.DataFrame(rows + tf)
    sp = A.framework_speedup(df, "tensorflow")
    assert len(sp) == 2 and sp.attrs["unstable_excluded"] == 1
    both = A.framework_speedup(df, "tensorflow", include_unstable=True)
    assert len(both) == 3 and int(both["unstable"].sum()) == 1


def test_rows_without_a_framework_are_jax():
    rows = fwrows.jax_rows()
    old = [{k: v for k, v in r.items() if k != "framework"} for r in rows]  # an older store
    assert (framework_of(pd.DataFrame(old)) == "jax").all()
    mixed = pd.DataFrame(old + fwrows.planted(rows, "tensorflow", FACTORS))
    assert mixed["framework"].isna().sum() == 3  # what concatenating an old store gives
    sp = A.framework_speedup(mixed, "tensorflow", "jax")
    np.testing.assert_allclose(sorted(sp["speedup"]), sorted(FACTORS), rtol=1e-12)
    assert with_framework(mixed)["framework"].tolist() == ["jax"] * 3 + ["tensorflow"] * 3


def test_other_device_does_not_join():
    rows = fwrows.jax_rows()
    df = pd.DataFrame(rows + fwrows.planted(rows, "tensorflow", FACTORS, device_kind="other"))
    assert A.framework_speedup(df, "tensorflow").empty


def test_bad_framework_names_the_parameter(stored):
    with pytest.raises(ParadnnError, match=r"a='torch'; allowed: .*jax, tensorflow"):
        A.framework_speedup(stored, "torch")
    with pytest.raises(ParadnnError, match="both 'jax'"):
        A.framework_speedup(stored, "jax", "jax")


def test_pairs_are_each_framework_over_jax():
    assert framework_pairs(["torch", "jax", "tensorflow"]) == [
        ("tensorflow", "jax"), ("torch", "jax"), ("torch", "tensorflow")]


def test_device_platform_column_old_and_new_names():
    old = pd.DataFrame({"backend": ["cpu", "gpu"]})
    new = pd.DataFrame({"device_platform": ["tpu"], "backend": ["ignored"]})
    assert platform_column(old) == "backend" and device_platform(old).tolist() == ["cpu", "gpu"]
    assert platform_column(new) == "device_platform" and device_platform(new).tolist() == ["tpu"]
    assert platform_column(pd.DataFrame({"x": [1]})) is None
    assert device_platform(pd.DataFrame({"x": [1]})).isna().all()


# -- no cross-framework averaging -------------------------------------------------------------

def _grid(row: dict) -> pd.DataFrame:
    """An FC grid (nodes x batch) under three labels of framework: None (an old JAX row),
    "jax" and "tensorflow". JAX cells hold 100 (both kinds of JAX row), TensorFlow cells 1."""
    out = []
    for nodes in (16, 32):
        for batch in (4, 8):
            for fw, value in ((None, 100.0), ("jax", 100.0), ("tensorflow", 1.0)):
                out.append({**row, "nodes": nodes, "batch": batch, "framework": fw,
                            "examples_per_sec": value})
    return pd.DataFrame(out)


def test_heatmap_keeps_frameworks_in_panels():
    grid = _grid(fwrows.jax_rows()[0])
    hm = A.heatmap(grid, "batch", "nodes", "examples_per_sec", panels=True)
    assert hm.attrs["panel_columns"] == ["framework"]
    assert {p["framework"] for p in hm.attrs["panels"]} == {"jax", "tensorflow"}
    for fw, want in (("jax", 100.0), ("tensorflow", 1.0)):
        cells = hm[hm["framework"] == fw]
        assert len(cells) == 4 and (cells["examples_per_sec"] == want).all()
    # The old row (no framework) and the "jax" row are one cell of two runs, never with TF.
    assert (hm.loc[hm["framework"] == "jax", "n"] == 2).all()
    assert (hm.loc[hm["framework"] == "tensorflow", "n"] == 1).all()


def test_heatmap_one_map_fixes_one_framework():
    grid = _grid(fwrows.jax_rows()[0])
    one = A.heatmap(grid, "batch", "nodes", "examples_per_sec")
    assert one.attrs["fixed"]["framework"] == "jax"  # the most common (old rows are JAX's)
    assert (one["examples_per_sec"] == 100.0).all()
    tf = A.heatmap(grid, "batch", "nodes", "examples_per_sec", fixed={"framework": "tensorflow"})
    assert (tf["examples_per_sec"] == 1.0).all() and (tf["n"] == 1).all()
    old = grid[grid["framework"].isna()].drop(columns=["framework"])
    assert (A.heatmap(old, "batch", "nodes", "examples_per_sec",
                      fixed={"framework": "jax"})["examples_per_sec"] == 100.0).all()


def test_roofline_marks_frameworks_apart(stored):
    rf = A.roofline(stored.dropna(subset=["flops_per_sec", "arithmetic_intensity"]))
    assert len(rf) == len(stored)  # one point per run, nothing averaged
    fig = P.roofline(rf)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "framework tensorflow" in labels and any(t.startswith("framework jax") for t in labels)
    one = P.roofline(rf[framework_of(rf) == "jax"])
    assert not any(t.get_text().startswith("framework") for t in one.legends[0].get_texts())
    fig.savefig(io.BytesIO(), format="png")


def test_speedup_by_config_figure(stored):
    sp = A.framework_speedup(stored, "tensorflow")
    summ = A.speedup_summary(sp)
    fig = P.speedup_by_config(sp, summ)
    ax = fig.axes[0]
    ys = sorted(float(y) for c in ax.collections for y in c.get_offsets()[:, 1])
    assert ys == pytest.approx(sorted(FACTORS))
    flat = [tuple(line.get_ydata()) for line in ax.get_lines()]
    assert (1.0, 1.0) in flat and (summ["geomean"], summ["geomean"]) in flat
    assert [t.get_text() for t in ax.texts] == ["FC", "RNN"]  # grouped by family
    assert "tensorflow over jax" in ax.get_title()
    assert "examples_per_sec (examples/s)" in ax.get_title() and "(x, log scale)" in ax.get_ylabel()
    fig.savefig(io.BytesIO(), format="png")
    with pytest.raises(ParadnnError, match="no joined rows"):
        P.speedup_by_config(sp.iloc[0:0])


def test_memory_bars_keep_frameworks_apart(stored):
    from paradnn.backends.jax import memory as memory

    assert P.MEMORY_PARTS == tuple(memory.MEMORY_PARTS)  # one order: paradnn.sizes's table
    fig = P.memory_breakdown(stored)
    names = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert len(names) == 6  # 3 workloads x 2 frameworks, no bar averaged over both
    assert sum("[tensorflow]" in n for n in names) == 3 and sum("[jax]" in n for n in names) == 3
