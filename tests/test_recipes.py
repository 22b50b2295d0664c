"""Every recipe the report prints for the committed smoke store (tests/data/smoke_cpu.db) runs as
printed (issue 25): each command parses with paradnn's own command line, a sweep file it names is
the one the report gives beside it (or a file of the repository, or a placeholder the text asks
the user to fill in, spelled YOUR_...), and that file expands to the number of configs the recipe
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


def _recipes():
    _, missing = plan(load(smoke_snapshot.STORE), store=STORE)
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


def test_every_recipe_command_parses_and_its_sweep_file_has_the_stated_configs(tmp_path):
    recipes = _recipes()
    assert len(recipes) >= 10  # the smoke store misses most analyses: there is something to check
    checked_files = 0
    for m in recipes:
        written = None
        if m.sweep_file:
            words = [w for cmd in _commands(m.command) for w in cmd]
            names = [w for w in words if w.endswith((".yaml", ".yml"))]
            assert names, f"{m.id}: the recipe gives a sweep file but its command names none"
            written = tmp_path / names[0]
            written.write_text(m.sweep_file)
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
            path = (tmp_path / name) if written is not None and Path(name).name == written.name else ROOT / name
            assert path.exists(), f"{m.id}: {name} is neither given by the recipe nor in the repository"
            configs = len(resolve(path).workloads)
            # A sweep recipe measures what the store lacks: at most the file's configs.
            assert 0 < m.configs <= configs, (m.id, m.configs, configs)
            checked_files += 1
    assert checked_files >= 8


@pytest.mark.slow
def test_the_saturation_recipe_run_as_printed_supplies_its_analysis(tmp_path):
    """The smallest sweep recipe, written and run exactly as the report prints it, in a folder
    holding a copy of the store under the name the recipe uses."""
    m = next(m for m in _recipes() if m.id == "saturation")
    shutil.copy(smoke_snapshot.STORE, tmp_path / STORE)
    [words] = _commands(m.command)
    (tmp_path / words[2]).write_text(m.sweep_file)
    before = len(load(tmp_path / STORE))
    done = subprocess.run([sys.executable, "-m", *words], cwd=tmp_path, env=child_env(),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    df = load(tmp_path / STORE)
    assert len(df) == before + m.configs
    sections, missing = plan(df, store=STORE)
    assert "saturation" not in {u.id for u in missing}
