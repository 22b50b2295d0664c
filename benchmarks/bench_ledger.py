"""What the time ledger costs a sweep (issue 36): the same sweep with the ledger off and on.

    PYTHONPATH=. python benchmarks/bench_ledger.py --rounds 3

Each round runs, as fresh ``python -m paradnn sweep FILE`` processes (what a user runs), the
sweep file with ``ledger: false`` and with ``ledger: true``, each into a new store, in an order
that alternates between rounds so that the host's load drift hits both sides alike. Both sides
share one probe cache (``PARADNN_CACHE``), probed before the first round, and one JAX
compilation cache folder warmed by an untimed sweep first, so that neither side pays a probe or
a compile the other does not. Automatic retries of unstable configs are off.

The file (written to a temporary folder): 8 FC configs (layers 1 and 2, nodes 64 and 256,
batch 16 and 128) and 4 CNN configs, ``time_budget_s: 0.5``.

Printed: one JSON object with every run's wall time (s), the medians, ``on_over_off`` (target:
at most 1.25), the ledger's own phase summed over the records of the median "on" run
(``phase_ledger_s``), and that no "off" record has a ledger phase above 0 (off costs nothing:
no profile, no state kept).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SWEEP = """description: time-ledger overhead benchmark (benchmarks/bench_ledger.py)
parts:
  - family: fc
    fixed: {{input: 256, output: 10}}
    axes: {{layers: [1, 2], nodes: [64, 256], batch: [16, 128]}}
  - family: cnn
    fixed: {{block: residual, blocks: 1, image: 32, output: 10}}
    axes: {{filters: [4, 8], batch: [4, 16]}}
settings: {{time_budget_s: 0.5, ledger: {ledger}}}
"""


def sweep(file: Path, store: Path, env: dict[str, str]) -> float:
    """Wall time (s) of one ``paradnn sweep`` process of ``file`` into ``store``."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "paradnn", "sweep", str(file), "--store", str(store),
                    "--executor", "inprocess", "--retry-unstable-s", "0"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - start


def phases(store: Path) -> dict[str, float]:
    """Summed ``phase_ledger_s`` and ``phase_total_s`` (s) of a store's records, and how many
    records have a ledger phase."""
    sys.path.insert(0, str(ROOT))
    import paradnn

    rows = paradnn.load(store)
    ledger = rows["phase_ledger_s"].dropna() if "phase_ledger_s" in rows.columns else rows.iloc[0:0]
    ledger = ledger[ledger > 0]
    return {"phase_ledger_s": float(ledger.sum()), "phase_total_s": float(rows["phase_total_s"].sum()),
            "records_with_a_ledger_phase": int(len(ledger)), "records": int(len(rows))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", default=None, help="also write the result here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ledger-") as tmp:
        tmp = Path(tmp)
        files = {}
        for side in ("off", "on"):
            files[side] = tmp / f"{side}.yaml"
            files[side].write_text(SWEEP.format(ledger="true" if side == "on" else "false"))
        env = dict(os.environ, PYTHONPATH=str(ROOT), PARADNN_CACHE=str(tmp / "cache"),
                   JAX_COMPILATION_CACHE_DIR=str(tmp / "xla"), PARADNN_RETRY_UNSTABLE_S="0")
        # Untimed: the probe and every program compiled once into the shared caches.
        sweep(files["on"], tmp / "warm.db", env)
        walls: dict[str, list[float]] = {"off": [], "on": []}
        stores: dict[str, list[Path]] = {"off": [], "on": []}
        for r in range(args.rounds):
            for side in (("off", "on") if r % 2 == 0 else ("on", "off")):
                store = tmp / f"{side}{r}.db"
                walls[side].append(sweep(files[side], store, env))
                stores[side].append(store)
        med = {s: statistics.median(v) for s, v in walls.items()}
        median_on = stores["on"][walls["on"].index(sorted(walls["on"])[len(walls["on"]) // 2])]
        out = {"rounds": args.rounds, "wall_s": walls, "median_s": med, "on_over_off": med["on"] / med["off"],
               "on_phases": phases(median_on), "off_phases": phases(stores["off"][0])}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
