"""The framework setting ``best`` (paradnn.beststack): calibration, its cache, records, speedups.

Real frameworks on tiny models: each calibration child starts its framework in a fresh process,
so the calibration is measured once per module (a fixture) and reused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest

import paradnn
from paradnn import backends, beststack
from paradnn.analysis import best_stack_speedup
from paradnn.errors import InfrastructureError, ParadnnError, SpecError
from paradnn.measure import MeasureSettings
from paradnn.workload import Workload

SPEC = paradnn.FC(layers=1, nodes=32, input=64, output=10)
FAST = {"time_budget_s": 0.3, "warmup_s": 0.05}


@pytest.fixture(scope="module", autouse=True)
def private_cache(tmp_path_factory):
    """This module's calibrations in a cache folder of its own (the probe's cache copied in):
    pytest-xdist spreads the module's tests over its workers, each with its own calibration
    fixture, and in a shared cache one worker's refresh replaces the calibration another
    worker's tests compare with. Children (the CLI test) find it through PARADNN_CACHE."""
    from paradnn import hardware
    from paradnn.hardware import probe_cache

    before = os.environ["PARADNN_CACHE"], hardware.CACHE_PATH, probe_cache.CACHE_PATH
    folder = tmp_path_factory.mktemp("best-stack-cache")
    if probe_cache.CACHE_PATH.exists():
        shutil.copy(probe_cache.CACHE_PATH, folder / probe_cache.CACHE_PATH.name)
    os.environ["PARADNN_CACHE"] = str(folder)
    hardware.CACHE_PATH = probe_cache.CACHE_PATH = folder / probe_cache.CACHE_PATH.name
    yield folder
    os.environ["PARADNN_CACHE"], hardware.CACHE_PATH, probe_cache.CACHE_PATH = before


@pytest.fixture(scope="module")
def calibration(private_cache):
    """One real calibration of jax, tensorflow and torch on a tiny FC (one round)."""
    return beststack.calibrate(Workload(SPEC, 16), MeasureSettings(**FAST), refresh=True, rounds=1, budget_s=0.5)


def test_choose_keeps_the_reference_within_the_margin():
    ref = backends.DEFAULT
    assert beststack.choose({ref: 100.0, "torch": 102.9})[0] == ref
    chosen, rule = beststack.choose({ref: 100.0, "torch": 103.5, "tensorflow": 50.0})
    assert chosen == "torch" and "1.035x" in rule
    # A reference that could not run leaves the fastest other; none at all is an error.
    assert beststack.choose({ref: None, "torch": 5.0, "tensorflow": 7.0})[0] == "tensorflow"
    with pytest.raises(InfrastructureError, match="no framework could run"):
        beststack.choose({ref: None, "torch": None})


def test_calibration_times_every_candidate_and_is_stored(calibration):
    assert calibration["family"] == "fc" and calibration["rounds"] == 1
    assert list(calibration["examples_per_sec"]) == beststack.candidates(SPEC)
    assert calibration["examples_per_sec"][backends.DEFAULT] > 0
    for name, value in calibration["examples_per_sec"].items():
        assert (value is not None and value > 0) or name in calibration["errors"], (name, calibration["errors"])
    ran = {k: v for k, v in calibration["examples_per_sec"].items() if v}
    assert calibration["chosen"] == beststack.choose(ran)[0]
    assert calibration["workload"]["nodes"] == 32 and "framework" not in calibration["workload"]
    stored = json.loads(beststack.cache_path().read_text())
    assert stored[calibration["key"]] == calibration


def test_a_stored_calibration_is_reused_and_refresh_measures_again(calibration):
    # Another config of the same family on the same platform and versions: the stored one.
    again = beststack.calibrate(Workload(paradnn.FC(layers=2, nodes=16, input=8, output=4), 8))
    assert again == calibration
    # Another candidate list is another key; refresh always measures.
    fresh = beststack.calibrate(Workload(SPEC, 16), MeasureSettings(**FAST), refresh=True, rounds=1,
                                frameworks=[backends.DEFAULT], budget_s=0.3)
    assert fresh["key"] != calibration["key"] and fresh["chosen"] == backends.DEFAULT
    assert list(fresh["examples_per_sec"]) == [backends.DEFAULT]
    assert beststack.cached(calibration["key"]) == calibration


def test_the_cache_key_covers_platform_family_and_versions():
    platform = {"host": "h", "cpu_model": "c", "device_platform": "cpu", "device_kind": "cpu", "device_count": 1}
    key = beststack.cache_key(platform, "fc", ["jax", "torch"])
    assert key == beststack.cache_key(dict(platform), "fc", ["jax", "torch"])
    assert key != beststack.cache_key({**platform, "device_kind": "cpu (2 of 8 cores)"}, "fc", ["jax", "torch"])
    assert key != beststack.cache_key(platform, "cnn", ["jax", "torch"])
    assert key != beststack.cache_key(platform, "fc", ["jax"])
    # A calibration under other options of a candidate (the system's malloc for torch) is another.
    reuse = beststack.cache_key(platform, "fc", ["jax", "torch"], {"torch": {"cpu_allocator": "reuse"}})
    assert reuse != key and reuse != beststack.cache_key(platform, "fc", ["jax", "torch"],
                                                         {"torch": {"cpu_allocator": "system"}})
    # A preset whose meaning changed (JAX's xla_compile_options) is another calibration.
    before = beststack.cache_key(platform, "fc", ["jax", "torch"], None, {"xla_compile_options": '{"best":{}}'})
    assert before != key and before != beststack.cache_key(
        platform, "fc", ["jax", "torch"], None, {"xla_compile_options": '{"best":{},"best fallback":{}}'})
    assert "jaxlib" in beststack.versions(["jax"]) and beststack.versions(["jax"])["jaxlib"]


def test_bad_calibration_arguments_are_refused():
    w = Workload(SPEC, 16)
    with pytest.raises(SpecError, match="rounds"):
        beststack.calibrate(w, rounds=0)
    with pytest.raises(SpecError, match="budget_s"):
        beststack.calibrate(w, budget_s=-1)
    with pytest.raises(SpecError, match="frameworks"):
        beststack.calibrate(w, frameworks=["jax", "nosuch"])
    with pytest.raises(SpecError, match="reference"):
        beststack.calibrate(w, frameworks=["torch"])


def test_a_best_run_names_the_framework_and_its_calibration(calibration):
    record = paradnn.run(SPEC, batch=16, framework="best", **FAST)
    assert record.status == "ok", record.error
    assert record.workload["framework"] == calibration["chosen"]
    assert record.metrics["framework_choice"] == "best"
    assert json.loads(record.metrics["best_calibration"]) == calibration  # the stored one, reused
    row = record.to_dict()
    assert row["framework_choice"] == "best" and json.loads(row["best_calibration"])["id"] == calibration["id"]


@pytest.mark.slow
def test_options_of_a_best_run_apply_to_their_own_framework_and_key_its_calibration(calibration):
    """Options of other frameworks are allowed; each applies to its own framework only, and the
    calibration a run uses is one measured under the same options (not the default-options one)."""
    settings = MeasureSettings(**FAST, xla_preset="stock", torch_compile="eager")
    mine = beststack.calibrate(Workload(SPEC, 16), settings, rounds=1, budget_s=0.5)
    assert mine["key"] != calibration["key"]
    assert mine["options"]["torch"]["torch_compile"] == "eager" and mine["options"]["jax"]["xla_preset"] == "stock"
    record = paradnn.run(SPEC, batch=16, framework="best", xla_preset="stock", torch_compile="eager", **FAST)
    assert record.status == "ok", record.error
    assert json.loads(record.metrics["best_calibration"]) == mine
    assert record.workload["framework"] == mine["chosen"]
    # Only the chosen framework's options are in its settings (the key of a plain run of it).
    assert set(record.settings) - set(MeasureSettings().to_dict(record.workload["framework"])) == set()


def test_the_default_framework_never_switches():
    record = paradnn.run(SPEC, batch=16, **FAST)
    assert record.workload["framework"] == backends.DEFAULT
    assert "framework_choice" not in record.metrics


def test_cli_run_framework_best(calibration):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "paradnn", "run", "fc", "--layers", "1", "--nodes", "32",
                           "--input", "64", "--output", "10", "--batch", "16", "--framework", "best",
                           "--time-budget-s", "0.3", "--json"], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    row = json.loads(done.stdout.strip().splitlines()[-1])
    assert row["framework"] == calibration["chosen"] and row["framework_choice"] == "best"
    assert json.loads(row["best_calibration"])["id"] == calibration["id"]


def _rows(platform: str, framework: str, eps: float, best: bool) -> dict:
    calibration = json.dumps({"id": f"cal-{platform}", "chosen": framework})
    return {"family": "fc", "layers": 1, "nodes": 32, "input": 64, "output": 10, "batch": 16,
            "dtype": "float32", "optimizer": "rmsprop", "devices": 1, "framework": framework,
            "status": "ok", "examples_per_sec": eps, "stable": True, "device_kind": platform,
            "device_platform": "gpu" if platform == "H100" else "cpu", "device_count": 1,
            **({"framework_choice": "best", "best_calibration": calibration} if best else {})}


def test_a_speedup_of_best_stacks_says_which_stack_each_side_used():
    a = pd.DataFrame([_rows("H100", "jax", 4000.0, True), _rows("H100", "torch", 9999.0, False)])
    b = pd.DataFrame([_rows("EPYC", "torch", 1000.0, True), _rows("EPYC", "jax", 500.0, False)])
    sp = best_stack_speedup(a, b)
    assert len(sp) == 1 and sp["speedup"].iloc[0] == pytest.approx(4.0)
    assert (sp["framework_a"].iloc[0], sp["framework_b"].iloc[0]) == ("jax", "torch")
    assert (sp["best_calibration_id_a"].iloc[0], sp["best_calibration_id_b"].iloc[0]) == ("cal-H100", "cal-EPYC")
    assert sp.attrs["stacks"] == {"a": ["jax"], "b": ["torch"]}
    assert sp.attrs["a"].endswith("at its best stack (jax)") and sp.attrs["comparison"] == "best stack"
    with pytest.raises(ParadnnError, match="no records of a run at the best stack"):
        best_stack_speedup(a, b[b["framework"] == "jax"].drop(columns=["framework_choice", "best_calibration"]))


def test_a_best_stack_sweep_measures_each_config_with_its_familys_choice(calibration, tmp_path):
    """best_stack in a sweep: every record of the family names the framework its calibration
    chose and carries that calibration, as a `run --framework best` record does."""
    grid = paradnn.grid("fc", layers=1, nodes=[32, 48], input=64, output=10, batch=16)
    lines = []

    class Lines:
        def write(self, text):
            lines.append(text)

        def flush(self):
            pass

    df = paradnn.sweep(grid, store=tmp_path / "best.db", best_stack=True, settings=FAST, progress=Lines(),
                       retry_unstable_s=0)
    assert len(df) == 2 and set(df["status"]) == {"ok"}
    assert set(df["framework"]) == {calibration["chosen"]}
    assert set(df["framework_choice"]) == {"best"}
    assert {json.loads(c)["id"] for c in df["best_calibration"]} == {calibration["id"]}
    text = "".join(lines)
    assert f"fc: {calibration['chosen']} ({calibration['rule']}; calibration {calibration['id']})" in text
    assert "differs from the one predicted" not in text  # the records' keys are the configs' own
    # Resumed, nothing is measured again: the keys are those of the chosen framework.
    again = paradnn.sweep(grid, store=tmp_path / "best.db", best_stack=True, settings=FAST, progress=False,
                          retry_unstable_s=0)
    assert again.attrs["written"] == [] and len(again) == 2


def test_best_stack_is_refused_where_the_calibration_cannot_choose(tmp_path):
    store = tmp_path / "never.db"
    torch_config = paradnn.grid("fc", layers=1, nodes=32, input=64, output=10, batch=16, framework="torch")
    with pytest.raises(SpecError, match=r"best_stack.*leave framework at its default \(jax\).*names torch"):
        paradnn.sweep(torch_config, store=store, best_stack=True, progress=False)
    assert not store.exists()
    with pytest.raises(SpecError, match=r"best_stack.*only with executor='process' or 'inprocess'"):
        paradnn.sweep(paradnn.grid("fc", layers=1, nodes=32, input=64, output=10, batch=16), store=store,
                      best_stack=True, executor="ray", progress=False)
    assert not store.exists()


def test_a_sweep_file_says_framework_best(tmp_path):
    from paradnn.sweeper import SweepConfig

    base = "family: fc\nfixed: {layers: 1, input: 64, output: 10, batch: 16}\naxes: {nodes: [32, 48]}\n"
    best = tmp_path / "best.yaml"
    best.write_text(base + "framework: best\n")
    config = SweepConfig.resolve(best, tmp_path / "s.db")
    assert config.best_stack and {w.framework for w in config.workloads} == {backends.DEFAULT}
    assert config.origins["best_stack"] == "sweep file run.best_stack"
    for extra, key, reason in [
            ("framework: [jax, best]\n", "framework", "best stands alone"),
            ("framework: best\nrun: {best_stack: false}\n", "run.best_stack", "false, but framework is best")]:
        bad = tmp_path / "bad.yaml"
        bad.write_text(base + extra)
        with pytest.raises(ParadnnError, match=f"{key}.*{reason}"):
            SweepConfig.resolve(bad, tmp_path / "s.db")
    parts = tmp_path / "parts.yaml"
    parts.write_text("parts:\n"
                     "  - {family: fc, layers: 1, nodes: 32, input: 64, output: 10, batch: 16, framework: best}\n"
                     "  - {family: fc, layers: 1, nodes: 48, input: 64, output: 10, batch: 16, framework: torch}\n")
    with pytest.raises(ParadnnError, match=r"parts\[0\]\.framework.*other configs name framework torch"):
        SweepConfig.resolve(parts, tmp_path / "s.db")
