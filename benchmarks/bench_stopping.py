"""The timed phase's stopping rules compared by measurement: ``ci`` (the median's 95% interval
within ``ci_target``) against ``cv`` (the calls' coefficient of variation within ``cv_target``),
on a quiet host and with one core kept busy (docs/metrics.md, "Stopping rules: spread of calls
or precision of the median").

    PYTHONPATH=. python benchmarks/bench_stopping.py [--calls 120] [--rounds 2] [--json FILE]

Method (replay: every rule sees the same data). For each workload (a tiny FC, a small CNN, a
small LSTM) and each host condition, one ``paradnn.run`` records a long series of timed calls
(``min_calls = max_calls = --calls``, a budget that never cuts it, ``warmup_s`` 0.5 s, K chosen
by the default ``call_target_s`` of 0.2 s). Conditions: ``quiet`` (the host as it is: its
1-minute load average and the cores other processes kept busy during the timed calls are
printed) and ``busy core`` (a ``python -c "while True: pass"`` child started by this script
spins on one core; it is killed afterwards, also on an error or Ctrl-C). Rounds alternate the
order of the conditions and the workloads, so a slow drift of the host favours neither. On a
shared host other processes come and go: before each series the script waits (``--wait-quiet``,
up to 30 s) until they keep at most 0.25 cores busy, and a series during which they kept more
than ``paradnn.hostutil.MAX_OTHER_CORES`` (0.5) cores busy beyond the condition's own is
recorded again (``--retries``, 2; the replaced ones are kept in the JSON under ``discarded``).

Each rule and target is then replayed on windows of every series (one starting every
``--stride`` calls) exactly as ``paradnn.measure.time_calls`` stops: after at least
``max(min_calls, MIN_TIMED_CALLS)`` calls once the precision is within the target, at
``max_calls``, or before a call that would end past the 5 s budget (0.5 s warm-up + the calls'
durations, a call lasting step time x K). Only windows long enough for the budget to stop them
count, the same windows for every rule. The accuracy of a stopped run is the relative error of its median
against the median of the whole series (the best estimate there is) and whether that median
lies in the run's 95% interval (``median_ci``).

``--replay FILE`` prints the table again from a ``--json`` file without measuring (with
``--undisturbed``, of the series no other process disturbed only).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # paradnn from this checkout when run as a script

from paradnn import hostutil  # noqa: E402
from paradnn.measure import MIN_TIMED_CALLS, MeasureSettings, median_ci, precision_met, precision_of  # noqa: E402

#: The library's default protocol: what the replay applies (budget, warm-up, min and max calls).
DEFAULTS = MeasureSettings()
#: (rule, target) pairs replayed; ci 0.02 and cv 0.02 are the defaults of the two rules.
RULE_TARGETS: tuple[tuple[str, float], ...] = (
    ("ci", 0.01), ("ci", 0.02), ("ci", 0.03), ("ci", 0.05),
    ("cv", 0.02), ("cv", 0.05), ("cv", 0.10),
)
CONDITIONS = ("quiet", "busy core")
#: Other processes' busy cores (1 s sample) up to which the host counts as quiet before a quiet
#: series is recorded (``--wait-quiet``).
QUIET_CORES = 0.25
#: The spinning child of the ``busy core`` condition: one core at 100%.
SPINNER = [sys.executable, "-c", "while True: pass"]


@dataclass(frozen=True)
class Stop:
    """Where a replayed timed phase stopped: ``calls`` timed, ``seconds`` of the phase (warm-up
    included, s), ``met`` (the rule's precision within its target at the stop), ``reason``
    (``target``, ``budget`` or ``max_calls``), the stopped ``median_s`` per step (s), its 95%
    interval ``ci_low_s``-``ci_high_s`` (s) and the rule's ``precision`` (1 = 100%)."""

    calls: int
    seconds: float
    met: bool
    reason: str
    median_s: float
    ci_low_s: float
    ci_high_s: float
    precision: float


def replay(step_times_s: Sequence[float], k: int, rule: str, target: float,
           settings: MeasureSettings = DEFAULTS) -> Stop | None:
    """Replay ``time_calls``' timed phase on per-step times (s, in call order) of calls of ``k``
    steps, with ``settings``' budget, warm-up, min and max calls and ``rule`` at ``target``.
    None when the series ends before the phase would stop."""
    times: list[float] = []
    elapsed = settings.warmup_s  # the simulated clock since the start of warm-up (s)
    reason = "max_calls"
    while len(times) < settings.max_calls:
        # time_calls' budget check: the next call's expected duration is the median so far.
        if len(times) >= MIN_TIMED_CALLS and elapsed + float(np.median(times)) * k > settings.time_budget_s:
            reason = "budget"
            break
        if len(times) == len(step_times_s):
            return None
        times.append(float(step_times_s[len(times)]))
        elapsed += times[-1] * k
        if len(times) >= max(settings.min_calls, MIN_TIMED_CALLS) and precision_met(times, rule, target):
            reason = "target"
            break
    low, high = median_ci(np.sort(times))
    return Stop(len(times), elapsed, precision_met(times, rule, target), reason, float(np.median(times)),
                low, high, precision_of(times, rule))


def windows(step_times_s: Sequence[float], k: int, rule: str, target: float, stride: int,
            settings: MeasureSettings = DEFAULTS) -> list[dict[str, Any]]:
    """:func:`replay` on the windows of a series starting every ``stride`` calls, each with its
    accuracy against the whole series' median: ``rel_error`` (|stopped median - series median|
    / series median, 1 = 100%) and ``covers`` (the series median inside the stopped run's 95%
    interval). Only windows long enough for a phase that never meets its target (stopped by
    the budget or max_calls) count, whatever the rule: dropping just the windows a rule could
    not finish would keep its early stops and lose its budget stops, flattering it."""
    reference = float(np.median(step_times_s))
    out = []
    for start in range(0, len(step_times_s), stride):
        if replay(step_times_s[start:], k, "cv", -math.inf, settings) is None:
            continue  # too short for the budget to stop it
        stop = replay(step_times_s[start:], k, rule, target, settings)
        assert stop is not None  # a rule stops no later than one that never meets its target
        out.append({"start": start, **asdict(stop), "rel_error": abs(stop.median_s - reference) / reference,
                    "covers": stop.ci_low_s <= reference <= stop.ci_high_s})
    return out


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Share of ``runs`` (:func:`windows` rows) that met the target (0-1), calls and seconds
    (median, max), relative error of the median (median, 90th percentile; 1 = 100%) and the
    share whose 95% interval held the series median (0-1)."""
    if not runs:
        return {"runs": 0}
    calls = [r["calls"] for r in runs]
    seconds = [r["seconds"] for r in runs]
    errors = [r["rel_error"] for r in runs]
    return {"runs": len(runs), "met_share": float(np.mean([r["met"] for r in runs])),
            "calls_median": float(np.median(calls)), "calls_max": int(max(calls)),
            "seconds_median": float(np.median(seconds)), "seconds_max": float(max(seconds)),
            "rel_error_median": float(np.median(errors)), "rel_error_p90": float(np.percentile(errors, 90)),
            "covers_share": float(np.mean([r["covers"] for r in runs]))}


def evaluate(series: list[dict[str, Any]], stride: int,
             rule_targets: Sequence[tuple[str, float]] = RULE_TARGETS) -> list[dict[str, Any]]:
    """One summary row per (condition, rule, target) over all ``series`` (each with
    ``condition``, ``step_times_s`` and ``steps_per_call``)."""
    rows = []
    for condition in dict.fromkeys(s["condition"] for s in series):
        for rule, target in rule_targets:
            runs = [w for s in series if s["condition"] == condition
                    for w in windows(s["step_times_s"], s["steps_per_call"], rule, target, stride)]
            rows.append({"condition": condition, "rule": rule, "target": target, **summarize(runs)})
    return rows


@contextlib.contextmanager
def busy_core() -> Iterator[subprocess.Popen]:
    """A child process spinning on one core for the duration of the block; killed (and reaped)
    when the block ends, however it ends."""
    proc = subprocess.Popen(SPINNER, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.2)  # the interpreter's start is not load yet
        yield proc
    finally:
        proc.kill()
        proc.wait()


def other_busy_cores(seconds: float = 1.0) -> float | None:
    """Cores other processes keep busy now: the host's busy cores over ``seconds`` (s) of this
    process sleeping, from /proc/stat (None where it is unreadable)."""
    window = hostutil.HostWindow()
    window.start()
    time.sleep(seconds)
    return window.stop().other_busy_cores


def wait_quiet(max_wait_s: float, max_cores: float = QUIET_CORES) -> float | None:
    """Wait until other processes keep at most ``max_cores`` cores busy (1 s samples), at most
    ``max_wait_s`` seconds; the last sample (cores). A shared host's test runs come and go: a
    quiet series recorded during one measures that run, not the quiet host."""
    deadline = time.monotonic() + max_wait_s
    while True:
        cores = other_busy_cores()
        if cores is None or cores <= max_cores or time.monotonic() >= deadline:
            return cores


def workloads(quick: bool) -> list[tuple[str, Any, int]]:
    """(name, spec, batch) of the workloads: each compiles in a few seconds on a 2-core CPU."""
    from paradnn.families.cnn import CNN
    from paradnn.families.fc import FC
    from paradnn.families.rnn import RNN

    if quick:
        return [("fc-tiny", FC(layers=1, nodes=16, input=16, output=4), 8)]
    return [("fc", FC(layers=2, nodes=128, input=256, output=10), 64),
            ("cnn", CNN(block="residual", blocks=1, filters=8, image=32, output=10), 8),
            ("lstm", RNN(cell="lstm", layers=1, embed=64, length=16, vocab=100), 16)]


def record(name: str, spec: Any, batch: int, condition: str, round_: int, calls: int,
           wait_s: float) -> dict[str, Any]:
    """One long series: ``calls`` timed calls of ``spec`` in ``condition`` (the spinner running
    for ``busy core``), after waiting up to ``wait_s`` (s) for other processes to calm down,
    with the host's load around it (``other_busy_cores``: other processes' busy cores during
    the timed calls, the spinner included)."""
    import paradnn

    def measure(spinner: subprocess.Popen | None) -> Any:
        rec = paradnn.run(spec, batch=batch, min_calls=calls, max_calls=calls, time_budget_s=86_400.0,
                          warmup_s=0.5)
        if spinner is not None and spinner.poll() is not None:
            raise SystemExit(f"bench_stopping: the spinning child died ({spinner.returncode}) during {name}")
        return rec

    before = wait_quiet(wait_s) if wait_s > 0 else None
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    spinner_pid = None
    if condition == "busy core":
        with busy_core() as spinner:
            spinner_pid = spinner.pid
            rec = measure(spinner)
    else:
        rec = measure(None)
    if rec.status != "ok":
        raise SystemExit(f"bench_stopping: {name} in {condition} failed: {rec.status} {rec.error}")
    m = rec.metrics
    return {"workload": name, "spec": spec.to_dict(), "batch": batch, "condition": condition, "round": round_,
            "steps_per_call": int(m["steps_per_call_used"]), "step_times_s": list(m["step_times_s"]),
            "loadavg_1m_before": load_before, "loadavg_1m_after": os.getloadavg()[0],
            "other_busy_cores_before": before, "other_busy_cores": m.get("host_other_busy_cores"),
            "spinner_pid": spinner_pid, "wall_s": time.perf_counter() - t0}


def disturbed(s: dict[str, Any]) -> bool:
    """Whether other processes than the condition's own (none, or the spinner's one core) kept
    more than ``hostutil.MAX_OTHER_CORES`` cores busy during the series' timed calls."""
    own = 1.0 if s["condition"] == "busy core" else 0.0
    return s["other_busy_cores"] is not None and s["other_busy_cores"] > own + hostutil.MAX_OTHER_CORES


def measure_all(calls: int, rounds: int, quick: bool, wait_s: float = 0.0,
                retries: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every (round, workload, condition) series, and the series recorded again because another
    process :func:`disturbed` them (at most ``retries`` times each; the last one is kept). Odd
    rounds reverse the workloads, and the condition that goes first alternates from one
    recording pair to the next."""
    out: list[dict[str, Any]] = []
    discarded: list[dict[str, Any]] = []
    specs = workloads(quick)
    pair = 0
    for r in range(rounds):
        for name, spec, batch in (specs if r % 2 == 0 else specs[::-1]):
            for condition in (CONDITIONS if pair % 2 == 0 else CONDITIONS[::-1]):
                for attempt in range(retries + 1):
                    s = record(name, spec, batch, condition, r, calls, wait_s)
                    again = disturbed(s) and attempt < retries
                    print(f"  round {r} {name:>7} {condition:>9}: K={s['steps_per_call']:>5}, median step "
                          f"{np.median(s['step_times_s']) * 1e3:8.3f} ms, load avg 1 min {s['loadavg_1m_before']:.2f}, "
                          f"other processes' busy cores {_num(s['other_busy_cores'], '.2f')}"
                          + (" (disturbed: recorded again)" if again else ""), flush=True)
                    if not again:
                        break
                    discarded.append(s)
                out.append(s)
            pair += 1
    return out, discarded


def _num(x: float | None, fmt: str) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def series_lines(series: list[dict[str, Any]]) -> list[str]:
    """One line per series: K, median step time (ms), the whole series' cv and ci half-width (%),
    the host's load."""
    lines = ["series (whole): workload, condition, round, K steps/call, median step ms, cv %, "
             "ci half-width %, calls, load avg 1 min, other busy cores"]
    for s in series:
        t = s["step_times_s"]
        lines.append(f"  {s['workload']:>7} {s['condition']:>9} r{s['round']}  K={s['steps_per_call']:>5}  "
                     f"{np.median(t) * 1e3:8.3f} ms  cv {precision_of(t, 'cv') * 100:5.1f}%  "
                     f"ci +-{precision_of(t, 'ci') * 100:4.2f}%  n={len(t)}  load {s['loadavg_1m_before']:.2f}  "
                     f"other {_num(s['other_busy_cores'], '.2f')} cores")
    return lines


def table(rows: list[dict[str, Any]]) -> str:
    """The summary rows as a text table with units."""
    head = (f"{'condition':>9} {'rule':>4} {'target':>6} {'runs':>5} {'met':>5} {'calls med (max)':>15} "
            f"{'s med (max)':>13} {'|err| med (p90)':>16} {'truth in CI':>11}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if not r["runs"]:
            lines.append(f"{r['condition']:>9} {r['rule']:>4} {r['target'] * 100:>5g}% {0:>5}  (no window long enough)")
            continue
        lines.append(
            f"{r['condition']:>9} {r['rule']:>4} {r['target'] * 100:>5g}% {r['runs']:>5} "
            f"{r['met_share'] * 100:4.0f}% "
            f"{r['calls_median']:>8.0f} ({r['calls_max']:>3}) {r['seconds_median']:>6.2f} ({r['seconds_max']:4.2f}) "
            f"{r['rel_error_median'] * 100:>7.2f}% ({r['rel_error_p90'] * 100:4.2f}%) "
            f"{r['covers_share'] * 100:>10.0f}%")
    return "\n".join(lines)


def load_lines(series: list[dict[str, Any]]) -> list[str]:
    """Per condition: other processes' busy cores during the timed calls (the spinner counts in
    ``busy core``) and the 1-minute load average before the recordings (median, max)."""
    lines = []
    for condition in dict.fromkeys(s["condition"] for s in series):
        mine = [s for s in series if s["condition"] == condition]
        cores = [s["other_busy_cores"] for s in mine if s["other_busy_cores"] is not None]
        median = float(np.median(cores)) if cores else None
        load = [s["loadavg_1m_before"] for s in mine]
        lines.append(f"  {condition:>9}: other processes' busy cores during the calls median "
                     f"{_num(median, '.2f')} (max {_num(max(cores, default=None), '.2f')}), "
                     f"load avg 1 min median {np.median(load):.2f} (max {max(load):.2f}), "
                     f"{sum(disturbed(s) for s in mine)} of {len(mine)} series disturbed")
    return lines


def report(result: dict[str, Any]) -> str:
    """What the benchmark prints: the host, the series and the table."""
    c = result["config"]
    return "\n".join([
        f"stopping rules replayed on {len(result['series'])} series of {c['calls']} timed calls "
        f"({c['rounds']} round(s)), windows every {c['stride']} calls; budget {c['time_budget_s']:g} s, "
        f"warm-up {c['warmup_s']:g} s, min calls {c['min_calls']}, max calls {c['max_calls']}",
        f"host: {result['host']['cpus']} CPU cores, {result['host']['platform']}, {result['host']['date']}",
        *series_lines(result["series"]),
        f"host load by condition ({len(result.get('discarded', []))} disturbed series recorded again; "
        f"disturbed: other processes beyond the condition's own over {hostutil.MAX_OTHER_CORES:g} cores):",
        *load_lines(result["series"]),
        "",
        "met: share of runs that met the target within the budget; calls and s: timed calls and seconds "
        "of the phase (warm-up included); |err|: relative error of the stopped median against the whole "
        "series' median; truth in CI: share of runs whose 95% interval of the median held that median",
        table(result["summary"]),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=None,
                        help="timed calls per series (default 120; 50 with --quick)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 2; 1 with --quick)")
    parser.add_argument("--stride", type=int, default=5,
                        help="calls between the starts of replayed windows (default 5)")
    parser.add_argument("--wait-quiet", type=float, default=None, metavar="S",
                        help=f"before each series, wait up to S seconds for other processes to keep at most "
                             f"{QUIET_CORES:g} cores busy (default 30; 0 with --quick)")
    parser.add_argument("--retries", type=int, default=None,
                        help="record a disturbed series again up to this many times (default 2; 0 with --quick)")
    parser.add_argument("--quick", action="store_true", help="one tiny FC, few calls (the test's size)")
    parser.add_argument("--json", type=Path, default=None, help="also write the result, series included, here")
    parser.add_argument("--replay", type=Path, default=None, help="print the table of a --json file, measuring nothing")
    parser.add_argument("--undisturbed", action="store_true",
                        help="with --replay: evaluate only the series no other process disturbed")
    args = parser.parse_args(argv)
    if args.replay:
        result = json.loads(args.replay.read_text())
        if args.undisturbed:
            result["series"] = [s for s in result["series"] if not disturbed(s)]
        result["summary"] = evaluate(result["series"], result["config"]["stride"])
        print(report(result))
        return 0
    calls = args.calls or (50 if args.quick else 120)
    rounds = args.rounds or (1 if args.quick else 2)
    wait_s = args.wait_quiet if args.wait_quiet is not None else (0.0 if args.quick else 30.0)
    retries = args.retries if args.retries is not None else (0 if args.quick else 2)
    if calls < MIN_TIMED_CALLS or rounds < 1 or args.stride < 1 or wait_s < 0 or retries < 0:
        parser.error(f"--calls {calls} (at least {MIN_TIMED_CALLS}), --rounds {rounds}, --stride {args.stride} "
                     f"(at least 1), --wait-quiet {wait_s:g}, --retries {retries} (at least 0)")
    # A SIGTERM must unwind through busy_core's cleanup too, not leave the spinner behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(f"recording {calls} timed calls per series, {rounds} round(s), conditions {', '.join(CONDITIONS)}:",
          flush=True)
    series, discarded = measure_all(calls, rounds, args.quick, wait_s, retries)
    result = {
        "config": {"calls": calls, "rounds": rounds, "stride": args.stride, "quick": args.quick,
                   "wait_quiet_s": wait_s, "retries": retries,
                   "time_budget_s": DEFAULTS.time_budget_s, "warmup_s": DEFAULTS.warmup_s,
                   "min_calls": DEFAULTS.min_calls, "max_calls": DEFAULTS.max_calls,
                   "call_target_s": DEFAULTS.call_target_s, "rule_targets": [list(x) for x in RULE_TARGETS]},
        "host": {"cpus": os.cpu_count(), "platform": platform.platform(),
                 "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds")},
        "series": series,
        "discarded": discarded,
        "summary": evaluate(series, args.stride),
    }
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
