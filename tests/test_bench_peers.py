"""benchmarks/bench_peers.py rehearsed on the CPU: every contender runs in a process of its own
(frameworks sharing one process slow each other), is driven round by round from the parent, and
the ratios come back. Their values are not checked: on a shared 2-core host they are noise."""

from __future__ import annotations

import json
import math
import shutil
import statistics
import subprocess
import sys

import pytest

from helpers import ROOT, child_env

SCRIPT = ROOT / "benchmarks" / "bench_peers.py"


@pytest.mark.slow
def test_contenders_run_in_their_own_processes(tmp_path):
    pytest.importorskip("torch", reason="needs the torch extra (pip install 'paradnn[torch]') for the torch-eager peer")
    out = tmp_path / "peers.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--only", "fc", "--rounds", "2", "--steps-per-call", "2",
                           "--contenders", "torch-eager,torch-compile-cl", "--twin", "torch-eager", "--json", str(out)],
                          capture_output=True, text=True, env=child_env(), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    (result,) = json.loads(out.read_text())
    eps = result["examples_per_sec"]
    assert sorted(eps) == ["paradnn", "torch-eager", "torch-eager-twin"]
    # A layout contender has nothing to measure on the FC: its child says so and is left out.
    assert "torch-compile-cl: skipped (a layout contender: the image config (cnn) only)" in done.stderr
    assert all(len(v) == 2 and all(math.isfinite(x) and x > 0 for x in v) for v in eps.values()), eps
    assert result["best_stack"] == "jax" and result["best_stack_vs_fastest_peer"] > 0
    assert "a process of its own" in done.stdout and "paradnn / fastest peer per round" in done.stdout
    # The twin is a reference, not a peer: the fastest peer per round is torch-eager's own rate,
    # and the twin's statistic is its rate over that.
    twin, peer = eps["torch-eager-twin"], eps["torch-eager"]
    assert result["twin"]["of"] == "torch-eager"
    assert result["twin"]["vs_fastest_peer"] == pytest.approx(statistics.median(t / p for t, p in zip(twin, peer)))
    assert "torch-eager-twin / fastest peer per round" in done.stdout


def test_an_unknown_contender_is_refused():
    done = subprocess.run([sys.executable, str(SCRIPT), "--only", "fc", "--contenders", "torch-eager,no-such"],
                          capture_output=True, text=True, env=child_env(), timeout=300)
    assert done.returncode == 2
    assert "--contenders: unknown contender 'no-such' (allowed: paradnn, paradnn-stock" in done.stderr


def test_a_twin_that_is_not_run_is_refused():
    done = subprocess.run([sys.executable, str(SCRIPT), "--only", "fc", "--contenders", "torch-eager",
                           "--twin", "torch-compile"], capture_output=True, text=True, env=child_env(), timeout=300)
    assert done.returncode == 2
    assert "--twin: 'torch-compile' is not one of the contenders run (allowed: paradnn, torch-eager)" in done.stderr


@pytest.mark.slow
def test_a_reference_checkout_runs_beside_this_one(tmp_path):
    """--reference: each paradnn contender runs again from another checkout's paradnn package
    (here a copy of this one's), reported as LABEL@ref and never counted as a peer."""
    checkout = tmp_path / "old-main"
    shutil.copytree(ROOT / "paradnn", checkout / "paradnn", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "peers.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--only", "fc", "--rounds", "2", "--steps-per-call", "2",
                           "--contenders", "paradnn", "--reference", str(checkout), "--json", str(out)],
                          capture_output=True, text=True, env=child_env(), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    (result,) = json.loads(out.read_text())
    eps = result["examples_per_sec"]
    assert sorted(eps) == ["paradnn", "paradnn@ref"]
    assert result["reference"] == str(checkout.resolve())
    assert result["vs_reference"]["paradnn"] == pytest.approx(
        statistics.median(a / b for a, b in zip(eps["paradnn"], eps["paradnn@ref"])))
    assert "vs_fastest_peer" not in result  # the reference is not a peer
    assert "paradnn / paradnn@ref per round" in done.stdout


def test_a_reference_that_is_not_a_checkout_is_refused(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--only", "fc", "--reference", str(tmp_path)],
                          capture_output=True, text=True, env=child_env(), timeout=300)
    assert done.returncode == 2
    assert f"--reference: {str(tmp_path)!r} is not a checkout of paradnn (no paradnn/__init__.py in it)" in done.stderr


@pytest.mark.slow
def test_a_reference_whose_package_hands_over_to_another_paradnn_stops_the_bench(tmp_path):
    """A checkout whose ``import paradnn`` ends in another paradnn (here: its package steps aside
    for the one installed) would compare this code with itself: the bench stops with exit 2 and
    names both folders, before any round."""
    checkout = tmp_path / "old-main"
    (checkout / "paradnn").mkdir(parents=True)
    (checkout / "paradnn" / "__init__.py").write_text(
        "import sys\n"
        f"sys.path[:] = [p for p in sys.path if p != {str(checkout)!r}]\n"
        "del sys.modules['paradnn']\n"
        "import paradnn\n")
    done = subprocess.run([sys.executable, str(SCRIPT), "--only", "fc", "--rounds", "2", "--steps-per-call", "2",
                           "--contenders", "paradnn", "--reference", str(checkout)],
                          capture_output=True, text=True, env=child_env(), timeout=600)
    assert done.returncode == 2, done.stdout + done.stderr[-4000:]
    assert (f"--reference: paradnn@ref imported paradnn from {(ROOT / 'paradnn').resolve()}, "
            f"not from {checkout.resolve()}") in done.stderr
    assert "per round" not in done.stdout and "Traceback" not in done.stderr
