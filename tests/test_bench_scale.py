"""benchmarks/bench_scale.py at tiny sizes (seconds): the synthetic stores it builds, every
command and call it was asked to time with its wall and CPU time, the growth exponent of each,
and a command that fails shown as failed rather than timed."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import subprocess
import sys

import pytest

from helpers import ROOT, child_env

SCRIPT = ROOT / "benchmarks" / "bench_scale.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_scale", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_exponent_is_the_log_ratio_of_times_over_rows():
    b = _bench()
    assert b.exponent([1000, 4000], [2.0, 8.0]) == pytest.approx(1.0)
    assert b.exponent([1000, 10000, 40000], [1.0, 5.0, 1600.0]) == pytest.approx(2.0)  # ends only
    assert b.exponent([1000, 4000], [None, 3.0]) is None  # a failed run has no growth
    assert b.exponent([1000], [1.0]) is None


def test_synthetic_stores_hold_the_rows_asked_for(tmp_path):
    b = _bench()
    template = b.template_row()
    rows = b.synthetic_rows(template, 12, seed=1)
    assert len(rows) == 12
    configs = {r["workload_key"] for r in rows}
    assert len(configs) == 6  # each config measured twice
    # A smaller store is the start of a bigger one (the same configs first).
    bigger = b.synthetic_rows(template, 40, seed=1)
    assert [r["workload_key"] for r in bigger[:12]] == [r["workload_key"] for r in rows]
    b.write_store(tmp_path / "s.db", rows)
    from paradnn.store import load

    assert len(load(tmp_path / "s.db")) == 12


def test_bench_scale_times_each_command_and_call_with_a_growth_exponent(tmp_path):
    out = tmp_path / "r.json"
    # 8 rows: 4 configs over two dtypes, too few for a held-out score (it needs 8 a group), so
    # `predict --score` fails there and must be shown failed, not timed.
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--sizes", "8,40", "--only",
         "status,predict --score,load,heatmap", "--json", str(out)],
        capture_output=True, text=True, env=child_env(), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["store_rows"] == [8, 40]
    assert set(res["commands"]) == {"status", "predict --score"}
    assert set(res["calls"]) == {"load", "heatmap"}
    for kind, name in [("commands", "status"), ("calls", "load"), ("calls", "heatmap")]:
        got = res[kind][name]
        assert len(got["runs"]) == 2
        walls = [r["seconds"] for r in got["runs"]]
        cpus = [r["cpu_seconds"] for r in got["runs"]]
        assert all(w > 0 for w in walls) and all(c >= 0 for c in cpus), (name, got)
        assert got["exponent"] == pytest.approx(math.log(walls[1] / walls[0]) / math.log(5))
    score = res["commands"]["predict --score"]
    assert score["runs"][0]["seconds"] is None and score["runs"][0]["rc"] == 2
    assert score["runs"][1]["seconds"] > 0 and score["exponent"] is None
    # The printed table: a header with the exponent column, one line per command and call.
    text = done.stdout
    assert re.search(r"\| what \| 8 rows: wall / CPU s \| 40 rows: wall / CPU s \| growth "
                     r"exponent 8 -> 40: wall / CPU \|", text)
    line = next(ln for ln in text.splitlines() if ln.startswith("| `paradnn status`"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert len(cells) == 4 and re.fullmatch(r"-?\d+\.\d\d / -?\d+\.\d\d", cells[3])
    failed = next(ln for ln in text.splitlines() if ln.startswith("| `paradnn predict --score`"))
    assert failed.split("|")[2].strip().startswith("failed (exit 2): ")
    assert failed.rstrip().endswith("| - / - |") and failed.count("|") == 5
    assert "| heatmap (call) |" in text and "load average (1 min)" in text
