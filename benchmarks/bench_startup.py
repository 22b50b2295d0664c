"""Command start-up (issue 25): seconds to the first stderr line and total wall time of a tiny
`paradnn run`, and the wall times of `paradnn --help` and `paradnn list models`, for two checkouts
interleaved round by round (so the host's load hits both alike).

    python benchmarks/bench_startup.py --reference ../main-checkout [--rounds 5]

Each command runs in a fresh interpreter with the checkout first on PYTHONPATH and as the working
directory. The tiny run uses the default settings (5 s time budget); the peak on record and the
compilation cache are the user's, shared by both sides (run each side once before, so both are
warm). Not a test: copy the printed table into docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TINY_RUN = ["run", "fc", "--layers", "2", "--nodes", "32", "--input", "64", "--output", "10",
            "--batch", "8"]
HELP = ["--help"]
LIST_MODELS = ["list", "models"]


def timed(checkout: Path, args: list[str]) -> tuple[float, float]:
    """(seconds to the first stderr line or nan, total wall seconds) of `python -m paradnn args`
    run from ``checkout``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "paradnn", *args], cwd=checkout, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = float("nan")
    for line in proc.stderr:  # stdout is small (a summary, the usage): no pipe fills up
        if line.strip() and first != first:
            first = time.perf_counter() - t0
    proc.stdout.read()
    if proc.wait() != 0:
        raise SystemExit(f"{checkout}: paradnn {' '.join(args)} exited {proc.returncode}")
    return first, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True, help="checkout to compare with")
    parser.add_argument("--new", type=Path, default=Path(__file__).resolve().parents[1],
                        help="checkout measured against it (default: this one)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sides = {"reference": args.reference.resolve(), "new": args.new.resolve()}
    results: dict[tuple[str, str], list[float]] = {}
    for side in sides.values():  # warm-up: compilation cache and probe record on both sides
        timed(side, TINY_RUN)
    for r in range(args.rounds):
        order = list(sides.items()) if r % 2 == 0 else list(reversed(sides.items()))
        for name, path in order:
            first, total = timed(path, TINY_RUN)
            _, help_s = timed(path, HELP)
            _, list_s = timed(path, LIST_MODELS)
            for metric, value in (("run first line", first), ("run total", total), ("--help", help_s),
                                  ("list models", list_s)):
                results.setdefault((name, metric), []).append(value)
            print(f"round {r + 1} {name}: first line {first:.2f} s, run {total:.2f} s, "
                  f"--help {help_s:.2f} s, list models {list_s:.2f} s", file=sys.stderr)
    print(f"| measure (median of {args.rounds} interleaved rounds) | reference | new | new / reference |")
    print("|---|---|---|---|")
    for metric in ("run first line", "run total", "--help", "list models"):
        ref = statistics.median(results[("reference", metric)])
        new = statistics.median(results[("new", metric)])
        print(f"| {metric} | {ref:.2f} s | {new:.2f} s | {new / ref:.2f} |")


if __name__ == "__main__":
    main()
