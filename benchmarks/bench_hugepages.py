"""Huge pages for malloc on a CPU: the same ``paradnn run`` with and without them, interleaved
(docs/performance.md, "Page faults on a CPU").

Each config is measured by fresh ``python -m paradnn run ... --json`` processes, in turn with
``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` (what paradnn gives every process it measures in) and
``glibc.malloc.hugetlb=0`` (glibc's default: 4 KiB pages), the order alternating from round to
round; both settings are explicit, so ``paradnn run`` keeps them (it only adds the setting where
none is given). Printed per config: each side's median examples/s, minor page faults per step
and kernel CPU seconds per step (``page_faults_per_step``, ``process_system_cpu_s`` over the
timed steps) from the records, and the median of the per-round ratios huge / plain (above 1:
huge pages are faster). The persistent compilation cache is shared, so after the first round a
run loads its programs instead of compiling them.

    python benchmarks/bench_hugepages.py [--rounds 3] [--only inception,resnet50,cnn_big,cnn,fc,lstm] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

#: name -> the ``paradnn run`` arguments of the config.
CONFIGS: dict[str, list[str]] = {
    "inception": ["real", "--model", "inception_v3", "--image", "75", "--batch", "4"],
    "resnet50": ["real", "--model", "resnet50", "--image", "96", "--batch", "8"],
    "cnn_big": ["cnn", "--block", "residual", "--blocks", "2", "--filters", "32", "--image", "128",
                "--output", "100", "--batch", "32", "--optimizer", "rmsprop"],
    # The CPU comparisons of benchmarks/bench_peers.py.
    "cnn": ["cnn", "--block", "residual", "--blocks", "1", "--filters", "16", "--image", "64",
            "--output", "100", "--batch", "32", "--optimizer", "rmsprop"],
    "fc": ["fc", "--layers", "4", "--nodes", "1024", "--input", "2000", "--output", "1000", "--batch", "256"],
    "lstm": ["rnn", "--cell", "lstm", "--layers", "1", "--embed", "256", "--length", "20", "--vocab",
             "1024", "--batch", "64"],
}
SIDES = {"huge": "glibc.malloc.hugetlb=1", "plain": "glibc.malloc.hugetlb=0"}


def run_once(args: list[str], tunables: str) -> dict:
    """One fresh ``paradnn run`` of ``args`` with ``GLIBC_TUNABLES=tunables``; its record."""
    env = {**os.environ, "GLIBC_TUNABLES": tunables}
    done = subprocess.run([sys.executable, "-m", "paradnn", "run", *args, "--json"], env=env,
                          capture_output=True, text=True, timeout=1800)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"paradnn run {' '.join(args)} failed ({done.returncode}): {done.stderr[-1500:]}")
    return json.loads(lines[-1])


def per_step(record: dict, name: str) -> float:
    steps = record["timed_calls"] * record["steps_per_call_used"]
    return record[name] / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=",".join(CONFIGS), help="comma list of " + ", ".join(CONFIGS))
    parser.add_argument("--json", help="write every record's figures here")
    args = parser.parse_args()
    names = args.only.split(",")
    for name in names:
        if name not in CONFIGS:
            parser.error(f"--only: unknown config {name!r} (allowed: {', '.join(CONFIGS)})")
    results: dict[str, dict[str, list[dict]]] = {n: {s: [] for s in SIDES} for n in names}
    for r in range(args.rounds):
        for name in names:
            order = list(SIDES) if r % 2 == 0 else list(reversed(SIDES))
            for side in order:
                rec = run_once(CONFIGS[name], SIDES[side])
                row = {"examples_per_sec": rec["examples_per_sec"], "host_huge_pages": rec["host_huge_pages"],
                       "page_faults_per_step": rec["page_faults_per_step"],
                       "system_s_per_step": per_step(rec, "process_system_cpu_s"),
                       "step_loop_used": rec["step_loop_used"], "contended": rec["contended"]}
                results[name][side].append(row)
                print(f"round {r + 1} {name} {side}: {json.dumps(row)}", flush=True)
    print()
    print("| config | huge: examples/s | plain: examples/s | huge / plain (median of rounds) | faults/step huge, plain "
          "| kernel ms/step huge, plain |")
    print("|---|---|---|---|---|---|")
    for name in names:
        h, p = results[name]["huge"], results[name]["plain"]
        ratio = statistics.median(a["examples_per_sec"] / b["examples_per_sec"] for a, b in zip(h, p))

        def med(rows: list[dict], key: str) -> float:
            return statistics.median(x[key] for x in rows)

        print(f"| {name} ({h[0]['step_loop_used']} loop) | {med(h, 'examples_per_sec'):.4g} | "
              f"{med(p, 'examples_per_sec'):.4g} | **{ratio:.3f}x** | {med(h, 'page_faults_per_step'):,.0f}, "
              f"{med(p, 'page_faults_per_step'):,.0f} | {med(h, 'system_s_per_step') * 1e3:.1f}, "
              f"{med(p, 'system_s_per_step') * 1e3:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
