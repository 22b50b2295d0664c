"""No silent minute: the probe says when it measures, ``paradnn run`` says what it measures
before the framework starts, and a heartbeat names the phase every few seconds."""

from __future__ import annotations

import io
import subprocess
import time

import pytest

from paradnn import progress


def test_heartbeat_names_the_phase_in_force():
    out = io.StringIO()
    with progress.heartbeat("run", every_s=0.05, stream=out):
        progress.phase("compiling")
        time.sleep(0.2)
        progress.phase("timing")
        time.sleep(0.2)
    lines = out.getvalue().splitlines()
    assert lines and all(line.startswith("paradnn: run: ") and "so far" in line for line in lines)
    assert any("compiling for" in line for line in lines) and "timing for" in lines[-1]
    # Nothing after the block ends.
    time.sleep(0.15)
    assert out.getvalue().splitlines() == lines


def test_a_short_block_prints_nothing():
    out = io.StringIO()
    with progress.heartbeat("run", every_s=5.0, stream=out):
        pass
    assert out.getvalue() == ""


@pytest.mark.slow
def test_run_says_what_it_measures_before_the_framework_starts(paradnn_cmd):
    proc = subprocess.Popen(paradnn_cmd + ["run", "fc", "--layers", "2", "--nodes", "16", "--input", "12",
                                           "--output", "5", "--batch", "4", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stderr.readline()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert first.startswith("paradnn: measuring fc (layers=2, nodes=16, input=12, output=5), batch 4")
    assert out.strip().startswith("{")  # stdout stays the record alone
