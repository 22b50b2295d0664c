"""benchmarks/bench_init_rng.py (docs/performance.md: why init keeps JAX's default generator):
each generator runs in its own fresh process, really makes that kind of key, and times
paradnn's init of every JAX config of the file."""

from __future__ import annotations

import json
import sys

import pytest

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_init_rng  # noqa: E402

SWEEP = """\
parts:
  - family: fc
    fixed: {layers: 1, input: 8, output: 4, batch: 2}
    axes: {nodes: [8, 16]}
"""


@pytest.mark.slow
def test_both_generators_time_every_config(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(SWEEP)
    out = tmp_path / "r.json"
    assert bench_init_rng.main([str(f), "--rounds", "1", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["configs"] == 2
    totals = result["init_total_s"]
    assert set(totals) == {"threefry2x32", "unsafe_rbg"} and all(len(v) == 1 and v[0] > 0 for v in totals.values())
    assert result["median_ratio"] == pytest.approx(totals["unsafe_rbg"][0] / totals["threefry2x32"][0])


def test_child_makes_the_asked_generators_keys(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(SWEEP)
    out = bench_init_rng.run_child(str(f), "unsafe_rbg")  # raises if the keys were threefry's
    assert out["generator"] == "unsafe_rbg" and len(out["init_s"]) == 2
