"""paradnn compare (docs/compare.md): the statistics against scipy, a planted slowdown in a copied
store found where it was planted and nowhere else, the localisation sentence, the CI exit codes,
history change points, clear errors for stores that cannot be compared, and the speedup join
across the axis it compares. Records are built with the real timing statistics
(``paradnn.measure.Timing``) and stored in real SQLite files; nothing here runs a framework."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import paradnn
from paradnn import CNN, FC, ParadnnError, Workload
from paradnn.analysis import compare as AC
from paradnn.analysis import speedup
from paradnn.cli import main
from paradnn.errors import ParadnnWarning
from paradnn.measure import Timing
from paradnn.record import METRICS, Record
from paradnn.store import Store, load

PLATFORM = {"device_platform": "cpu", "device_kind": "cpu", "device_count": 1, "host": "h1",
            "cpu_model": "test cpu"}
SOFTWARE = {"paradnn_version": "0.1.0", "paradnn_revision": "git:aaaa", "framework_version": "0.12",
            "jax_version": "0.12", "jaxlib_version": "0.12", "flax_version": "0.12",
            "optax_version": "0.2", "tf_version": None, "torch_version": None,
            "python_version": "3.12", "xla_flags": ""}
SETTINGS = {"steps_per_call": 4, "warmup_calls": 1, "min_calls": 10, "max_calls": 40,
            "cv_target": 0.5, "time_budget_s": 2.0}
PEAK_FLOPS, PEAK_BYTES = 4e10, 1e10  # ridge point 4 FLOP/B
NODES, BATCHES = (64, 128, 256, 512), (8, 16, 64, 256)


def _record(spec, batch: int, samples: np.ndarray, t: str, dtype: str = "float32",
            framework: str = "jax", software: dict | None = None, settings: dict | None = None,
            keep_samples: bool = True, measured: dict | None = None) -> Record:
    """An ok record whose timing metrics are the real Timing statistics of ``samples``;
    batch <= 16 is memory-bound (intensity 1 FLOP/B), larger batches compute-bound (8)."""
    timing = Timing(np.asarray(samples, dtype=float), 1.0, 4, 1, 0.1, SETTINGS["cv_target"], 2.0)
    metrics = timing.stats()
    if not keep_samples:
        metrics.pop("step_times_s")
    metrics.update(examples_per_sec=batch / metrics["step_time_s"], peak_flops=PEAK_FLOPS,
                   peak_bytes_per_sec=PEAK_BYTES, arithmetic_intensity=1.0 if batch <= 16 else 8.0,
                   flops_per_sec=1e9, steps_per_call_used=4, params=getattr(spec, "nodes", 8) * 1000,
                   **(measured or {}))
    return Record(status="ok", workload=Workload(spec, batch, dtype=dtype, framework=framework).to_dict(),
                  platform=PLATFORM, software={**SOFTWARE, **(software or {})},
                  settings={**SETTINGS, **(settings or {})}, metrics=metrics, time_utc=t)


def _samples(rng, median: float, n: int = 30, spread: float = 0.04, run_shift: float = 0.01):
    """Per-call times of one run: lognormal calls around ``median`` (relative spread
    ``spread``), the whole run shifted by a normal factor of ``run_shift`` (a run's machine
    state)."""
    shift = rng.normal(0.0, run_shift)
    return median * np.exp(shift + rng.normal(0.0, spread, n))


def _median(nodes: int, batch: int) -> float:
    return 1e-4 * (nodes / 64) * (batch / 8) ** 0.7


def _grid_store(path: Path, seed: int, slow: float = 1.0, planted=lambda n, b: False,
                t: str = "2026-01-01T00:00:00+00:00", **kw) -> Path:
    rng = np.random.default_rng(seed)
    with Store(path) as s:
        for n in NODES:
            for b in BATCHES:
                factor = slow if planted(n, b) else 1.0
                s.add(_record(FC(2, n, 64, 10), b, _samples(rng, _median(n, b) * factor), t, **kw))
    return path


# -- statistics ------------------------------------------------------------------------------------

def test_mann_whitney_matches_scipy_exact_and_asymptotic():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(1)
    for n, m, shift in ((5, 7, 0.0), (6, 6, 1.0), (12, 9, 0.5), (40, 30, 0.2), (70, 80, 0.1)):
        x, y = rng.normal(0, 1, n), rng.normal(shift, 1, m)
        method = "exact" if n * m <= AC.EXACT_MAX_PAIRS else "asymptotic"
        want = stats.mannwhitneyu(x, y, alternative="two-sided", method=method).pvalue
        assert AC.mann_whitney(x, y) == pytest.approx(want, rel=1e-9, abs=1e-12), (n, m, method)
    # Ties take the normal approximation with the tie correction, as scipy's asymptotic method.
    x, y = np.array([1, 2, 2, 3, 3, 3, 4.0]), np.array([2, 3, 4, 4, 5, 5.0])
    want = stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic").pvalue
    assert AC.mann_whitney(x, y) == pytest.approx(want, rel=1e-9)
    assert np.isnan(AC.mann_whitney([], [1.0]))


def test_benjamini_hochberg_matches_scipy_and_keeps_nan():
    stats = pytest.importorskip("scipy.stats")
    p = np.array([0.001, 0.2, 0.03, 0.04, 0.5, 0.011, 0.9])
    assert AC.benjamini_hochberg(p) == pytest.approx(stats.false_discovery_control(p))
    q = AC.benjamini_hochberg([0.01, np.nan, 0.02])
    assert np.isnan(q[1]) and q[0] == pytest.approx(0.02) and q[2] == pytest.approx(0.02)


def test_hodges_lehmann_recovers_a_shift_and_its_interval_covers_it():
    rng = np.random.default_rng(2)
    covered = 0
    for _ in range(200):
        x, y = rng.normal(0, 1, 20), rng.normal(0.5, 1, 25)
        shift, lo, hi = AC.hodges_lehmann(x, y)
        assert lo <= shift <= hi
        covered += lo <= 0.5 <= hi
    assert 0.90 <= covered / 200 <= 0.99  # a 95% interval
    # Too few samples for 95%: the full range of the differences, never a narrower claim.
    assert AC.hodges_lehmann([1.0, 2.0], [3.0, 5.0])[1:] == (1.0, 4.0)


def test_student_t_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    for t, df in ((2.0, 3), (0.5, 1), (5.0, 20), (1.2, 2.5), (30.0, 4), (0.0, 7)):
        assert AC.t_two_sided(t, df) == pytest.approx(2 * stats.t.sf(t, df), rel=1e-9, abs=1e-15)
    for level, df in ((0.95, 2), (0.99, 5), (0.9, 40)):
        assert AC.t_quantile(level, df) == pytest.approx(stats.t.ppf(0.5 + level / 2, df), rel=1e-9)


def _side(rng, run_medians, calls: int = 30, spread: float = 0.02) -> AC.Side:
    runs = tuple(m * np.exp(rng.normal(0, spread, calls)) for m in run_medians)
    med = np.array([np.median(r) for r in runs])
    return AC.Side(runs, med, med * 0.99, med * 1.01, np.full(len(runs), spread))


def test_runs_are_the_unit_when_repeats_exist():
    """Three runs a side, each run's calls tight (2%): a machine that is fast in some runs and
    3x slower in others makes the per-call test significant, but not the test of the runs, so
    the config is inconclusive; runs that agree with each other make a 1.5x change a
    regression on both tests."""
    rng = np.random.default_rng(9)
    base, new = _side(rng, [1e-3, 1e-3, 3e-3]), _side(rng, [3e-3, 3e-3, 1e-3])
    assert AC.mann_whitney(np.log(base.samples), np.log(new.samples)) < 1e-4
    est = AC.compare_samples(base, new)
    assert est.method == "samples+runs" and est.p > 0.05
    assert AC.verdict(est.ratio, est.ci_low, est.ci_high, est.p, est.noise) == "inconclusive"
    base, new = _side(rng, [1.00e-3, 1.02e-3, 0.99e-3]), _side(rng, [1.50e-3, 1.52e-3, 1.49e-3])
    est = AC.compare_samples(base, new)
    assert est.method == "samples+runs" and est.p < 1e-3 and 1.4 < est.ci_low < est.ratio < est.ci_high < 1.6
    assert AC.verdict(est.ratio, est.ci_low, est.ci_high, est.p, est.noise) == "regression"
    one = AC.compare_samples(_side(rng, [1e-3]), _side(rng, [1.5e-3]))
    assert one.method == "samples"  # one run a side: nothing to test the runs with


def test_timing_keeps_per_call_times_as_a_metric_and_the_store_round_trips_them(tmp_path):
    assert METRICS["step_times_s"][0] == "s"
    t = Timing(np.array([0.0123456789, 0.011, 0.012]), 1.0, 4, 1, 0.1, 0.02, 1.0)
    m = t.stats()
    assert m["step_times_s"] == [0.0123457, 0.011, 0.012]  # 6 significant digits, call order
    assert len(m["step_times_s"]) == m["timed_calls"]
    with Store(tmp_path / "r.db") as s:
        s.add(_record(FC(2, 64, 64, 10), 8, np.array([1e-3, 2e-3, 1.5e-3]), "2026-01-01T00:00:00+00:00"))
    assert load(tmp_path / "r.db")["step_times_s"][0] == [1e-3, 2e-3, 1.5e-3]


def test_verdict_rules():
    v = AC.verdict
    assert v(1.5, 1.4, 1.6, 0.001, 0.05) == "regression"
    assert v(0.6, 0.5, 0.7, 0.001, 0.05) == "improvement"
    assert v(1.5, 1.4, 1.6, 0.001, 0.8) == "inconclusive"    # within its own noise
    assert v(1.05, 0.8, 1.3, 0.4, 0.05) == "inconclusive"    # interval reaches past 1.1
    assert v(1.02, 0.99, 1.05, 0.3, 0.03) == "unchanged"
    assert v(1.05, 1.03, 1.07, 0.001, 0.01) == "unchanged"   # significant, below the threshold
    assert v(1.02, 0.99, 1.05, 0.3, 0.2) == "inconclusive"   # floor as large as the margin


# -- a planted slowdown ----------------------------------------------------------------------------

def _plant_copy(base: Path, new: Path, seed: int, planted, slow: float = 1.15) -> None:
    """``new``: a copy of the store ``base`` whose rows are measured again (fresh samples, a
    later time) and ``slow`` x slower where ``planted(nodes, batch)``."""
    shutil.copy(base, new)
    rng = np.random.default_rng(seed)
    con = sqlite3.connect(new)
    for rowid, text in con.execute("SELECT id, row FROM records").fetchall():
        row = json.loads(text)
        n, b = row["nodes"], row["batch"]
        factor = slow if planted(n, b) else 1.0
        fresh = _record(FC(2, n, 64, 10), b, _samples(rng, _median(n, b) * factor),
                        "2026-02-01T00:00:00+00:00").to_dict()
        con.execute("UPDATE records SET row = ?, time_utc = ? WHERE id = ?",
                    (json.dumps(fresh), fresh["time_utc"], rowid))
    con.commit()
    con.close()


def test_planted_15_percent_slowdown_is_found_only_where_planted(tmp_path):
    planted = lambda n, b: b <= 16  # noqa: E731  the memory-bound half
    base = _grid_store(tmp_path / "base.db", seed=10)
    _plant_copy(base, tmp_path / "new.db", seed=11, planted=planted)
    r = paradnn.compare(base, tmp_path / "new.db")
    t = r.table
    assert len(t) == len(NODES) * len(BATCHES) and r.join.axes == ()
    hit = t.apply(lambda row: planted(row["nodes"], row["batch"]), axis=1)
    assert (t.loc[hit, "verdict"] == "regression").all(), t.loc[hit, ["label", "ratio", "q", "verdict"]]
    assert not (t.loc[~hit, "verdict"].isin(["regression", "improvement"])).any()
    assert t.loc[hit, "ratio"].between(1.08, 1.25).all()  # 15% with a run shift of 1% per side
    assert r.exit_code() == 1
    # Where: the memory-bound configs, by about 15%, and nothing elsewhere.
    s = r.where.sentence
    assert s.startswith("Slower by 1") and "memory-bound configs" in s and "(8 configs, all memory-bound" in s
    assert "no significant change elsewhere (8 configs)" in s
    changed = r.where.regions[r.where.regions["changed"]]
    assert len(changed) == 1 and changed["ratio"].iloc[0] == pytest.approx(1.15, abs=0.03)


def test_a_noisy_config_is_inconclusive_not_a_regression(tmp_path):
    rng = np.random.default_rng(3)
    with Store(tmp_path / "a.db") as a, Store(tmp_path / "b.db") as b:
        for n in NODES:
            noisy = n == 512
            spread = 0.5 if noisy else 0.03
            a.add(_record(FC(2, n, 64, 10), 64, _samples(rng, 1e-3, spread=spread), "2026-01-01T00:00:00+00:00"))
            b.add(_record(FC(2, n, 64, 10), 64, _samples(rng, 1.15e-3, spread=spread), "2026-01-02T00:00:00+00:00"))
    r = paradnn.compare(tmp_path / "a.db", tmp_path / "b.db")
    v = dict(zip(r.table["nodes"], r.table["verdict"]))
    assert v[512] == "inconclusive" and r.table.set_index("nodes").loc[512, "noise"] > 0.2
    assert all(v[n] == "regression" for n in NODES if n != 512)


def test_a_slow_repeat_makes_the_config_inconclusive():
    """Two runs of BASE disagree by 3x (a neighbour took the CPU during one): the runs' test
    and the config's noise floor (the runs' spread) see it, so NEW's 2.5 ms against them is
    inconclusive, not a regression, however tight each run's calls are."""
    rng = np.random.default_rng(4)
    base = AC.Side((_samples(rng, 1e-3, 40), _samples(rng, 3e-3, 12)), np.array([1e-3, 3e-3]),
                   np.array([0.99e-3, 2.9e-3]), np.array([1.01e-3, 3.1e-3]), np.array([0.04, 0.04]))
    new = AC.Side((_samples(rng, 2.5e-3, 30),), np.array([2.5e-3]), np.array([2.4e-3]),
                  np.array([2.6e-3]), np.array([0.04]))
    # Each run counts once: the pool holds 12 calls of each BASE run, not 40 fast and 12 slow.
    assert len(base.samples) == 24
    est = AC.compare_samples(base, new)
    assert est.method == "samples+runs" and est.p > 0.2 and est.noise > 1.0
    assert AC.verdict(est.ratio, est.ci_low, est.ci_high, est.p, est.noise) == "inconclusive"


def test_an_unstable_run_is_left_out_where_its_config_has_a_stable_one(tmp_path):
    """A sweep's automatic retry leaves two rows of an unstable config: the first run (3x slow,
    missed its precision target) and the retry (stable). Compared against BASE, the stable run
    alone counts and the config is unchanged; pooled with the unstable run it was at best
    inconclusive. A config whose runs are all unstable keeps them (nothing else to compare)."""
    rng = np.random.default_rng(6)
    t = "2026-01-01T00:00:00+00:00"
    base = [_record(FC(2, n, 64, 10), 8, _samples(rng, _median(n, 8)), t) for n in NODES]
    new = [_record(FC(2, n, 64, 10), 8, _samples(rng, _median(n, 8)), t, software={"paradnn_revision": "git:bbbb"})
           for n in NODES]
    slow_first = _record(FC(2, 64, 64, 10), 8, _samples(rng, 3 * _median(64, 8)), "2026-01-01T00:05:00+00:00",
                         software={"paradnn_revision": "git:bbbb"}).with_metrics(stable=False)

    def frame(recs):
        path = tmp_path / f"s{len(list(tmp_path.iterdir()))}.db"
        with Store(path) as s:
            for r in recs:
                s.add(r)
        return load(path)

    result = AC.compare_frames(frame(base), frame(new + [slow_first]))
    row = result.table.set_index("nodes").loc[64]
    assert row["runs_new"] == 1 and row["verdict"] == "unchanged", row.to_dict()
    assert any("1 run(s) that missed their precision target left out" in n for n in result.notes)
    # Every run of the config unstable: both stay, and no note claims otherwise.
    only_unstable = [r.with_metrics(stable=False) if r.workload["nodes"] == 64 else r for r in new]
    result = AC.compare_frames(frame(base), frame(only_unstable + [slow_first]))
    assert result.table.set_index("nodes").loc[64, "runs_new"] == 2
    assert not any("precision target left out" in n for n in result.notes)


def test_stores_of_several_families_pool_each_configs_runs(tmp_path):
    """FC and RNN rows in one store leave the other family's columns empty (NaN in pandas):
    each config's two runs must still be one config, matched across the stores (found when
    the benchmark compared six FC, CNN and RNN configs: every run was a config of its own and
    nothing matched)."""
    rng = np.random.default_rng(7)
    specs = [FC(2, 64, 64, 10), paradnn.RNN("lstm", 1, 16, 4, 32)]

    def store(name: str, revision: str) -> Path:
        path = tmp_path / f"{name}.db"
        with Store(path) as s:
            for i, minute in enumerate((0, 5)):
                for spec in specs:
                    s.add(_record(spec, 8, _samples(rng, 1e-3), f"2026-01-01T00:{minute:02d}:00+00:00",
                                  software={"paradnn_revision": revision}))
        return path

    result = AC.compare_frames(load(store("a", "git:aaaa")), load(store("b", "git:bbbb")))
    assert len(result.table) == 2
    assert list(result.table["runs_base"]) == [2, 2] and list(result.table["runs_new"]) == [2, 2]
    assert set(result.table["family"]) == {"fc", "rnn"}


def test_a_over_a_has_no_regression_over_many_seeds(tmp_path):
    """Measured twice with the same code: no config called a regression or improvement at the
    default threshold, over 20 simulated A/A pairs of 16 configs (calls 4% apart, runs 1%)."""
    wrong = 0
    for seed in range(20):
        a = _grid_store(tmp_path / f"a{seed}.db", seed=100 + seed)
        b = _grid_store(tmp_path / f"b{seed}.db", seed=200 + seed, t="2026-01-02T00:00:00+00:00")
        r = paradnn.compare(a, b)
        wrong += int(r.table["verdict"].isin(["regression", "improvement"]).sum())
        assert r.exit_code() == 0
    assert wrong == 0


def test_old_store_without_per_call_times_compares_on_intervals_and_says_so(tmp_path):
    rng = np.random.default_rng(5)
    with Store(tmp_path / "old.db") as a, Store(tmp_path / "new.db") as b:
        for n in NODES:
            a.add(_record(FC(2, n, 64, 10), 64, _samples(rng, 1e-3, 30), "2026-01-01T00:00:00+00:00",
                          keep_samples=False))
            b.add(_record(FC(2, n, 64, 10), 64, _samples(rng, 2e-3 if n == 64 else 1e-3, 30),
                          "2026-01-02T00:00:00+00:00"))
    assert "step_times_s" not in load(tmp_path / "old.db").dropna(axis=1, how="all").columns
    r = paradnn.compare(tmp_path / "old.db", tmp_path / "new.db")
    assert set(r.table["method"]) == {"ci"}
    assert any("method ci" in n and "per-call" in n for n in r.notes)
    v = dict(zip(r.table["nodes"], r.table["verdict"]))
    assert v[64] == "regression" and all(v[n] != "regression" for n in NODES[1:])


# -- axes, the join, errors ------------------------------------------------------------------------

def _two(tmp_path, base_kw: dict, new_kw: dict, specs=((FC(2, 64, 64, 10), 8),)) -> tuple[Path, Path]:
    """Two new stores (a fresh folder each call) of ``specs``, records built with ``base_kw``
    and ``new_kw``."""
    rng = np.random.default_rng(6)
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    paths = []
    for name, kw, t in (("a", base_kw, "2026-01-01T00:00:00+00:00"), ("b", new_kw, "2026-01-02T00:00:00+00:00")):
        with Store(folder / f"{name}.db") as s:
            for spec, batch in specs:
                s.add(_record(spec, batch, _samples(rng, 1e-3), t, **kw))
        paths.append(folder / f"{name}.db")
    return paths[0], paths[1]


def test_the_axis_that_differs_is_found_and_named(tmp_path):
    a, b = _two(tmp_path, {}, {"dtype": "bfloat16"})
    r = paradnn.compare(a, b)
    assert r.join.axes == ("dtype",) and "dtype" not in r.join.on
    assert r.axis_text == "dtype (BASE dtype=float32; NEW dtype=bfloat16)"
    a, b = _two(tmp_path, {}, {"software": {"jax_version": "0.13", "jaxlib_version": "0.13"}})
    assert paradnn.compare(a, b).join.axes == ("software",)
    a, b = _two(tmp_path, {"settings": {"xla_preset": "best"}}, {"settings": {"xla_preset": "stock"}})
    assert paradnn.compare(a, b).join.axes == ("settings",)


def test_two_selections_of_one_store(tmp_path, capsys):
    rng = np.random.default_rng(12)
    with Store(tmp_path / "mixed.db") as s:
        for dtype, slow in (("float32", 1.0), ("bfloat16", 1.5)):
            for n in NODES:
                s.add(_record(FC(2, n, 64, 10), 64, _samples(rng, 1e-3 * slow), "2026-01-01T00:00:00+00:00",
                              dtype=dtype))
    r = paradnn.compare(tmp_path / "mixed.db", base_where={"dtype": "float32"},
                        new_where=["dtype=bfloat16"])
    assert r.join.axes == ("dtype",) and (r.table["verdict"] == "regression").all()
    assert r.source == (f"{tmp_path / 'mixed.db'} where dtype=float32",
                        f"{tmp_path / 'mixed.db'} where dtype=bfloat16")
    assert main(["compare", str(tmp_path / "mixed.db"), "--base-where", "dtype=float32",
                 "--new-where", "dtype=bfloat16", "--rows", "2"]) == 1
    out = capsys.readouterr().out
    assert "axis: dtype (BASE dtype=float32; NEW dtype=bfloat16)" in out and "... 2 more" in out
    assert main(["compare", str(tmp_path / "mixed.db"), "--base-where", "colour=red",
                 "--new-where", "dtype=bfloat16"]) == 2
    assert "column 'colour' is not in the store" in capsys.readouterr().err


def test_more_than_the_asked_axis_differs_is_refused(tmp_path):
    a, b = _two(tmp_path, {}, {"dtype": "bfloat16", "software": {"paradnn_revision": "git:bbbb"}})
    with pytest.raises(ParadnnError, match=r"more than one axis: .*revision .*dtype|more than one axis: .*dtype"):
        paradnn.compare(a, b)
    with pytest.raises(ParadnnError, match=r"asked to compare dtype, but .* differ in revision"):
        paradnn.compare(a, b, axis="dtype")
    r = paradnn.compare(a, b, axis="dtype,revision")
    assert set(r.join.axes) == {"dtype", "revision"} and len(r.table) == 1
    with pytest.raises(ParadnnError, match="allowed: one or more of software, revision"):
        paradnn.compare(a, b, axis="compiler")


def test_stores_without_common_configs_get_a_clear_error(tmp_path):
    a, _ = _two(tmp_path, {}, {})
    rng = np.random.default_rng(7)
    with Store(tmp_path / "cnn.db") as s:
        s.add(_record(CNN("residual", 1, 4, 32, 10), 2, _samples(rng, 1e-3), "2026-01-03T00:00:00+00:00"))
    with pytest.raises(ParadnnError, match=r"no config of BASE \(1\) matches one of NEW \(1\).*family never "
                                           r"matches \(BASE family=fc; NEW family=cnn\)"):
        paradnn.compare(a, tmp_path / "cnn.db")
    with pytest.raises(ParadnnError, match="NEW has no rows where dtype=float16"):
        paradnn.compare(a, new_where=["dtype=float16"])
    with pytest.raises(ParadnnError, match="NEW is missing"):
        paradnn.compare(a)
    with pytest.raises(ParadnnError, match="threshold=0.9"):
        paradnn.compare(a, a, threshold=0.9)


def test_a_corrupt_row_is_skipped_with_a_warning_and_bad_samples_fall_back(tmp_path):
    base = _grid_store(tmp_path / "base.db", seed=20)
    new = _grid_store(tmp_path / "new.db", seed=21, t="2026-01-02T00:00:00+00:00")
    con = sqlite3.connect(new)
    ids = [i for (i,) in con.execute("SELECT id FROM records ORDER BY id")]
    con.execute("UPDATE records SET row = '{not json' WHERE id = ?", (ids[0],))
    # No samples (an empty list): the config falls back to the recorded interval (method ci).
    row = json.loads(con.execute("SELECT row FROM records WHERE id = ?", (ids[1],)).fetchone()[0])
    row["step_times_s"] = []
    con.execute("UPDATE records SET row = ? WHERE id = ?", (json.dumps(row), ids[1]))
    # Samples that are no list of numbers: the row is unreadable (paradnn.rowschema), named.
    row = json.loads(con.execute("SELECT row FROM records WHERE id = ?", (ids[2],)).fetchone()[0])
    row["step_times_s"] = "garbage"
    con.execute("UPDATE records SET row = ? WHERE id = ?", (json.dumps(row), ids[2]))
    con.commit()
    con.close()
    with pytest.warns(ParadnnWarning, match="corrupt") as seen:
        r = paradnn.compare(base, new)
    assert any("step_times_s" in str(w.message) for w in seen)
    assert r.only_base == 2 and len(r.table) == len(NODES) * len(BATCHES) - 2
    assert (r.table["method"] == "ci").sum() == 1
    assert any("only in BASE" in n for n in r.notes)


def test_workload_join_drops_only_the_axis_the_sides_differ_in():
    rows = pd.DataFrame({"family": ["fc"] * 4, "nodes": [64, 64, 128, 128], "batch": [8] * 4,
                         "dtype": ["float32", "bfloat16"] * 2, "framework": ["jax"] * 4})
    a, b = rows[rows.dtype == "float32"], rows[rows.dtype == "bfloat16"]
    assert AC.workload_join(a, b) == ["family", "nodes", "batch", "framework"]
    assert "dtype" in AC.workload_join(rows, rows)
    assert "family" in AC.workload_join(a, b.assign(family="cnn"))  # not an axis: kept, no match


# -- the CLI: exit codes, JSON, Markdown --------------------------------------------------------

def test_cli_exit_codes_json_and_markdown(tmp_path, capsys):
    planted = lambda n, b: b <= 16  # noqa: E731
    base = _grid_store(tmp_path / "base.db", seed=30)
    _plant_copy(base, tmp_path / "new.db", seed=31, planted=planted)
    same = _grid_store(tmp_path / "same.db", seed=32, t="2026-01-03T00:00:00+00:00")
    assert main(["compare", str(base), str(same)]) == 0
    out = capsys.readouterr().out
    assert "no significant regression beyond 1.1x in 16 configs" in out
    assert main(["compare", str(base), str(tmp_path / "new.db"), "--markdown", str(tmp_path / "s.md"),
                 "--json", str(tmp_path / "r.json")]) == 1
    md = (tmp_path / "s.md").read_text()
    assert md.startswith("### paradnn compare: FAIL: 8 regression(s) beyond 1.1x") and "| regression |" in md
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["exit_code"] == 1 and data["counts"]["regression"] == 8 and len(data["configs"]) == 16
    assert "memory-bound" in data["where"]["sentence"]
    # A threshold above the planted change: nothing beyond it.
    assert main(["compare", str(base), str(tmp_path / "new.db"), "--threshold", "1.3"]) in (0, 3)
    capsys.readouterr()
    assert main(["compare", str(base), str(tmp_path / "new.db"), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["counts"]["regression"] == 8
    # Usage errors: 2, one line naming the problem.
    assert main(["compare", str(base), str(tmp_path / "missing.db")]) == 2
    assert "no such paradnn store" in capsys.readouterr().err
    assert main(["compare", str(base), str(same), "--axis", "nope"]) == 2
    assert "allowed: one or more of" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["compare", str(base), str(same), "--threshold", "0.5"])
    assert exc.value.code == 2


def test_cli_exits_3_when_a_config_is_too_noisy(tmp_path, capsys):
    """A config too noisy to show a 1.1x regression is inconclusive: the comparison does not
    say "no regression" for it and exits 3 (its own status), unless --allow-inconclusive;
    --strict, the flag that asked for this before it was the default, is still accepted."""
    rng = np.random.default_rng(8)
    with Store(tmp_path / "a.db") as a, Store(tmp_path / "b.db") as b:
        for n in NODES:
            spread = 0.6 if n == 512 else 0.02
            a.add(_record(FC(2, n, 64, 10), 64, _samples(rng, 1e-3, spread=spread), "2026-01-01T00:00:00+00:00"))
            b.add(_record(FC(2, n, 64, 10), 64, _samples(rng, 1e-3, spread=spread), "2026-01-02T00:00:00+00:00"))
    args = ["compare", str(tmp_path / "a.db"), str(tmp_path / "b.db")]
    capsys.readouterr()
    assert main(args) == 3
    head = capsys.readouterr().out.splitlines()[0]
    assert "inconclusive" in head and "no significant regression" not in head
    assert main(args + ["--strict"]) == 3
    assert main(args + ["--allow-inconclusive"]) == 0


@pytest.mark.slow
def test_cli_process_exit_status_and_no_traceback(tmp_path, paradnn_cmd):
    base = _grid_store(tmp_path / "base.db", seed=40)
    _plant_copy(base, tmp_path / "new.db", seed=41, planted=lambda n, b: n >= 256)
    with Store(tmp_path / "cnn.db") as s:
        s.add(_record(CNN("residual", 1, 4, 32, 10), 2, np.full(5, 1e-3), "2026-01-03T00:00:00+00:00"))
    done = subprocess.run([*paradnn_cmd, "compare", str(base), str(tmp_path / "new.db")],
                          capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert "nodes >= 256" in done.stdout
    done = subprocess.run([*paradnn_cmd, "compare", str(base), str(tmp_path / "cnn.db")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("paradnn: error: compare: no config of BASE")


# -- localisation ----------------------------------------------------------------------------------

def test_localise_names_the_region_by_hyperparameter():
    rows = []
    for n in NODES:
        for b in BATCHES:
            slow = n >= 256
            rows.append({"family": "fc", "nodes": n, "batch": b, "bound": "compute",
                         "ratio": 1.3 if slow else 1.0, "ci_low": 1.25 if slow else 0.97,
                         "ci_high": 1.35 if slow else 1.03, "q": 0.001 if slow else 0.8,
                         "verdict": "regression" if slow else "unchanged"})
    where = AC.localise(pd.DataFrame(rows))
    assert where.sentence == ("Slower by 30% +/- 0% in configs with nodes >= 256 (8 configs, all "
                              "compute-bound); no significant change elsewhere (8 configs).")
    table = pd.DataFrame(rows).assign(q=0.5, verdict="unchanged", ratio=1.0)
    assert AC.localise(table).sentence.startswith("No significant change in any of the 16 configs")


# -- history ---------------------------------------------------------------------------------------

def _history_store(path: Path, step_at: int, versions: int = 4, planted=lambda n, b: n >= 256) -> Path:
    rng = np.random.default_rng(50)
    with Store(path) as s:
        for v in range(versions):
            for n in NODES:
                for b in (8, 64):
                    factor = 1.5 if v >= step_at and planted(n, b) else 1.0
                    s.add(_record(FC(2, n, 64, 10), b, _samples(rng, _median(n, b) * factor),
                                  f"2026-01-0{v + 1}T00:00:00+00:00",
                                  software={"paradnn_revision": f"git:{'abcdef'[v]}{v}00000000"}))
    return path


def test_history_finds_the_step_at_the_revision_that_made_it(tmp_path, capsys):
    h = paradnn.compare.history(_history_store(tmp_path / "h.db", step_at=2))
    assert list(h.versions["version"]) == ["a000000000", "b100000000", "c200000000", "d300000000"]
    assert h.configs == 8
    assert len(h.steps) == 4 and set(h.steps["version"]) == {"c200000000"}
    assert set(h.steps["previous"]) == {"b100000000"}
    assert (h.steps["nodes"] >= 256).all() and (h.steps["verdict"] == "regression").all()
    assert h.steps["ratio"].between(1.35, 1.65).all()
    assert h.exit_code() == 0  # the newest version made no step
    assert main(["compare", str(tmp_path / "h.db")]) == 0
    out = capsys.readouterr().out
    assert "at c200000000 (after b100000000):" in out and out.count("regression") == 4
    h = paradnn.compare.history(_history_store(tmp_path / "h2.db", step_at=3))
    assert set(h.steps["version"]) == {"d300000000"} and h.exit_code() == 1
    assert main(["compare", str(tmp_path / "h2.db"), "--history", "--json", str(tmp_path / "h.json")]) == 1
    assert json.loads((tmp_path / "h.json").read_text())["steps"][0]["version"] == "d300000000"


def test_history_without_a_step_and_with_one_version(tmp_path):
    h = paradnn.compare.history(_history_store(tmp_path / "flat.db", step_at=99))
    assert h.steps.empty and h.exit_code() == 0
    one = _grid_store(tmp_path / "one.db", seed=60)
    h = paradnn.compare.history(one)
    assert h.steps.empty and any("one version" in n for n in h.notes)


# -- the speedup join (paradnn plot speedup tf.db torch.db) -----------------------------------

def test_speedup_of_two_framework_stores_joins_without_the_framework(tmp_path):
    rng = np.random.default_rng(70)
    for fw in ("tensorflow", "torch"):
        with Store(tmp_path / f"{fw}.db") as s:
            for n in NODES:
                s.add(_record(FC(2, n, 64, 10), 8, _samples(rng, 1e-3 if fw == "torch" else 2e-3),
                              "2026-01-01T00:00:00+00:00", framework=fw,
                              software={"framework_version": {"tensorflow": "2.21", "torch": "2.15"}[fw]}))
    tf, torch = load(tmp_path / "tensorflow.db"), load(tmp_path / "torch.db")
    sp = speedup(torch, tf)
    assert len(sp) == len(NODES) and "framework" not in sp.attrs["on"]
    assert sp["speedup"].between(1.6, 2.4).all()
    out = tmp_path / "sp.png"
    assert main(["plot", "speedup", str(tmp_path / "torch.db"), str(tmp_path / "tensorflow.db"),
                 "-o", str(out)]) == 0
    assert out.stat().st_size > 0
    # Two dtypes of one store, selected with --a/--b, join the same way.
    with Store(tmp_path / "mixed.db") as s:
        for dtype in ("float32", "bfloat16"):
            for n in NODES:
                s.add(_record(FC(2, n, 64, 10), 8, _samples(rng, 1e-3), "2026-01-01T00:00:00+00:00",
                              dtype=dtype))
    assert main(["plot", "speedup", str(tmp_path / "mixed.db"), "--a", "dtype=bfloat16", "--b",
                 "dtype=float32", "-o", str(tmp_path / "dt.png")]) == 0


# -- the heat map and the report section ------------------------------------------------------

def test_heatmap_hatches_the_cells_that_did_not_change(tmp_path):
    from matplotlib.patches import Rectangle

    from paradnn.plots.compare import HATCH, compare_heatmap, heat_table

    planted = lambda n, b: b <= 16  # noqa: E731
    base = _grid_store(tmp_path / "base.db", seed=80)
    _plant_copy(base, tmp_path / "new.db", seed=81, planted=planted)
    r = paradnn.compare(base, tmp_path / "new.db")
    cells = heat_table(r, "nodes", "batch")
    assert len(cells) == 16 and (cells["configs"] == 1).all()
    assert (~cells.loc[cells["batch"] <= 16, "hatched"]).all()  # the planted slowdown
    # Hatched: exactly the configs whose change is not significant (a 2% shift of a tight
    # config can be significant without being a regression: not hatched either).
    q = r.table.set_index(["nodes", "batch"])["q"]
    assert list(cells["hatched"]) == [bool(q[(n, b)] >= r.alpha) for n, b in zip(cells["nodes"], cells["batch"])]
    assert cells["hatched"].any()
    fig = compare_heatmap(r)  # default axes: nodes (x) against batch (y)
    ax = fig.axes[0]
    assert ax.get_xlabel().startswith("nodes") and ax.get_ylabel().startswith("batch")
    hatched = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_hatch() == HATCH]
    assert len(hatched) == int(cells["hatched"].sum())
    assert main(["compare", str(base), str(tmp_path / "new.db"), "--plot", str(tmp_path / "h.png")]) == 1
    assert (tmp_path / "h.png").stat().st_size > 10_000
    assert main(["compare", str(base), str(tmp_path / "new.db"), "--plot", str(tmp_path / "x.png"),
                 "--x", "cell"]) == 2


def test_report_section_compares_the_two_newest_versions(tmp_path):
    from paradnn.report.compare import compare_section
    from paradnn.report.parts import Missing
    from paradnn.report.sections import plan

    df = load(_history_store(tmp_path / "h.db", step_at=3))
    [section] = compare_section(df)
    items = section.items
    assert section.id == "compare" and len(items) == 3
    caption = items[0].caption
    assert caption.startswith("d300000000 against c200000000 (revision") and "4 regression(s)" in caption
    assert "nodes >= 256" in caption
    assert items[0].make_figure().axes[0].get_title(loc="left").startswith("fc:")
    table = items[1].table
    assert (table["verdict"] == "regression").sum() == 4 and "ratio (x, NEW/BASE step time)" in table
    assert list(items[2].table["at version"].unique()) == ["d300000000"]
    assert "compare" in [s.id for s in plan(df)[0]]
    one = load(_grid_store(tmp_path / "one.db", seed=90))
    with pytest.raises(Missing, match="two versions"):
        compare_section(one)
    [missing] = [m for m in plan(one)[1] if m.id == "compare"]
    assert "paradnn merge" in missing.command and "new.db" in missing.command


def test_a_comparison_of_two_matmul_precisions_is_flagged(tmp_path):
    """Both sides at their framework's default precision can still differ in what they computed
    with (JAX's TF32 against PyTorch's float32 on an NVIDIA GPU): the measured
    matmul_precision_used flags such configs, in the table, the text and a note."""
    base = _grid_store(tmp_path / "a.db", 1, measured={"matmul_precision_used": "tf32"})
    new = _grid_store(tmp_path / "b.db", 2, framework="torch", measured={"matmul_precision_used": "highest"},
                      software={"framework_version": "2.15", "torch_version": "2.15"})
    result = AC.compare_frames(load(base), load(new), axes="framework")
    assert result.table["precision_differs"].all()
    assert any("different precisions" in n and "BASE tf32; NEW highest" in n for n in result.notes)
    assert "[matmul precision differs]" in paradnn.compare.text(result)
    from paradnn.analysis import framework_speedup, speedup_summary

    sp = framework_speedup(pd.concat([load(base), load(new)]), "torch", "jax")
    assert len(sp) and sp["precision_differs"].all() and speedup_summary(sp)["precision_differs"] == len(sp)
    same = _grid_store(tmp_path / "c.db", 3, framework="torch", measured={"matmul_precision_used": "tf32"},
                       software={"framework_version": "2.15", "torch_version": "2.15"})
    result = AC.compare_frames(load(base), load(same), axes="framework")
    assert not result.table["precision_differs"].any()
    assert not any("different precisions" in n for n in result.notes)


def test_cpu_runs_with_host_memory_backed_differently_are_noted(tmp_path):
    """Huge pages for malloc move a large CPU model's step by up to 1.2x (paradnn.hostmem): a
    comparison of rows that ran with different backing says so, including rows from before
    paradnn recorded it; rows with the same backing are not noted."""
    base = _grid_store(tmp_path / "a.db", 1)  # no host_huge_pages: rows before it was recorded
    new = _grid_store(tmp_path / "b.db", 2, measured={"host_huge_pages": "malloc"})
    result = AC.compare_frames(load(base), load(new))
    [note] = [n for n in result.notes if "host memory backed differently" in n]
    assert note.startswith(f"{len(result.table)} CPU config(s)") and "BASE not recorded; NEW malloc" in note
    same = _grid_store(tmp_path / "c.db", 3, measured={"host_huge_pages": "malloc"})
    assert not any("host memory" in n for n in AC.compare_frames(load(new), load(same)).notes)


def _pinned_pair(tmp_path: Path, calls: int, slow: float, seed: int = 3) -> list[str]:
    """Four FC configs measured twice (BASE and NEW, one day apart) with ``calls`` per-call
    times each, NEW ``slow`` x slower (a 1-core run against a 2-core one is about 1.8-2.2x)."""
    rng = np.random.default_rng(seed)
    paths = [tmp_path / "a.db", tmp_path / "b.db"]
    with Store(paths[0]) as a, Store(paths[1]) as b:
        for n in NODES:
            base = _median(n, 64)
            a.add(_record(FC(2, n, 64, 10), 64, _samples(rng, base, n=calls, spread=0.02), "2026-01-01T00:00:00+00:00"))
            b.add(_record(FC(2, n, 64, 10), 64, _samples(rng, base * slow, n=calls, spread=0.02),
                          "2026-01-02T00:00:00+00:00"))
    return [str(p) for p in paths]


def test_the_fewest_timed_calls_can_show_a_2x_regression(tmp_path, capsys):
    """With the 6 timed calls a side every run now has (MIN_TIMED_CALLS), a 2x slowdown of four
    configs is significant after the correction: exit 1, every config named a regression. Two
    measurements of the same thing exit 0."""
    from paradnn.measure import MIN_TIMED_CALLS

    base, new = _pinned_pair(tmp_path, MIN_TIMED_CALLS, 2.0)
    capsys.readouterr()
    assert main(["compare", base, new]) == 1
    out = capsys.readouterr().out
    assert out.startswith("paradnn compare: 4 regression(s) beyond 1.1x in 4 configs")
    assert out.count("regression ") >= 4
    (tmp_path / "same").mkdir()
    assert main(["compare", *_pinned_pair(tmp_path / "same", MIN_TIMED_CALLS, 1.0, seed=5)]) == 0


def test_a_whole_interval_beyond_the_threshold_is_a_regression_without_a_p_value(tmp_path):
    """3 calls a side (the cv rule of schema 4 stopped there on a quiet host): no rank test can
    reach p < 0.05 (at best 0.1), but every call of NEW is 2x every call of BASE, so the whole
    interval lies beyond the threshold: a regression, not "inconclusive" for lack of a p-value."""
    base, new = _pinned_pair(tmp_path, 3, 2.0)
    result = paradnn.compare(base, new)
    assert (result.table["p"] > 0.05).all()
    assert (result.table["ci_low"] >= 1.1).all()
    assert set(result.table["verdict"]) == {"regression"} and result.exit_code() == 1
