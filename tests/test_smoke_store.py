"""The committed real CPU smoke store (tests/data/smoke_cpu.db, a real ``paradnn sweep
sweeps/smoke.yaml``) against its committed snapshot (tests/data/smoke_cpu.json): which report
sections it supports, why the others are refused and with which command, and the FC heat-map
table. An intended change refreshes the snapshot: ``python tests/data/smoke_snapshot.py``
(tests/data/smoke_snapshot.py says how to measure the store again)."""

from __future__ import annotations

import json

from data import smoke_snapshot
from paradnn.grids import resolve
from paradnn.store import load

REFRESH = "if the change is intended: python tests/data/smoke_snapshot.py, and commit the diff"


def test_the_committed_store_is_a_real_smoke_sweep():
    """Every config of sweeps/smoke.yaml, measured (ok, on a CPU, with timings), once."""
    df = load(smoke_snapshot.STORE)
    smoke = resolve("sweeps/smoke.yaml")
    assert sorted(df["workload_key"]) == sorted(w.key for w in smoke.workloads), (
        "sweeps/smoke.yaml changed: measure the store again (tests/data/smoke_snapshot.py)")
    assert (df["status"] == "ok").all() and set(df["device_platform"]) == {"cpu"}
    assert (df["examples_per_sec"] > 0).all() and (df["timed_calls"] >= 2).all()
    assert (df["steps_per_call"] == smoke.settings["steps_per_call"]).all()


def test_report_support_and_fc_heatmap_match_the_snapshot():
    expected = json.loads(smoke_snapshot.SNAPSHOT.read_text())
    got = smoke_snapshot.build()
    # Section by section first, so that a failure names what moved.
    assert got["store"] == expected["store"], REFRESH
    assert got["supported"] == expected["supported"], REFRESH
    assert [m["id"] for m in got["unsupported"]] == [m["id"] for m in expected["unsupported"]], REFRESH
    for have, want in zip(got["unsupported"], expected["unsupported"]):
        assert have == want, f"{want['id']}: {REFRESH}"
    assert got["heatmap_fc"] == expected["heatmap_fc"], REFRESH
    assert got == expected, REFRESH
    # The snapshot says something: the smoke store supports some sections, and the FC heat map
    # is refused for the reason the store shows (one hyperparameter varies).
    assert "params_range" in got["supported"] and "heatmap:fc" not in got["supported"]
    fc = next(m for m in got["unsupported"] if m["id"] == "heatmap:fc")
    assert "has ['nodes']" in fc["needs"]
    assert [c["nodes"] for c in got["heatmap_fc"]["cells"]] == [32, 64]


def test_snapshot_refresh_writes_what_the_test_compares(tmp_path):
    out = tmp_path / "snap.json"
    snap = smoke_snapshot.write(out)
    assert json.loads(out.read_text()) == snap == smoke_snapshot.build()
