"""benchmarks/bench_gpu_peers.py rehearsed at tiny sizes on the CPU: every pair runs both sides
and reports a ratio. The ratio's value is not checked: on a CPU (and a shared host) it is noise;
the >= 0.97 target is for a GPU."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from helpers import ROOT, child_env

SCRIPT = ROOT / "benchmarks" / "bench_gpu_peers.py"


@pytest.mark.slow
def test_tiny_rehearsal_runs_every_pair(tmp_path):
    pytest.importorskip("torch", reason="needs the torch extra (pip install 'paradnn[torch]') for the torch pair")
    out = tmp_path / "peers.json"
    # torch eager: Inductor's C++ compile of even a tiny model takes tens of seconds on a 2-core
    # host; the GPU default (torch.compile) differs from it only in one wrapper call.
    done = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--models", "fc1024", "--frameworks", "jax,torch",
                           "--torch-compile", "eager", "--json", str(out)],
                          capture_output=True, text=True, env=child_env(), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    rows = json.loads(out.read_text())["pairs"]
    assert [(r["model"], r["framework"]) for r in rows] == [("fc1024", "jax"), ("fc1024", "torch")]
    for r in rows:
        assert r["status"] == "ok" and r["paradnn_status"] == "ok", r
        assert r["batch"] == 16 and r["dtype"] == "float32" and r["optimizer"] == "rmsprop"
        rates = [r["paradnn_examples_per_sec"], r["plain_examples_per_sec"], *r["plain_examples_per_sec_before_after"]]
        assert all(math.isfinite(x) and x > 0 for x in rates), r
        assert math.isfinite(r["ratio"]) and r["ratio"] > 0 and isinstance(r["pass"], bool)
        assert r["device_kind"] and r["policy"].startswith("both sides:")
    assert rows[0]["jax_version"] and rows[1]["torch_version"]
    assert "fc1024" in done.stdout and "ratio" in done.stdout  # the table
