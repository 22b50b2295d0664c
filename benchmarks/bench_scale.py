"""How the analyses grow with the store (issue 39): every analysis command and the Python calls
behind it, timed on synthetic stores of about 1k, 10k and 40k rows (docs/performance.md,
"Analyses at scale").

    PYTHONPATH=. python benchmarks/bench_scale.py [--sizes 1000,10000,40000] [--json FILE]
    PYTHONPATH=. python benchmarks/bench_scale.py --quick        # small sizes, for a test

The stores are made from a real record: the FC row of the committed smoke store
(tests/data/smoke_cpu.db, a ``paradnn.run`` of a tiny FC on this project's CPU host), its
platform, software, settings and peaks kept, its workload fields replaced by configs of the
paper's FC grid (sweeps/fc.yaml: layers 4-128, nodes 32-8192, input 2000-8000, output 200-1000,
batch 64-16384, float32 and bfloat16: 19,440 configs), each measured twice. A store of ``N``
rows holds the first ``N / 2`` configs of one fixed random order of the grid, so a smaller store
is a part of the bigger ones. Step times follow a roofline of the template's peaks (compute
efficiency 0.3, bandwidth efficiency 0.8, 50 us per step of overhead) times a smooth
correction in batch and width (what a learned correction has to find), with a lognormal 10%
noise per run; every row has the template's peaks, per-call samples around its median (2%
spread, 10 calls) and is stable. The second store of ``compare`` holds the same configs
measured again: new noise, time stamps a day later.

For each size the script writes the stores with ``paradnn.store.Store.add_rows`` (one
transaction) and times, each in a fresh process (``python -m paradnn``, start-up included):
``status``, ``export -o x.csv``, ``report -o DIR``, ``compare A B`` and ``predict --score``;
then, in this process, the calls behind them: ``load`` (one store), ``heatmap``,
``sensitivity``, ``roofline``, ``speedup`` (float32 over bfloat16), ``compare`` (two loaded
frames), the prediction ``fit`` and ``score`` (``paradnn.analysis.prediction``, on the loaded
frame) and ``report`` (``write_report`` of the loaded frame). Each line prints its time and its
growth exponent ``log(t_big / t_small) / log(rows_big / rows_small)`` from the smallest size to
the largest (1: linear; 2: quadratic), of the wall time and of the CPU time (user + system of
the command's process, or of this process's threads for a call): on a shared host the wall time
also counts waiting for a core, the CPU time does not. The 1-minute load average is printed
before and after.
"""

from __future__ import annotations

import argparse
import copy
import datetime as _dt
import itertools
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # paradnn from this checkout when run as a script

from paradnn.families.fc import FC
from paradnn.record import row_key
from paradnn.sizes import config_sizes
from paradnn.store import Store
from paradnn.workload import Workload, stable_hash

#: The store whose FC row is the template of every synthetic row (a real ``paradnn.run``).
TEMPLATE_STORE = ROOT / "tests" / "data" / "smoke_cpu.db"
#: The paper's FC grid (sweeps/fc.yaml, the paper's Table 2).
FC_AXES: dict[str, list[int]] = {
    "layers": [4 * 2 ** i for i in range(6)],
    "nodes": [32 * 2 ** i for i in range(9)],
    "input": [2000, 4000, 6000, 8000],
    "output": [200, 400, 600, 800, 1000],
    "batch": [64 * 2 ** i for i in range(9)],
}
DTYPES = ("float32", "bfloat16")
REPEATS = 2
NOISE = 0.10  # lognormal sigma of a run's step time around the model's
SIZES = (1000, 10000, 40000)
QUICK_SIZES = (200, 800)
COMMANDS = ("status", "export", "report", "compare", "predict --score")
CALLS = ("load", "heatmap", "sensitivity", "roofline", "speedup", "compare", "predict fit",
         "predict score", "report")


# -- the synthetic stores ---------------------------------------------------------------------

def template_row() -> dict[str, Any]:
    """The FC row of the committed smoke store, as stored (``Store.rows``)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy_path = Path(tmp) / "template.db"  # Store opens for writing: never the committed file
        shutil.copyfile(TEMPLATE_STORE, copy_path)
        with Store(copy_path, create=False) as db:
            rows = db.rows()
    fc = [r for r in rows if r.get("family") == "fc" and r.get("status") == "ok"]
    if not fc:
        raise SystemExit(f"{TEMPLATE_STORE}: no ok FC row to use as the template")
    return fc[0]


def grid_order(seed: int = 0) -> list[tuple[int, int, int, int, int, str]]:
    """Every config of the paper's FC grid in both dtypes, in one fixed random order."""
    grid = list(itertools.product(*FC_AXES.values(), DTYPES))
    order = np.random.default_rng(seed).permutation(len(grid))
    return [grid[i] for i in order]


def _true_step_s(flops: float, nbytes: float, batch: int, nodes: int, peak_flops: float,
                 peak_bytes: float) -> float:
    """The noiseless step time (s) of a config: overhead + roofline, times a smooth correction
    (small batches and narrow layers run below the roofline's efficiency)."""
    roof = max(flops / (0.3 * peak_flops), nbytes / (0.8 * peak_bytes))
    correction = math.exp(0.4 / math.sqrt(batch / 64.0) + 0.2 * math.sin(math.log2(nodes)))
    return 50e-6 + roof * correction


def synthetic_rows(template: dict[str, Any], n_rows: int, seed: int,
                   day: int = 0) -> list[dict[str, Any]]:
    """``n_rows`` stored rows (``n_rows / 2`` configs of :func:`grid_order`, each twice), built
    from ``template``; ``seed`` draws the noise, ``day`` shifts the time stamps (a second
    measurement of the same configs)."""
    rng = np.random.default_rng(seed)
    configs = grid_order()[: max(1, n_rows // REPEATS)]
    start = _dt.datetime(2026, 12, 1, tzinfo=_dt.UTC) + _dt.timedelta(days=day)
    pf, pb = float(template["peak_flops"]), float(template["peak_bytes_per_sec"])
    rows: list[dict[str, Any]] = []
    for i, (layers, nodes, inp, out, batch, dtype) in enumerate(configs):
        w = Workload(FC(layers=layers, nodes=nodes, input=inp, output=out), batch, dtype,
                     template.get("optimizer"), 1, template.get("framework") or "jax")
        s = config_sizes(w)
        flops = float(s["model_flops_per_step"])
        nbytes = 3 * s["state_bytes"] + 2 * s["activation_bytes"] + s["batch_bytes"]
        true_s = _true_step_s(flops, nbytes, batch, nodes, pf, pb)
        spec = w.to_dict()
        for r in range(REPEATS):
            t = true_s * math.exp(NOISE * rng.standard_normal())
            calls = np.round(t * (1.0 + 0.02 * rng.standard_normal(10)), 12)
            row = copy.deepcopy(template)
            row.update(spec)
            row["workload_key"] = stable_hash(spec)
            row["key"] = row_key(row)
            when = start + _dt.timedelta(seconds=REPEATS * i + r)
            row["time_utc"] = when.isoformat()
            executed = flops * 1.3
            row.update({
                "status": "ok", "error": None, "warnings": "", "stable": True,
                "step_time_s": t, "examples_per_sec": batch / t,
                "step_time_p10_s": float(np.quantile(calls, 0.1)),
                "step_time_p90_s": float(np.quantile(calls, 0.9)),
                "step_time_cv": float(np.std(calls) / np.mean(calls)),
                "step_times_s": [float(c) for c in calls], "timed_calls": len(calls),
                "step_time_ci_low_s": float(calls.min()), "step_time_ci_high_s": float(calls.max()),
                "flops_per_step": executed, "model_flops_per_step": flops,
                "bytes_per_step": float(nbytes), "flops_per_sec": executed / t,
                "flops_utilization": executed / t / pf,
                "model_flops_utilization": flops / t / pf,
                "useful_flops_ratio": flops / executed,
                "arithmetic_intensity": executed / nbytes, "params": int(s["params"]),
                "memory_peak_bytes": int(s["memory_bytes"]),
                "process_cpu_s": t * 10 * row.get("steps_per_call_used", 1),
            })
            rows.append(row)
    return rows[:n_rows]


def write_store(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """The rows into a new store, in one transaction."""
    with Store(path) as db:
        added, present = db.add_rows(rows)
    if added != len(rows):
        raise SystemExit(f"{path}: {added} of {len(rows)} rows added ({present} present)")


# -- timing -----------------------------------------------------------------------------------

def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def time_command(args: Sequence[str], cwd: Path, timeout_s: float,
                 ok_codes: Sequence[int] = (0,)) -> dict[str, Any]:
    """Wall time (s) of ``python -m paradnn ARGS`` in a fresh process; its exit code; None as
    the time when it failed or ran past ``timeout_s``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env["MPLBACKEND"] = "Agg"
    start, cpu0 = time.perf_counter(), _children_cpu()
    try:
        done = subprocess.run([sys.executable, "-m", "paradnn", *args], cwd=cwd, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {"seconds": None, "rc": None, "note": f"killed at {timeout_s:.0f} s"}
    seconds, cpu = time.perf_counter() - start, _children_cpu() - cpu0
    if done.returncode not in ok_codes:
        tail = done.stdout.strip().splitlines()[-3:]
        return {"seconds": None, "cpu_seconds": None, "rc": done.returncode,
                "note": " | ".join(tail)}
    return {"seconds": seconds, "cpu_seconds": cpu, "rc": done.returncode,
            "output": done.stdout}


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def time_call(fn: Callable[[], Any]) -> dict[str, Any]:
    """Wall time (s) and CPU time (s, this process's threads) of one call of ``fn``. On a shared
    host the wall time includes waiting for a core; the CPU time does not."""
    start, cpu0 = time.perf_counter(), time.process_time()
    fn()
    return {"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu0}


def command_times(a: Path, b: Path, work: Path, timeout_s: float,
                  only: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Every analysis command on store ``a`` (compare: ``a`` against ``b``)."""
    out: dict[str, dict[str, Any]] = {}
    plans = {
        "status": ["status", str(a)],
        "export": ["export", str(a), "-o", str(work / "x.csv"), "--force"],
        "report": ["report", str(a), "-o", str(work / "rep"), "--force"],
        # 0 no regression, 1 a regression, 3 inconclusive: all are answers.
        "compare": ["compare", str(a), str(b)],
        "predict --score": ["predict", "--score", "--store", str(a)],
    }
    for name, args in plans.items():
        if name in only:
            codes = (0, 1, 3) if name == "compare" else (0,)
            out[name] = time_command(args, work, timeout_s, codes)
    return out


def call_times(a: Path, b: Path, work: Path, only: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The Python calls behind the commands, on the loaded frames of ``a`` and ``b``."""
    import matplotlib
    matplotlib.use("Agg")
    import paradnn
    from paradnn import analysis
    from paradnn.analysis import prediction as P
    from paradnn.report.html import write_report

    out: dict[str, dict[str, Any]] = {}
    loaded: dict[str, Any] = {}

    def load() -> None:
        loaded["a"] = paradnn.load(a)

    out["load"] = time_call(load)
    df = loaded["a"]
    df_b = paradnn.load(b) if "compare" in only else None
    fc = df[df["family"] == "fc"]
    sized = P.sized(df)
    calls: dict[str, Callable[[], Any]] = {
        "heatmap": lambda: analysis.heatmap(fc, "batch", "nodes", "model_flops_utilization",
                                            panels=True),
        "sensitivity": lambda: analysis.sensitivity(fc, "model_flops_utilization",
                                                    ["layers", "nodes", "input", "output",
                                                     "batch"]),
        "roofline": lambda: analysis.roofline(df),
        "speedup": lambda: analysis.speedup(df[df["dtype"] == "bfloat16"],
                                            df[df["dtype"] == "float32"],
                                            on=["family", "layers", "nodes", "input", "output",
                                                "batch"]),
        "compare": lambda: paradnn.compare(df, df_b),
        "predict fit": lambda: P.fit_all(sized),
        "predict score": lambda: P.score(sized),
        "report": lambda: write_report(df, work / "rep_call", store=str(a)),
    }
    for name, fn in calls.items():
        if name in only:
            out[name] = time_call(fn)
    return out


def exponent(rows: Sequence[int], seconds: Sequence[float | None]) -> float | None:
    """Growth exponent from the first size to the last: log time ratio / log rows ratio."""
    if len(rows) < 2 or seconds[0] is None or seconds[-1] is None or seconds[0] <= 0:
        return None
    return math.log(seconds[-1] / seconds[0]) / math.log(rows[-1] / rows[0])


def run(sizes: Sequence[int], timeout_s: float, only: Sequence[str], keep: Path | None,
        commands: bool = True, calls: bool = True) -> dict[str, Any]:
    """Build the stores of every size and time everything; the results as a dict."""
    template = template_row()
    results: dict[str, Any] = {
        "sizes": list(sizes), "commands": {}, "calls": {}, "store_rows": [],
        "load_average_before": _load_average(), "cpus": os.cpu_count(),
        "python": sys.version.split()[0], "started_utc": _dt.datetime.now(_dt.UTC)
        .isoformat(timespec="seconds"),
    }
    tmp = Path(tempfile.mkdtemp(prefix="bench_scale_")) if keep is None else keep
    try:
        for n in sizes:
            work = tmp / f"n{n}"
            work.mkdir(parents=True, exist_ok=True)
            a, b = work / "a.db", work / "b.db"
            for p in (a, b):
                p.unlink(missing_ok=True)
            start = time.perf_counter()
            rows_a = synthetic_rows(template, n, seed=1)
            rows_b = synthetic_rows(template, n, seed=2, day=1)
            write_store(a, rows_a)
            write_store(b, rows_b)
            results["store_rows"].append(len(rows_a))
            print(f"{len(rows_a)} rows ({len(rows_a) // REPEATS} configs x {REPEATS}): stores "
                  f"written in {time.perf_counter() - start:.1f} s", flush=True)
            if commands:
                for name, got in command_times(a, b, work, timeout_s, only).items():
                    got.pop("output", None)
                    results["commands"].setdefault(name, []).append(got)
                    print(f"  command {name:<16} {_show(got)}", flush=True)
            if calls:
                for name, got in call_times(a, b, work, only).items():
                    results["calls"].setdefault(name, []).append(got)
                    print(f"  call    {name:<16} {_show(got)}", flush=True)
    finally:
        if keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    results["load_average_after"] = _load_average()
    rows = results["store_rows"]
    for kind in ("commands", "calls"):
        for name, got in results[kind].items():
            results[kind][name] = {
                "runs": got, "exponent": exponent(rows, [g["seconds"] for g in got]),
                "cpu_exponent": exponent(rows, [g.get("cpu_seconds") for g in got])}
    return results


def _show(got: dict[str, Any]) -> str:
    if got.get("seconds") is None:
        return f"failed ({got.get('note')})"
    return f"{got['seconds']:8.2f} s wall {got['cpu_seconds']:8.2f} s CPU"


def table(results: dict[str, Any]) -> str:
    """The results as a Markdown table: one line per command and call."""
    rows = results["store_rows"]
    head = ["what", *[f"{n:,} rows: wall / CPU s" for n in rows],
            f"growth exponent {rows[0]:,} -> {rows[-1]:,}: wall / CPU"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def exp(e: float | None) -> str:
        return "-" if e is None else f"{e:.2f}"

    for kind, prefix in (("commands", "`paradnn "), ("calls", "")):
        for name, got in results[kind].items():
            # A note is a command's last lines: no "|" in a Markdown cell.
            cells = [f"{g['seconds']:.1f} / {g['cpu_seconds']:.1f}" if g.get("seconds") is not None
                     else f"failed (exit {g.get('rc')}): {g.get('note') or ''}".replace("|", "/")
                     for g in got["runs"]]
            label = f"{prefix}{name}`" if prefix else f"{name} (call)"
            growth = f"{exp(got['exponent'])} / {exp(got.get('cpu_exponent'))}"
            lines.append("| " + " | ".join([label, *cells, growth]) + " |")
    la = (results.get("load_average_before"), results.get("load_average_after"))
    lines.append(f"\nload average (1 min) before {la[0]}, after {la[1]}; {results['cpus']} CPUs")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: build, time, print (and write ``--json``)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=None,
                   help=f"comma-separated row counts (default: {','.join(map(str, SIZES))})")
    p.add_argument("--quick", action="store_true",
                   help=f"small stores ({','.join(map(str, QUICK_SIZES))} rows), for a test")
    p.add_argument("--only", default=None,
                   help="comma-separated names of the commands and calls to time (default: all)")
    p.add_argument("--no-commands", action="store_true", help="time the calls only")
    p.add_argument("--no-calls", action="store_true", help="time the commands only")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="seconds after which a command is killed (default: %(default)s)")
    p.add_argument("--keep", default=None, help="folder to build the stores in and keep")
    p.add_argument("--json", default=None, metavar="FILE", help="write the results to FILE")
    args = p.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else SIZES
    if args.sizes:
        sizes = tuple(int(s) for s in args.sizes.split(","))
    if len(sizes) < 2 or any(s < 2 * REPEATS for s in sizes) or list(sizes) != sorted(set(sizes)):
        p.error("--sizes: at least two increasing row counts of 4 or more")
    only = tuple(s.strip() for s in args.only.split(",")) if args.only else (*COMMANDS, *CALLS)
    unknown = set(only) - set(COMMANDS) - set(CALLS)
    if unknown:
        p.error(f"--only: unknown {', '.join(sorted(unknown))}; allowed: "
                f"{', '.join((*COMMANDS, *CALLS))}")
    keep = Path(args.keep) if args.keep else None
    results = run(sizes, args.timeout, only, keep, not args.no_commands, not args.no_calls)
    print()
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
