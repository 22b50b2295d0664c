"""The committed real CPU smoke store (tests/data/smoke_cpu.db) and the snapshot of what the
report makes of it (tests/data/smoke_cpu.json), kept the way pytest-benchmark keeps its stored
runs: the store is a real measurement, committed once; the snapshot is derived from it and
compared by tests/test_smoke_store.py, so that a change to what the report supports, to why it
refuses an analysis, or to the numbers a heat map draws shows up as a failing test.

The store: ``paradnn sweep sweeps/smoke.yaml --store tests/data/smoke_cpu.db --no-cache`` on a
2-core CPU host (5 tiny configs, about 25 s; the rows carry the host, the software versions and
the paradnn revision that measured them).

When a change to the report or the analyses is intended, refresh the snapshot from the
committed store (no measurement) and commit the diff with the change:

    python tests/data/smoke_snapshot.py            # rewrites tests/data/smoke_cpu.json

To measure the store again (another host, a changed schema), delete it, run the sweep above,
refresh the snapshot, and commit both (``git add -f``: ``*.db`` is ignored).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STORE = HERE / "smoke_cpu.db"
SNAPSHOT = HERE / "smoke_cpu.json"
#: The label the report's recipes use for the store in their commands.
STORE_LABEL = "smoke.db"
#: Significant digits kept of each number: the snapshot is rebuilt from the same rows, so only a
#: change in the arithmetic (not noise) can move a number; 12 digits absorb summation order.
DIGITS = 12


def _plain(value: Any) -> Any:
    """JSON-ready: numpy scalars to Python, floats to DIGITS significant digits, NaN to None."""
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        value = value.item()
    if isinstance(value, float):
        return None if math.isnan(value) else float(f"{value:.{DIGITS}g}")
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def build(store: Path = STORE) -> dict[str, Any]:
    """The snapshot of ``store``: its rows per family and status, the report's sections (ids)
    and the analyses it cannot draw (id, title, what each needs, the command that supplies it,
    configs that command measures), and the FC heat-map table (examples/s over batch and nodes,
    the numbers ``paradnn.analysis.heatmap`` gives the FC heat map)."""
    from paradnn.analysis import heatmap
    from paradnn.report.sections import plan
    from paradnn.store import load

    df = load(store)
    sections, missing = plan(df, store=STORE_LABEL)
    fc = df[df["family"] == "fc"]
    hm = heatmap(fc, "batch", "nodes", "examples_per_sec")
    counts = df.groupby(["family", "status"]).size()
    return _plain({
        "store": {"rows": len(df),
                  "by_family_and_status": {f"{f}/{s}": int(n) for (f, s), n in counts.items()},
                  "device_platform": sorted(set(df["device_platform"]))},
        "supported": [s.id for s in sections],
        "unsupported": [{"id": m.id, "title": m.title, "needs": m.needs, "command": m.command,
                         "configs": m.configs} for m in missing],
        "heatmap_fc": {
            "x": hm.attrs["x"], "y": hm.attrs["y"], "value": hm.attrs["value"],
            "unit": hm.attrs["unit"], "fixed": hm.attrs["fixed"],
            "cells": hm[["batch", "nodes", "examples_per_sec", "status", "n", "unstable",
                         "warnings"]].to_dict("records"),
        },
    })


def write(path: Path = SNAPSHOT, store: Path = STORE) -> dict[str, Any]:
    """Rebuild the snapshot from ``store`` and write it to ``path`` (sorted keys, indented)."""
    snap = build(store)
    path.write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n")
    return snap


if __name__ == "__main__":
    out = write()
    print(f"{SNAPSHOT}: {len(out['supported'])} sections supported, "
          f"{len(out['unsupported'])} not; {len(out['heatmap_fc']['cells'])} FC heat-map cells",
          file=sys.stderr)
