"""The probe: it times the backend's GEMM methods and bandwidth loop on this host (:func:`probe`,
:func:`measure_gemm`), at most once per host and software, and keeps every measurement in the
probe cache."""

from __future__ import annotations

import json
import os
import sys
import time
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

from paradnn import frameworks, gpuclocks
from paradnn.hardware import host, probe_cache
from paradnn.hardware.host import local_device_info
from paradnn.hardware.quality import (
    above_nominal,
    above_spec,
    best_quiet,
    contention_reasons,
    impossible,
    probe_max_cv,
    probe_max_load,
    usable,
)
from paradnn.hardware.vendor import spec_peak
from paradnn.units import positive_env

#: Seconds a probe may spend on its GEMMs before it skips the remaining (method, size) pairs
#: (each dtype keeps at least one); ``PARADNN_PROBE_BUDGET_S`` overrides it. The skipped pairs are
#: recorded (``incomplete``), so a peak that missed a method says so.
PROBE_BUDGET_S = 40.0


#: Seconds after a contended probe during which no new automatic probe runs (``paradnn probe
#: --refresh`` always measures): a busy host must not pay a probe on every run.
PROBE_RETRY_S = 3600.0


def probe_budget_s() -> float:
    """The probe's time budget in s: ``$PARADNN_PROBE_BUDGET_S`` or :data:`PROBE_BUDGET_S`."""
    return positive_env("PARADNN_PROBE_BUDGET_S", PROBE_BUDGET_S, "seconds")


#: What the probe measures on each kind of platform (:func:`probe_plan`): square GEMM sizes N
#: per dtype (FLOPs 2 N^3) and the bandwidth loop's array (MiB) and calls per timed repetition.
#: On a CPU the sizes reach the BLAS plateau while a probe takes seconds on a 2-core host, and
#: 256 MiB is far beyond the last-level cache. An accelerator needs much larger GEMMs to reach
#: its plateau (an H100 SXM reaches about 790-800 TFLOP/s of its 989 bfloat16 dense peak on
#: 8192^3; 4096^3 is the smaller point on the curve) and an array far beyond its L2 (50 MiB on
#: an H100): 1 GiB, read and written per call, 10 calls queued per timed repetition so that one
#: host-device synchronisation (tens of microseconds) is under 1% of a repetition (2 GiB moved
#: per call: about 0.64 ms at the H100 SXM's 3.35 TB/s, 0.45 ms at the H200's 4.8 TB/s).
PROBE_PLANS: dict[str, dict[str, Any]] = {
    "cpu": {"gemm_sizes": {"float32": (2048, 3072), "bfloat16": (1024, 2048), "float16": (1024, 2048)},
            "bandwidth_mib": 256, "bandwidth_calls": 1},
    "accelerator": {"gemm_sizes": {"float32": (4096, 8192), "bfloat16": (4096, 8192), "float16": (4096, 8192)},
                    "bandwidth_mib": 1024, "bandwidth_calls": 10},
}


def probe_plan(device_platform: str) -> dict[str, Any]:
    """The probe's sizes for a device platform (``cpu``, ``gpu``, ``tpu``, ...): the ``cpu``
    entry of :data:`PROBE_PLANS` for a CPU, its ``accelerator`` entry for every other platform.
    Keys: ``gemm_sizes`` {dtype: (N, ...)}, ``bandwidth_mib`` (MiB), ``bandwidth_calls``."""
    return PROBE_PLANS["cpu" if device_platform == "cpu" else "accelerator"]


_PROBE_REPS = 2  # timed repetitions per method and size (after one warm call), best taken
_SPREAD_REPS = 5  # repetitions of the winner, whose spread decides whether the probe is quiet
#: The dtypes every probe measures together (see :func:`probe`).
PROBE_DTYPES = ("float32", "bfloat16", "float16")

# In-process results: a probe is measured at most once per process and key.
_MEMO: dict[str, list[dict[str, Any]]] = {}


def numpy_gemm(dtype: str, n: int) -> Callable[[], Any] | None:
    """A GEMM method of the probe: numpy's BLAS (float32 only; numpy has no BLAS path for
    bfloat16/float16, only a generic loop that is not a peak). Backends add it to theirs."""
    if dtype != "float32":
        return None
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    return lambda: a @ b


def _times(fn: Callable[[], Any], reps: int, warm: bool = True) -> list[float]:
    if warm:
        fn()  # compile and warm
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _cv(times: list[float]) -> float:
    return float(np.std(times) / np.mean(times))


def measure_gemm(dtype: str, methods: dict[str, Callable[[str, int], Callable[[], Any] | None]],
                 sizes: tuple[int, ...] | None = None, deadline: float | None = None) -> dict[str, Any]:
    """Square-matmul throughput of every method (name -> factory(dtype, N) of a zero-argument
    call that multiplies two NxN matrices and waits for the result; None where the method lacks
    the dtype) for ``dtype``: ``{"by_method": {name: FLOP/s},
    "best_method", "best_size", "flops"` (best FLOP/s), ``"cv"`` (spread of the winner over
    repeated runs), ``"skipped"`` (["method N", ...] left out past ``deadline``)}. A call may
    queue several matmuls and wait for the last (on an accelerator, so that one host-device
    synchronisation does not count against a millisecond matmul): it then says how many in its
    attribute ``matmuls`` (default 1). ``sizes`` default to the CPU's (:data:`PROBE_PLANS`). A
    method that fails to build or to run (an unknown compiler option, no device memory left) is
    left out. Once one pair has run, a pair that would end past ``deadline``
    (``time.perf_counter()`` seconds) is skipped: one that starts after it, or one that the
    method's time at its previous size, scaled by N^3, predicts to end after it."""
    sizes = sizes or PROBE_PLANS["cpu"]["gemm_sizes"].get(dtype, (1024, 2048))
    by_method: dict[str, float] = {}
    skipped: list[str] = []
    best: tuple[float, str, int, Callable] | None = None
    for name, factory in methods.items():
        last_n, last_s = 0, 0.0  # this method's previous size and seconds of one timed call there
        for n in sizes:
            # The prediction makes the budget a bound where one method is far slower than the
            # rest for a dtype: jax 0.10.2's oneDNN float16 GEMM ran at 0.8 GFLOP/s on an Intel
            # Sapphire Rapids host, so its one 2048^3 pair (3 calls) took about 66 s of a 40 s budget.
            predicted = (1 + _PROBE_REPS) * last_s * (n / last_n) ** 3 if last_n else 0.0
            if best is not None and deadline is not None and time.perf_counter() + predicted > deadline:
                skipped.append(f"{name} {n}")
                continue
            try:
                fn = factory(dtype, n)
                if fn is None:
                    continue
                flop = 2.0 * n**3 * getattr(fn, "matmuls", 1)
                last_n, last_s = n, min(_times(fn, _PROBE_REPS))
                rate = flop / last_s
            except Exception:  # noqa: BLE001 - a library path this build lacks (or a method that
                # cannot run here, e.g. out of device memory beside another framework) is absent
                continue
            by_method[name] = max(by_method.get(name, 0.0), rate)
            if best is None or rate > best[0]:
                best = (rate, name, n, fn)
    if best is None:
        raise RuntimeError(f"no GEMM method ran for dtype {dtype}")
    rate, name, n, fn = best
    spread = _times(fn, _SPREAD_REPS, warm=False)
    # The best of all repetitions is the peak; the spread says whether the host was quiet.
    rate = max(rate, 2.0 * n**3 * getattr(fn, "matmuls", 1) / min(spread))
    by_method[name] = rate
    return {"by_method": by_method, "best_method": name, "best_size": n, "flops": rate,
            "cv": _cv(spread), "skipped": skipped}


def _probe_versions(versions: dict[str, Any], methods: dict[str, Any]) -> dict[str, Any]:
    """What a probe result depends on besides the hardware: the backend's ``probe_versions()``
    (its framework and compiler versions and flags), numpy's and paradnn's versions, the
    method names and the version of each method that states one (its attribute ``version``: a
    method of another framework, such as PyTorch's GEMM on a GPU). The result expires when any
    of these change."""
    import paradnn

    out = {**versions, "numpy": np.__version__, "paradnn": paradnn.__version__,
           "methods": sorted(methods)}
    stated = {name: m.version for name, m in methods.items() if getattr(m, "version", None)}
    if stated:
        out["method_versions"] = stated
    return out


def _probe_key(info: dict[str, Any], versions: dict[str, Any]) -> str:
    return "|".join(str(x) for x in (info["host"], info["device_platform"], info["device_kind"],
                                     info["cpu_model"], json.dumps(versions, sort_keys=True)))


def on_record(framework: str = frameworks.DEFAULT) -> list[dict[str, Any]]:
    """Every probe measurement on record for this host, device and ``framework``'s software
    (quiet and contended), oldest first; reads the cache, measures nothing."""
    *_, key = _probe_context(framework)
    return list(_MEMO.get(key) or probe_cache.entries_of(probe_cache.read_cache(), key))


def _probe_context(framework: str) -> tuple[Any, dict[str, Callable], dict[str, Any], dict[str, Any], str]:
    backend = frameworks.get(framework)
    gemm_methods = frameworks.capability(framework, "gemm_methods", "measure GEMM peaks")
    info = local_device_info(backend.device_info())
    methods = gemm_methods(info["device_platform"])
    versions = _probe_versions(backend.probe_versions(), methods)
    return backend, methods, info, versions, _probe_key(info, versions)


def covers(entry: dict[str, Any], dtype: str, budget_s: float) -> bool:
    """Whether ``entry`` measured ``dtype`` as fully as a probe with a GEMM budget of
    ``budget_s`` seconds would: it skipped no (method, size) pair (``incomplete``), or it ran
    under at least that budget (``budget_s``; an entry cached before the field was recorded
    counts as having had none). A probe cut short by a small budget (a test suite's) may have
    skipped the fastest method: it answers later probes with the same or a smaller budget, never
    one that would have measured what it skipped."""
    return (dtype in entry.get("peak_flops", {})
            and (not (entry.get("incomplete") or {}).get(dtype) or entry.get("budget_s", 0.0) >= budget_s))


def _answer(entries: list[dict[str, Any]], dtypes: tuple[str, ...], now: float,
            budget_s: float) -> dict[str, Any] | None:
    """What a probe without ``refresh`` and with a GEMM budget of ``budget_s`` seconds returns
    without measuring, from the entries that :func:`covers` it for every dtype: where a quiet one
    does, the best quiet entry on record (``in_use``; the best of all, as :func:`best_quiet`:
    a fuller probe can only come out higher), else the newest contended covering one when it is
    younger than :data:`PROBE_RETRY_S` (not in use: the host was busy a moment ago), else None
    (measure)."""
    if all(any(usable(e, d) and covers(e, d, budget_s) for e in entries) for d in dtypes):
        return {**best_quiet(entries, dtypes[0]), "in_use": True}
    recent = [e for e in entries if not all(usable(e, d) for d in dtypes)
              and all(covers(e, d, budget_s) for d in dtypes)
              and now - e.get("measured_epoch_s", 0.0) < PROBE_RETRY_S]
    return {**recent[-1], "in_use": False} if recent else None


def notify(message: str) -> None:
    """One progress line on stderr (``paradnn: ...``): the probe says when it measures, so that a
    run that spends seconds on it is never silent."""
    print(f"paradnn: {message}", file=sys.stderr, flush=True)


def probe(refresh: bool = False, dtypes: tuple[str, ...] = PROBE_DTYPES,
          framework: str = frameworks.DEFAULT) -> dict[str, Any]:
    """The peak measurement of the current device for ``dtypes``, measured at most once per host
    and software: with ``framework``'s probe methods (``Backend.gemm_methods``,
    ``measure_bandwidth``, ``probe_versions``; the reference framework's by default, so that
    every framework's utilization on a CPU divides by the same measured peak).

    Without ``refresh``: the best quiet measurement on record (:func:`best_quiet`), else the
    newest contended one if younger than :data:`PROBE_RETRY_S`, else a new measurement; a
    measurement that skipped pairs under a smaller budget than this probe's does not count
    (:func:`covers`). With
    ``refresh``: always a new one. Every measurement is stored (the cache is
    ``$PARADNN_CACHE/probe.json``), a contended one marked as such, with the reasons and the host
    load it saw; it never becomes a denominator.

    Returns ``id``, ``peak_flops`` {dtype: FLOP/s}, ``gemm`` {dtype: {method: FLOP/s}},
    ``best_method`` {dtype: method}, ``spread`` {dtype or "bandwidth": coefficient of variation},
    ``peak_bytes_per_sec`` (B/s), ``host_load`` (``other_busy_cores``: cores other processes kept
    busy during the probe, ``loadavg_1m``, ``cpus``), ``contended`` and ``contended_reasons``,
    ``incomplete`` (pairs skipped past the time budget), ``budget_s`` (that budget, s), ``nominal_flops`` and ``nominal_basis``
    (CPUs, where readable), ``measured_utc``, ``method``, the device, host and versions,
    ``gemm_clocks`` (what held a GPU's clocks down while the GEMMs ran, :mod:`paradnn.gpuclocks`;
    null readings elsewhere) and ``in_use`` (whether utilization divides by it now). A
    reduced-precision peak is at least the float32 one: XLA:CPU may run reduced-precision
    matmuls in float32, so the float32 rate is attainable in such a program.
    """
    backend, methods, info, versions, key = _probe_context(framework)
    dtypes = tuple(dict.fromkeys(("float32", *dtypes)))
    # A measurement covers every dtype of PROBE_DTYPES, so that filling in a dtype later never
    # brings a second float32 measurement (and a second denominator) for the same software.
    measured = tuple(dict.fromkeys((*PROBE_DTYPES, *dtypes)))
    if not refresh:
        hit = _answer(_MEMO.get(key) or probe_cache.entries_of(probe_cache.read_cache(), key), dtypes, time.time(),
                      probe_budget_s())
        if hit is not None:
            return hit
    with probe_cache.cache_lock():
        cache = probe_cache.read_cache()
        entries = probe_cache.entries_of(cache, key)
        if not refresh:
            hit = _answer(entries, dtypes, time.time(), probe_budget_s())
            if hit is not None:  # another process measured it while this one waited
                _MEMO[key] = entries
                return hit
        notify(f"measuring this host's peak FLOP/s and bandwidth ({', '.join(measured)}; once per host "
               f"and software, at most about {probe_budget_s():.0f} s of GEMMs; cached in {probe_cache.CACHE_PATH})")
        result = _measure(backend, methods, info, versions, measured)
        result["id"] = probe_cache.measurement_id(key, result["measured_utc"])
        contended = [e for e in entries if e.get("contended")][-(probe_cache.KEEP_CONTENDED - 1):]
        if result["contended"]:
            notify(f"the host was busy ({'; '.join(result['contended_reasons'])}): this peak is stored "
                   "as contended and not used for utilization")
        if result["impossible"]:
            notify(f"impossible probe ({'; '.join(result['impossible'].values())}): stored, never "
                   "used for utilization")
        if result["above_spec"]:
            notify(f"the vendor peak table is wrong for this device ({'; '.join(result['above_spec'].values())})")
        entries = [e for e in entries if not e.get("contended")] + contended + [result]
        entries.sort(key=lambda e: e.get("measured_epoch_s", 0.0))
        cache[key] = {"host": info["host"], "device_kind": info["device_kind"], "measurements": entries,
                      "updated_epoch_s": time.time()}
        cache = probe_cache.keep_recent(cache, info)
        probe_cache.write_cache(cache)
        _MEMO[key] = entries
    used = best_quiet(entries, "float32")
    return {**result, "in_use": used is not None and used["id"] == result["id"]}


def _measure(backend: Any, methods: dict[str, Callable], info: dict[str, Any],
             versions: dict[str, Any], dtypes: tuple[str, ...]) -> dict[str, Any]:
    on_cpu = info["device_platform"] == "cpu"
    plan = probe_plan(info["device_platform"])
    sizes = plan["gemm_sizes"]
    budget = probe_budget_s()
    start = time.perf_counter()
    load0, _ = host.busy_cores_since(None)
    # Each dtype gets its share of the budget, so that a slow one never starves the others;
    # float32 (the default dtype, and the floor of the others) gets half of it.
    weights = [2.0 if d == "float32" else 1.0 for d in dtypes]
    ends = np.cumsum(weights) / sum(weights)
    cpu0, wall0 = os.times(), time.perf_counter()
    # What held the clocks down while the GEMMs ran (a GPU at its power limit: the ceiling is
    # then the board's sustained rate); the probe's GEMMs run on the first device.
    clocks = gpuclocks.ClockWindow(info["device_platform"], [SimpleNamespace(id=0, local_hardware_id=0)])
    clocks.start()
    try:
        gemm = {d: measure_gemm(d, methods, sizes.get(d), deadline=start + budget * float(end))
                for d, end in zip(dtypes, ends)}
    finally:
        clocks.stop()
    cpu1, gemm_wall = os.times(), time.perf_counter() - wall0
    # The CPUs the GEMMs kept busy (this process's CPU time over their wall time) against the
    # CPUs it may use: more is impossible (impossible()); on an accelerator, host threads only.
    gemm_cores = ((cpu1.user + cpu1.system - cpu0.user - cpu0.system) / gemm_wall
                  if on_cpu and gemm_wall > 0 else None)
    stream = backend.measure_bandwidth(plan["bandwidth_mib"], plan["bandwidth_calls"])
    _, other_cores = host.busy_cores_since(load0)
    bandwidth, bw_cv = stream["bytes_per_sec"], stream["cv"]
    peak_flops = {d: max(g["flops"], gemm["float32"]["flops"]) for d, g in gemm.items()}
    best_method = {d: g["best_method"] if g["flops"] >= gemm["float32"]["flops"]
                   else f"float32 {gemm['float32']['best_method']}" for d, g in gemm.items()}
    spread = {d: g["cv"] for d, g in gemm.items()}
    spread["bandwidth"] = bw_cv
    max_cv, max_load = probe_max_cv(), probe_max_load()
    # float32 (every dtype's floor) judges the whole probe (contention_reasons); a reduced
    # precision whose own spread is wide (float16 is emulated on most CPUs and its GEMMs vary by
    # about 10% on a quiet host) is only not used for that dtype; a wide bandwidth spread is
    # noted and judges nothing (other tenants share a cloud host's memory bandwidth).
    noisy = {d: f"{d} spread cv {cv:.0%} > {max_cv:.0%}" for d, cv in spread.items()
             if cv > max_cv and d != "float32"}
    try:
        loadavg = os.getloadavg()[0]
    except OSError:
        loadavg = None
    result: dict[str, Any] = {
        **info, "versions": versions, "framework": backend.name,
        "peak_flops": peak_flops, "gemm": {d: g["by_method"] for d, g in gemm.items()},
        "best_method": best_method, "spread": spread, "peak_bytes_per_sec": bandwidth,
        "noisy_dtypes": noisy, "max_cv": max_cv, "max_other_cores": max_load,
        "host_load": {"other_busy_cores": other_cores, "loadavg_1m": loadavg, "cpus": os.cpu_count()},
        "gemm_cores_used": gemm_cores,
        "gemm_clocks": clocks.metrics(),
        "gemm_cores_allowed": float(len(os.sched_getaffinity(0))) if on_cpu and hasattr(os, "sched_getaffinity")
        else (float(os.cpu_count() or 1) if on_cpu else None),
        "incomplete": {d: g["skipped"] for d, g in gemm.items() if g["skipped"]},
        "budget_s": budget,
        "probe_s": time.perf_counter() - start,
        "measured_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "measured_epoch_s": time.time(),
        "method": (f"best of methods {', '.join(methods)} on square NxN matmuls (N per dtype: "
                   + "; ".join(f"{d} {sizes.get(d)}" for d in dtypes)
                   + f"), best of {_PROBE_REPS} after a warm call, winner repeated {_SPREAD_REPS}x, "
                   f"within {budget:g} s; bandwidth: {stream['method']}"),
    }
    nominal = host.nominal_cpu_flops() if on_cpu else None
    result["nominal_flops"] = nominal[0] if nominal else None
    result["nominal_basis"] = nominal[1] if nominal else None
    entry = spec_peak(info["device_kind"]) if not on_cpu else None
    result["spec"] = entry and {"peak_flops": entry["flops"], "peak_bytes_per_sec": entry["bw"]}
    # Which float32 precision the GEMMs ran at (TF32 on recent NVIDIA GPUs by default): a float32
    # run at another precision is not bounded by this rate (:func:`at_precision`).
    result["float32_precision"] = backend.probe_precision() if hasattr(backend, "probe_precision") else None
    result["above_nominal"] = above_nominal(result)
    result["above_spec"] = above_spec(result)
    result["contended_reasons"] = contention_reasons(result)
    result["contended"] = bool(result["contended_reasons"])
    result["impossible"] = impossible(result)
    return result
