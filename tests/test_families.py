"""The family registry and the framework seam: a toy family registered here flows through run,
sweep, store, analysis and report; the contract table (family x framework x dtype) holds; a
schema-1 store (committed, written by paradnn before frameworks) still loads and migrates."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

import paradnn
from paradnn import backends, families
from paradnn.errors import SpecError
from paradnn.families.fc import FC
from paradnn.sizes import OPTIMIZERS
from paradnn.workload import Spec, Workload

DATA = Path(__file__).parent / "data"
WORKER = Path(__file__).parent / "contract_worker.py"


# -- the registry -----------------------------------------------------------------------------

def test_family_modules_import_no_framework():
    """Analytic counts are plain arithmetic: importing the registry and every family module
    imports neither JAX nor Flax nor any other framework (checked in a fresh interpreter)."""
    code = ("import sys, paradnn.families as f; f.names(); "
            "from paradnn import FC, Real, Workload, sizes; Workload(Real('resnet50'), 8); "
            "import paradnn.grids, paradnn.workload, paradnn.analysis.cost; "
            "sizes.config_sizes(Workload(FC(2, 8, 8, 2), 4)); "
            "print(sorted(m for m in ('jax', 'flax', 'tensorflow', 'torch', 'optax') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_every_family_has_its_facts_in_one_entry():
    for name in families.names():
        fam = families.get(name)
        assert fam.spec.family == name
        assert "jax" in fam.framework_builders()
        assert set(a.name for a in fam.axes) <= set(fam.fields())
        for preset in fam.tiny:
            spec = fam.spec(**{k: v for k, v in preset.items() if k != "batch"})
            assert fam.default_batch(spec) > 0
            assert fam.default_optimizer(spec) in OPTIMIZERS
            if fam.param_count is not None:  # the closed form equals the JAX model's shapes
                from paradnn.backends.jax.models import build, count_from_shapes

                assert fam.param_count(spec) == count_from_shapes(build(spec))


def test_framework_is_validated_per_spec():
    with pytest.raises(SpecError, match="framework='caffe'"):
        Workload(FC(1, 4, 4, 2), 2, framework="caffe")
    with pytest.raises(SpecError, match="for model bert_base"):
        Workload(paradnn.Real("bert_base"), 2, framework="torch")
    w = Workload(FC(1, 4, 4, 2), 2, framework="TensorFlow")
    assert w.framework == "tensorflow" and w.to_dict()["framework"] == "tensorflow"
    assert Workload(FC(1, 4, 4, 2), 2).key != w.key


# -- a toy family, registered in the test, flows through everything ----------------------------

@dataclass(frozen=True)
class Toy(Spec):
    """A one-hidden-layer perceptron with a new hyperparameter name (``hidden``)."""

    hidden: int
    classes: int = 3
    family: ClassVar[str] = "toy"
    _ints: ClassVar[tuple[str, ...]] = ("hidden", "classes")


TOY_INPUT = 8


def toy_params(spec: Toy) -> int:
    return TOY_INPUT * spec.hidden + spec.hidden + spec.hidden * spec.classes + spec.classes


def toy_flops(spec: Toy) -> float:
    # Forward 2W, weight gradients 2W, input gradient of the second layer 2 * hidden * classes.
    w = TOY_INPUT * spec.hidden + spec.hidden * spec.classes
    return 6.0 * w - 2.0 * TOY_INPUT * spec.hidden


def build_toy(spec: Toy, dtype: str):
    """The toy's JAX model: reuses the FC module (one hidden layer) on TOY_INPUT features."""
    from paradnn.backends.jax.models import fc

    model = fc.build(FC(1, spec.hidden, TOY_INPUT, spec.classes), dtype)
    return type(model)(**{**model.__dict__, "name": "toy", "train_flops_per_example": toy_flops(spec)})


@pytest.fixture
def toy_family():
    fam = families.register(families.Family(
        name="toy", spec=Toy, description="toy perceptron: --hidden [--classes]",
        axes=(families.Axis("hidden", "units", "hidden units, a count"),
              families.Axis("classes", "classes", "output classes, a count")),
        builders={"jax": f"{__name__}:build_toy"},
        param_count=toy_params, train_flops_per_example=toy_flops,
        default_batch=lambda spec: 4, width="hidden",
        presets={"smoke": {"hidden": [4, 8], "classes": 3, "batch": 2}},
        suggested_grid=({"classes": 3}, {"hidden": [4, 8, 16], "batch": [2, 4, 8, 16]}),
        tiny=({"hidden": 4, "batch": 2},)))
    yield fam
    families.unregister("toy")


def test_toy_family_flows_through_run_sweep_store_analysis_report(toy_family, tiny_settings, tmp_path, capsys):
    rec = paradnn.run(Toy(hidden=8), settings=tiny_settings)
    assert rec.status == "ok", rec.error
    assert rec.workload["family"] == "toy" and rec.workload["batch"] == 4  # the family's default
    assert rec.metrics["params"] == toy_params(Toy(8))
    assert rec.metrics["model_flops_per_step"] == toy_flops(Toy(8)) * 4

    grid = paradnn.grid("toy", hidden=[4, 8, 16], batch=[2, 4, 8, 16])
    assert len(grid) == 12 and len(paradnn.grids.preset("smoke", "toy")) == 2
    store = tmp_path / "toy.db"
    # Progress on, twice: the second sweep into a non-empty store estimates its time from the
    # first one's records (the planner's estimator, which must take a family it has no
    # activation estimate for).
    df = paradnn.sweep(grid[:6], store=store, executor="inprocess", settings=tiny_settings, progress=True)
    assert (df["status"] == "ok").all()
    df = paradnn.sweep(grid, store=store, executor="inprocess", settings=tiny_settings, progress=True)
    assert (df["status"] == "ok").all() and len(df) == 12
    first_lines = [line for line in capsys.readouterr().err.splitlines() if "to measure" in line]
    assert len(first_lines) == 2 and "6 already in the store" in first_lines[1]
    assert "; estimated " in first_lines[1] and "ok record(s)" in first_lines[1], first_lines[1]
    loaded = paradnn.load(store)
    assert "hidden" in loaded.columns and set(loaded["hidden"]) == {4, 8, 16}

    from paradnn.analysis.columns import CONFIG_FIELDS, unit

    assert "hidden" in CONFIG_FIELDS and unit("hidden") == "units"
    hm = paradnn.analysis.heatmap(loaded, "batch", "hidden", "examples_per_sec", fixed={"family": "toy"})
    assert len(hm) == 12 and hm["examples_per_sec"].notna().all()  # one tidy row per cell

    from paradnn import report

    sections, missing = report.plan(loaded, store=str(store))
    titles = " ".join(s.title for s in sections)
    assert "TOY heat maps" in titles, (titles, [m.title for m in missing])

    # The planner: counts from the family's closed forms, memory unknown (no activation or
    # batch estimate registered) and said so, never a crash; the floor still predicts an oom.
    from paradnn.plan import config_table, plan

    row = config_table([Workload(Toy(8), 4)]).iloc[0]
    assert row["params"] == toy_params(Toy(8)) and row["model_flops_per_step"] == toy_flops(Toy(8)) * 4
    assert np.isnan(row["memory_bytes"]) and np.isnan(row["activation_bytes"])
    assert row["memory_source"].startswith("unknown: family toy gives no estimate")
    assert row["memory_floor_bytes"] == row["state_bytes"] + row["gradient_bytes"] > 0
    p = plan(grid, store=store, settings=tiny_settings, repeat=2)
    s = p.summary
    assert s["memory_unknown"] == 12 and s["memory_unknown_by_family"] == {"toy": 12}
    assert s["to_run"] == 12 and s["wall_s"] is not None and s["wall_s"] > 0
    tight = plan(grid, store=None, memory_limit_bytes=int(row["memory_floor_bytes"]) - 1)
    assert tight.summary["oom"] == 8  # every hidden=8 and hidden=16 config: their floor is over

    from paradnn.cli.plan import format_plan

    assert "memory           unknown: no activation or batch estimate for any config (toy 12)" in format_plan(p)


def test_family_markers_and_display_names_are_registry_fields(toy_family):
    """Figures and report headings read a family's marker and name from its entry (one place),
    with a fallback for families a store names but this process has not registered."""
    assert [families.display_name(f) for f in ("fc", "cnn", "rnn", "real", "transformer")] == \
        ["FC", "CNN", "RNN", "real model", "Transformer"]
    assert [families.marker(f) for f in ("fc", "cnn", "rnn", "real")] == ["o", "s", "^", "*"]
    assert families.display_name("toy") == "TOY" and families.marker("toy") == families.DEFAULT_MARKER
    assert families.display_name("gone") == "gone" and families.marker("gone") == families.DEFAULT_MARKER


def test_toy_family_on_the_command_line(toy_family):
    """The CLI reads the registry: the toy's flags appear, bad values name the parameter."""
    from paradnn.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["run", "toy", "--hidden", "0"])
    assert exc.value.code == 2


# -- the contract table: registry x frameworks x dtypes -----------------------------------------

CONTRACT_DTYPES = ("float32", "bfloat16")


def _contract_rows(framework: str) -> list[dict]:
    why = backends.available(framework)
    if why is not None:
        pytest.skip(f"{framework} backend unavailable: {why}")
    out = subprocess.run([sys.executable, str(WORKER), framework, *CONTRACT_DTYPES],
                         capture_output=True, text=True, timeout=1500)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("framework", families.FRAMEWORKS)
def test_contract_table(framework):
    """For every family's tiny presets that ``framework`` builds, in every dtype: it builds and
    compiles; its trainable parameters equal the closed-form (or JAX-shape) count; three steps
    give finite losses and lower the loss below the initial one (one step may overshoot: batches
    of 2-8 examples at ParaDnn's learning rates; a wrong gradient never lowers it); PyTorch runs eagerly here (torch.compile is tested in
    test_backend_torch); executed FLOPs (where the
    framework counts them) are within [0.5, 2] of the analytic count — tiny models spend a
    large share on element-wise work, so the 10% agreement is checked at realistic sizes in
    test_models and across frameworks in the backends' tests."""
    rows = _contract_rows(framework)
    expected = sum(1 for n in families.names() for p in families.get(n).tiny
                   if framework in families.get(n).frameworks_for(
                       families.get(n).spec(**{k: v for k, v in p.items() if k != "batch"})))
    assert len(rows) == expected * len(CONTRACT_DTYPES) and rows
    for r in rows:
        where = f"{framework} {r['spec']} {r['dtype']}"
        assert "error" not in r, f"{where}: {r.get('error')}"
        assert r["params"] == r["closed_form"], where
        losses = r["losses"]
        assert all(map(lambda x: x == x and abs(x) < 1e6, losses)), where
        assert min(losses[1:]) < losses[0], f"{where}: {losses}"
        if r["executed"]:
            assert 0.5 <= r["executed"] / r["analytic"] <= 2.0, f"{where}: {r['executed']} vs {r['analytic']}"


# -- store schema migration ---------------------------------------------------------------------

def test_schema1_store_loads_and_migrates(tmp_path):
    """A store written by paradnn before frameworks (schema 1, committed in tests/data) loads
    with ``device_platform`` for its old ``backend`` and ``framework`` jax; opening it for
    writing migrates it in place, and new rows sit beside the old ones."""
    golden = DATA / "store_schema1.db"
    raw = json.loads(__import__("sqlite3").connect(golden).execute("SELECT row FROM records").fetchone()[0])
    assert "backend" in raw and "framework" not in raw  # the golden file really is schema 1
    df = paradnn.load(golden)
    assert len(df) == 3 and set(df["status"]) == {"ok", "oom"}
    assert (df["device_platform"] == "cpu").all() and (df["framework"] == "jax").all()
    assert "backend" not in df.columns

    copy = tmp_path / "old.db"
    shutil.copy(golden, copy)
    from paradnn.store import STORE_SCHEMA_VERSION, Store

    with Store(copy) as db:
        version = db._con.execute("SELECT value FROM paradnn_meta WHERE name='schema_version'").fetchone()[0]
        assert int(version) == STORE_SCHEMA_VERSION
        stored = [json.loads(t) for (t,) in db._con.execute("SELECT row FROM records")]
        assert all("device_platform" in r and r["framework"] == "jax" and "backend" not in r for r in stored)
    assert paradnn.load(copy).equals(df)


def test_no_module_outside_backends_imports_a_framework_runtime_for_running():
    """The runner, maxbatch, measurement, sweeper and executors reach frameworks only through
    paradnn.backends: none of them imports jax, tensorflow or torch at module level."""
    pkg = Path(paradnn.__file__).parent
    for rel in ("runner.py", "experiments/maxbatch.py", "measure.py", *(f"sweeper/{p.name}" for p in (pkg / "sweeper").glob("*.py")),
                *(f"executors/{p.name}" for p in (pkg / "executors").glob("*.py"))):
        tree = ast.parse((pkg / rel).read_text())
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        names = [a.name for n in top if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in top if isinstance(n, ast.ImportFrom)]
        assert not [m for m in names if m.split(".")[0] in ("jax", "tensorflow", "torch", "flax")], rel
