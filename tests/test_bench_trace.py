"""benchmarks/bench_trace.py (docs/performance.md, "One trace"): both sides trace and lower in
fresh processes, each model gets the step loop the rule gives, and the ratio is this side's median
over the reference's."""

from __future__ import annotations

import json
import sys

import jax
import pytest

from helpers import ROOT
from paradnn.backends.steploop import auto_step_loop

sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_trace  # noqa: E402


def test_bench_trace_times_both_checkouts_per_model(capsys):
    # This checkout against itself: two fresh processes per round, two models, one round.
    bench_trace.main(["--reference", str(ROOT), "--rounds", "1", "--only", "fc,cnn_residual"])
    out = json.loads(capsys.readouterr().out)
    backend = jax.default_backend()
    for side in ("this", "reference"):
        assert out["loop"][side] == {"fc": auto_step_loop(backend), "cnn_residual": auto_step_loop(backend, True)}
        for model, seconds in out["trace_s"][side].items():
            assert len(seconds) == 1 and seconds[0] > 0, (side, model)
            assert out["median_s"][side][model] == round(seconds[0], 3)
    for model in ("fc", "cnn_residual"):
        ratio = out["trace_s"]["this"][model][0] / out["trace_s"]["reference"][model][0]
        # (the seconds printed are rounded to the millisecond; the ratio is of the exact medians)
        assert out["this_over_reference"][model] == pytest.approx(ratio, rel=0.02), model
