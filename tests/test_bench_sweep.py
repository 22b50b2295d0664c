"""benchmarks/plain_sweep.py, the floor side of ``bench_sweep.py --plain``: it compiles and runs
every config of a sweep file with the file's step counts, fills JAX's persistent cache when
given one, and refuses what would make it run other programs than paradnn's (another framework,
non-default JAX options)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from helpers import ROOT, child_env

SCRIPT = ROOT / "benchmarks" / "plain_sweep.py"

SWEEP = """\
parts:
  - family: fc
    fixed: {layers: 1, input: 8, output: 4, batch: 2}
    axes: {nodes: [8, 16]}
settings: {steps_per_call: 3, warmup_calls: 1, min_calls: 6}
"""


@pytest.mark.slow
def test_plain_sweep_runs_the_files_configs_and_steps(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(SWEEP)
    cache = tmp_path / "cache"
    done = subprocess.run([sys.executable, str(SCRIPT), str(f), "--cache", str(cache)],
                          capture_output=True, text=True, env=child_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["configs"] == 2 and out["steps"] == 2 * (1 + 6) * 3  # warm-up + min_calls, K = 3
    # Each config trained: a finite loss, from the last step of its own loop.
    assert len(out["final_losses"]) == 2 and all(math.isfinite(x) and x > 0 for x in out["final_losses"])
    assert any(cache.iterdir())  # JAX's persistent cache was written: the warm run reads it

    for change, says in (("fixed: {framework: torch, ", "single-device JAX configs only"),
                         ("fixed: {devices: 2, ", "single-device JAX configs only")):
        f.write_text(SWEEP.replace("fixed: {", change))
        bad = subprocess.run([sys.executable, str(SCRIPT), str(f)], capture_output=True, text=True,
                             env=child_env(), timeout=300)
        assert bad.returncode != 0 and says in bad.stderr, bad.stderr[-2000:]
    f.write_text(SWEEP.replace("min_calls: 6}", "min_calls: 6, matmul_precision: highest}"))
    bad = subprocess.run([sys.executable, str(SCRIPT), str(f)], capture_output=True, text=True,
                         env=child_env(), timeout=300)
    assert bad.returncode != 0 and "default options only" in bad.stderr, bad.stderr[-2000:]
