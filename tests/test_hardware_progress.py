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


def test_the_bar_is_one_plain_line_per_update_off_a_terminal_and_tqdm_on_one():
    """The one progress display (tqdm): on a stream that is no terminal (a log, CI, a pipe)
    every update is one whole line and no carriage return is written; on a terminal tqdm redraws
    the line in place, and a note is a line of its own with the bar drawn again below it."""
    log = io.StringIO()
    bar = progress.Bar(log)
    for done in range(4):
        bar.show(done, 3, f"ok {done} | ETA ?")
    bar.note("paradnn sweep: a heartbeat")
    bar.close()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and len(lines) == 5, log.getvalue()
    assert lines[0] == "[....................] 0/3 | ok 0 | ETA ?"
    assert lines[2].startswith("[#############.......] 2/3 | ok 2")
    assert lines[3].startswith("[####################] 3/3 |") and lines[4] == "paradnn sweep: a heartbeat"
    assert progress.render(0, 0, "nothing to do") == "[####################] 0/0 | nothing to do"

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    term = Tty()
    bar = progress.Bar(term)
    bar.show(1, 2, "ok 1 | running fc")
    bar.note("paradnn sweep: a heartbeat")
    bar.show(2, 2, "ok 2")
    bar.close()
    text = term.getvalue()
    assert text.count("\n") == 2 and text.endswith("[####################] 2/2 | ok 2\n"), repr(text)
    assert "\r[##########..........] 1/2 | ok 1 | running fc" in text
    assert "\rparadnn sweep: a heartbeat\n\r[##########..........] 1/2" in text, repr(text)
