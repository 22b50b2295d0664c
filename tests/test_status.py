"""``paradnn status``: failures grouped by reason with an example and a next command that works;
the sweep's final line on resume. Real stores written by real (in-process) sweeps."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import TINY
from paradnn.grids import grid
from paradnn.status import FAILURE_COLUMNS, failures, reason
from paradnn.sweeper import sweep

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "paradnn", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=600)


@pytest.fixture(scope="module")
def failed_store(tmp_path_factory) -> Path:
    """Two oom rows (weights alone exceed 1 kB) and one error row (2 devices on a 1-device
    host: the runner's SpecError, as paradnn before issue 34 recorded it; a sweep now refuses
    such a config before measuring, but stores written then still hold the row). Nothing is
    compiled."""
    from paradnn.record import Record
    from paradnn.runner import context
    from paradnn.store import Store

    db = tmp_path_factory.mktemp("status") / "r.db"
    oom = grid("fc", layers=2, nodes=[32, 64], input=64, output=10, batch=8)
    sweep(oom, store=db, executor="inprocess", settings=TINY, memory_limit_bytes="1kB",
          cache_dir=None, progress=False)
    [bad] = grid("fc", layers=2, nodes=32, input=64, output=10, batch=8, devices=2)
    platform, software = context("jax")
    with Store(db) as store:
        store.add(Record.failed(bad, "error", "SpecError: invalid devices=2: allowed at most 1 on this host",
                                platform=platform, software=software, settings=TINY.to_dict("jax")))
    return db


def test_failures_grouped_by_reason(failed_store):
    table = failures(failed_store)
    assert list(table.columns) == list(FAILURE_COLUMNS)
    assert list(zip(table["reason"], table["count"])) == [
        ("oom: predicted before running", 2), ("error: SpecError", 1)]
    oom, err = table.iloc[0], table.iloc[1]
    assert oom["example"] == "fc layers=2 nodes=32 input=64 output=10 batch=8 float32"
    assert oom["next_command"] == ("paradnn maxbatch fc --layers 2 --nodes 32 --input 64 "
                                   "--output 10 --dtype float32 --optimizer rmsprop "
                                   "--memory-limit SIZE")
    assert err["next_command"] == ("paradnn run fc --layers 2 --nodes 32 --input 64 --output 10 "
                                   "--batch 8 --dtype float32 --optimizer rmsprop --devices 2")
    assert "devices" in err["error"] and err["family"] == "fc" and len(err["example_key"]) == 16


def test_next_commands_run_as_given(failed_store):
    """The suggested commands parse and say the same thing again (nothing is compiled: the
    oom command's limit is below the weights of batch 1, the error is a SpecError)."""
    table = failures(failed_store)
    oom_cmd = table.iloc[0]["next_command"].replace("SIZE", "1kB").split()[1:]
    r = _cli(*oom_cmd)
    assert r.returncode == 1, r.stderr  # maxbatch: even the smallest batch does not fit
    assert "largest batch  none" in r.stdout
    r = _cli(*table.iloc[1]["next_command"].split()[1:])
    assert r.returncode == 2 and "devices" in r.stderr and "Traceback" not in r.stderr


def test_status_cli_prints_groups_and_next_steps(failed_store):
    r = _cli("status", str(failed_store))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "3 rows" in out and "ok 0, failed 3" in out
    assert "1. oom: predicted before running: 2 row(s) (fc)" in out
    assert "2. error: SpecError: 1 row(s) (fc)" in out
    assert "next     paradnn run fc --layers 2" in out
    assert "--repeat N" in out
    assert "Empty DataFrame" not in out and "NaN" not in out


def test_reason_reads_the_prefix_not_the_message():
    assert reason("oom", "XlaRuntimeError: RESOURCE_EXHAUSTED: out of memory") == "oom: XlaRuntimeError"
    assert reason("error", "non-finite loss nan") == "error"
    assert reason("timeout", "exceeded the time limit of 6 s (compile and measurement)") == "timeout"
    assert reason("crashed", "the child process running this config died: SIGKILL") == "crashed"
    assert reason("error", None) == "error"


def test_no_failures_is_an_empty_table_and_a_short_message(tmp_path):
    assert failures(pd_empty()).empty
    r = _cli("status", str(tmp_path / "missing.db"))
    assert r.returncode == 2 and "no such paradnn store" in r.stderr


def pd_empty():
    import pandas as pd

    from paradnn.store import COLUMNS

    return pd.DataFrame(columns=list(COLUMNS))


def test_sweep_final_line_is_honest_on_resume(tmp_path):
    sweep_file = tmp_path / "s.yaml"
    # Weights alone above a 1 kB limit: two oom rows, nothing compiled.
    sweep_file.write_text("family: fc\nfixed: {layers: 2, input: 64, output: 10, batch: 8}\n"
                          "nodes: [32, 64]\nrun: {executor: inprocess, memory_limit: 1kB}\n")
    db = tmp_path / "r.db"
    first = _cli("sweep", str(sweep_file), "--store", str(db), "--no-cache")
    assert first.returncode == 0, first.stderr
    assert "2 measured now (oom 2), 0 already in the store" in first.stdout
    assert "`paradnn status` groups the failures" in first.stdout
    # The progress line started at once and named the config it was running.
    assert first.stderr.splitlines()[0].startswith("paradnn sweep: 2 config(s) in ")
    assert "running fc layers=2 nodes=32 input=64 output=10 batch=8 float32" in first.stderr
    again = _cli("sweep", str(sweep_file), "--store", str(db), "--no-cache")
    assert again.returncode == 0, again.stderr
    assert "0 measured now (none), 2 already in the store; 2 rows for this sweep (oom 2)" in again.stdout
    assert "0 config(s) to measure, 2 already in the store" in again.stderr


@pytest.mark.slow
def test_status_counts_unstable_rows_and_its_remeasure_command_runs_as_printed(tmp_path):
    """Two tiny FC runs that cannot meet a 1e-6 precision target are unstable: status counts
    them, writes (--recipes) a sweep file listing exactly their configs with the settings the
    store's own timings call for, and prints the command with --remeasure-unstable; run as
    printed, it measures both again, and each new run replaces its unstable one: one row per
    config (paradnn.load), both attempts kept (attempts=True)."""
    import yaml

    from paradnn.report.recipes import precise_settings
    from paradnn.store import load

    db = tmp_path / "r.db"
    unstable = TINY.replace(ci_target=1e-6)  # no tiny run meets it
    sweep(grid("fc", layers=2, nodes=[16, 32], input=12, output=5, batch=4), store=db,
          executor="inprocess", settings=unstable, cache_dir=None, progress=False)
    folder = tmp_path / "recipes"
    r = _cli("status", str(db), "--recipes", str(folder))
    assert r.returncode == 0, r.stderr
    assert "unstable: 2 of 2 ok rows missed their precision target (stable false; fc 2)" in r.stdout
    path = folder / "remeasure-unstable.yaml"
    assert f"file     written to {path} (2 configs)" in r.stdout
    spec = yaml.safe_load(path.read_text())
    before = load(db)
    assert spec.get("settings", {}) == precise_settings(before)[0]  # what the store's timings call for
    assert sorted(p["fixed"]["nodes"] for p in spec["parts"]) == [16, 32]
    command = next(line for line in r.stdout.splitlines() if line.lstrip().startswith("next ")).split("next", 1)[1].strip()
    assert command == f"paradnn sweep {path} --store {db} --remeasure-unstable"
    again = subprocess.run([sys.executable, "-m", "paradnn", *command.split()[1:], "--no-cache"],
                           capture_output=True, text=True, cwd=tmp_path,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "2 measured now" in again.stdout
    rows = load(db)
    assert len(rows) == 2 and not set(rows["time_utc"]) & set(before["time_utc"])  # the new runs
    assert sorted(rows["retry_of"].map(lambda v: v.rsplit("@", 1)[-1])) == sorted(before["time_utc"])
    assert len(load(db, attempts=True)) == 4
