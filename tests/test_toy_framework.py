"""A toy framework (tests/toy_numpy: the FC family in plain numpy) registered as one package
plus one registry line flows through run, plan, sweep (process executor, twice, progress on),
the store, a heat map, the report and the CLI; its child processes see it through
$PARADNN_PLUGINS."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import paradnn
from paradnn import backends, families, plugins
from paradnn.families.fc import FC

TESTS = Path(__file__).parent
PLUGIN = "toy_numpy.plugin"


@pytest.fixture
def numpy_framework(monkeypatch):
    """The toy registered here and, through the environment, in every child process."""
    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.setenv(plugins.ENV, PLUGIN)
    fc = families.get("fc")
    plugins.load_plugins()
    if "numpy" not in backends.names():  # imported by an earlier test: register again
        import importlib

        importlib.reload(importlib.import_module(PLUGIN))
    yield backends.get("numpy")
    backends.unregister("numpy")
    families.register(fc)


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(TESTS), *sys.path])
    return {**os.environ, plugins.ENV: PLUGIN, "PYTHONPATH": path}


@pytest.mark.slow
def test_toy_framework_runs_sweeps_and_reports(numpy_framework, tiny_settings, tmp_path):
    spec = FC(layers=2, nodes=16, input=8, output=4)
    rec = paradnn.run(spec, batch=8, framework="numpy", settings=tiny_settings)
    assert rec.status == "ok", rec.error
    assert rec.workload["framework"] == "numpy" and rec.software["numpy_version"]
    assert rec.metrics["params"] == families.param_count(spec)
    assert rec.metrics["model_flops_per_step"] == families.get("fc").train_flops_per_example(spec) * 8
    assert rec.metrics["flops_per_step"] is None and "toy" in rec.metrics["flops_source"]
    assert set(rec.settings) == set(tiny_settings.to_dict("numpy"))  # the protocol: no options

    grid = paradnn.grid("fc", layers=[1, 2], nodes=[8, 16], input=8, output=4, batch=[4, 8],
                        framework="numpy")
    from paradnn import plan

    assert plan.plan(grid).summary["to_run"] == len(grid)

    # Two sweeps with progress on, in child processes: the second measures nothing (resume).
    store = tmp_path / "numpy.db"
    runs = []
    for _ in range(2):
        stream = io.StringIO()
        df = paradnn.sweep(grid, store=store, executor="process", settings=tiny_settings, progress=stream)
        runs.append(stream.getvalue())
        assert len(df) == len(grid) and (df["status"] == "ok").all(), df["error"].tolist()
    assert len(paradnn.load(store)) == len(grid)
    assert f"0 config(s) to measure, {len(grid)} already in the store" in runs[1], runs[1]

    loaded = paradnn.load(store)
    assert set(loaded["framework"]) == {"numpy"} and loaded["numpy_version"].notna().all()
    hm = paradnn.analysis.heatmap(loaded, "batch", "nodes", "examples_per_sec",
                                  fixed={"family": "fc", "layers": 2})
    assert len(hm) == 4 and hm["examples_per_sec"].notna().all()

    from paradnn import report

    sections, missing = report.plan(loaded, store=str(store))
    titles = " ".join(s.title for s in sections)
    assert "FC" in titles, (titles, [m.title for m in missing])


@pytest.mark.slow
def test_toy_framework_on_the_command_line(paradnn_cmd, tmp_path):
    """The CLI's --framework choices come from the registry, plugins included."""
    args = [*paradnn_cmd, "run", "fc", "--layers", "1", "--nodes", "8", "--input", "8", "--output", "4",
            "--batch", "4", "--framework", "numpy", "--steps-per-call", "2", "--warmup-s", "0",
            "--min-calls", "6", "--max-calls", "6", "--ci-target", "0.5", "--time-budget-s", "0.2", "--json"]
    out = subprocess.run(args, capture_output=True, text=True, env=_env(), timeout=600)
    assert out.returncode in (0, 1), out.stderr[-2000:]
    row = json.loads(out.stdout)
    assert row["status"] == "ok" and row["framework"] == "numpy" and row["numpy_version"], row.get("error")
    no_plugin = {k: v for k, v in _env().items() if k != plugins.ENV}
    out = subprocess.run(args, capture_output=True, text=True, env=no_plugin, timeout=600)
    assert out.returncode == 2 and "invalid choice: 'numpy'" in out.stderr


def test_toy_framework_is_one_package_plus_one_line():
    """What the toy needs from paradnn: its package and the registry line. The families it
    builds are in its INFO: no family is registered again, and the FC family learns the
    toy's builder from the framework registry alone."""
    files = sorted(p.name for p in (TESTS / "toy_numpy").glob("*.py"))
    assert files == ["__init__.py", "backend.py", "model.py", "plugin.py"]
    text = (TESTS / "toy_numpy" / "plugin.py").read_text()
    assert text.count("backends.register(") == 1
    code = text.split('"""')[-1]  # after the module's docstring
    assert "families" not in code
