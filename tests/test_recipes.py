"""Every recipe the report prints for the committed smoke store (tests/data/smoke_cpu.db) runs as
printed (issue 25): each command parses with paradnn's own command line, a sweep file it names
exists where it names it (the report writes it into its recipes folder; or a file of the
repository; or a placeholder the text asks the user to fill in, spelled YOUR_...), carries the
settings the store's own timings call for, and expands to the number of configs the recipe
states. One recipe is run for real, exactly as printed, into a copy of the store: afterwards the
report supports the analysis it was missing.

The other sweep recipes are not run here: they measure 5-12 configs each (minutes on CI's two
cores, and the TensorFlow one needs that extra); their files are expanded instead."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from data import smoke_snapshot
from helpers import child_env
from paradnn.cli import build_parser
from paradnn.grids import resolve
from paradnn.report.sections import plan
from paradnn.store import load

ROOT = Path(__file__).resolve().parents[1]
STORE = smoke_snapshot.STORE_LABEL


def _recipes(folder: Path) -> list:
    """The recipes of the smoke store's report, written as ``paradnn report`` writes them: their
    sweep files in ``folder/recipes``, their commands naming them there."""
    from paradnn.report.html import RECIPES_DIR, write_recipes

    _, missing = plan(load(smoke_snapshot.STORE), store=STORE, folder=str(folder / RECIPES_DIR))
    write_recipes(missing, folder / RECIPES_DIR)
    return [m for m in missing if m.command]


def _commands(text: str) -> list[list[str]]:
    """The paradnn command lines of a recipe: one per line or per ``&&``, comments dropped."""
    out = []
    for line in text.splitlines():
        for part in line.split("&&"):
            words = shlex.split(part, comments=True)
            if words:
                out.append(words)
    return out


def _sweep_file(args) -> str | None:
    return getattr(args, "file", None) or getattr(args, "sweep", None)


def test_every_recipe_command_parses_and_its_sweep_file_exists_with_the_stated_configs(tmp_path):
    """Every command parses; every sweep file it names exists (written by the report under its
    recipes folder, or a file of the repository, or a YOUR_... placeholder); the file expands to
    at least the configs the recipe states; and a file that measures new runs carries the timing
    settings the store's own timings call for (precise_settings), one that measures a
    comparison's other side the store's own settings."""
    from paradnn.report.recipes import precise_settings

    rows = load(smoke_snapshot.STORE)
    ok = rows[rows["status"] == "ok"]
    recipes = _recipes(tmp_path)
    assert len(recipes) >= 10  # the smoke store misses most analyses: there is something to check
    checked_files = 0
    for m in recipes:
        for words in _commands(m.command):
            assert words[0] == "paradnn", f"{m.id}: {words}"
            try:
                args = build_parser().parse_args(words[1:])
            except SystemExit as exc:  # argparse's usage error: the recipe does not run
                pytest.fail(f"{m.id}: `{shlex.join(words)}` does not parse (exit {exc.code})")
            name = _sweep_file(args) if words[1] in ("sweep", "plan", "predict") else None
            if name is None:
                continue
            if Path(name).name.startswith("YOUR_"):
                continue  # a placeholder the recipe's text asks the user to fill in
            path = Path(name) if Path(name).is_absolute() else ROOT / name
            assert path.exists(), f"{m.id}: {name} is neither written by the report nor in the repository"
            plan_ = resolve(path)
            # A sweep recipe measures what the store lacks: at most the file's configs.
            assert 0 < m.configs <= len(plan_.workloads), (m.id, m.configs, len(plan_.workloads))
            if m.sweep_file:
                assert path.read_text() == m.sweep_file and path.parent.name == "recipes", m.id
                if m.id.startswith(("heatmap:", "sensitivity:", "saturation")):
                    family = m.id.split(":", 1)[1] if ":" in m.id else None
                    mine = ok[ok["family"] == family] if family and (ok["family"] == family).any() else ok
                    assert plan_.settings == precise_settings(mine)[0], m.id
                    assert "the store's own timings" in m.change, m.id
            checked_files += 1
    assert checked_files >= 8


def test_precise_settings_follow_the_stores_own_timings():
    """A store whose calls spread 10% needs about 150 calls for the median's +-2%: a recipe
    asks for a longer budget (and says why); one whose calls spread 0.5% meets the target at
    the fewest calls: the defaults, nothing stated."""
    import numpy as np
    import pandas as pd

    from paradnn.report.recipes import RECIPE_BUDGETS_S, precise_settings

    rng = np.random.default_rng(1)

    def rows(spread: float) -> pd.DataFrame:
        # Calls of 0.2 s (K = 20 steps of 10 ms): the default call length, no scaling.
        return pd.DataFrame([{"status": "ok", "steps_per_call_used": 20,
                              "step_times_s": list(0.01 * (1 + spread * rng.standard_normal(40)))}
                             for _ in range(10)])

    noisy, why = precise_settings(rows(0.10))
    assert noisy["time_budget_s"] in RECIPE_BUDGETS_S and noisy["time_budget_s"] >= 30, (noisy, why)
    assert "spread is 10%" in why or "spread is 9." in why or "spread is 1e+01%" in why, why
    quiet, why = precise_settings(rows(0.005))
    assert quiet == {}, why
    assert precise_settings(pd.DataFrame([{"status": "ok"}]))[0] == {}


@pytest.mark.slow
def test_the_saturation_recipe_run_as_printed_supplies_its_analysis(tmp_path):
    """The smallest sweep recipe, written by the report and run exactly as it prints it, in a
    folder holding a copy of the store under the name the recipe uses."""
    m = next(m for m in _recipes(tmp_path) if m.id == "saturation")
    shutil.copy(smoke_snapshot.STORE, tmp_path / STORE)
    [words] = _commands(m.command)
    assert Path(words[2]).exists()  # the report wrote it where the command names it
    before = len(load(tmp_path / STORE))
    done = subprocess.run([sys.executable, "-m", *words], cwd=tmp_path, env=child_env(),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    df = load(tmp_path / STORE)
    assert len(df) == before + m.configs
    sections, missing = plan(df, store=STORE)
    assert "saturation" not in {u.id for u in missing}
