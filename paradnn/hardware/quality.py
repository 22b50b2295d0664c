"""Which probe measurements may divide utilization: the contention thresholds, the judgments of an
entry (quiet, possible, above the nominal or vendor peak) and the best quiet entry on record."""

from __future__ import annotations

from typing import Any

from paradnn import hostutil
from paradnn.units import positive_env, si

#: A probe is contended (stored as such, never used as a denominator) when the winning GEMM's
#: repeated timings spread more than this (coefficient of variation): a low peak measured on a
#: busy host would inflate every utilization divided by it. ``PARADNN_PROBE_MAX_CV`` overrides it.
PROBE_MAX_CV = 0.10
#: ... or when other processes kept more than this many CPU cores busy on average during the
#: probe (``/proc/stat`` busy ticks minus the probe's own CPU time): a steady neighbour lowers the
#: peak without raising the spread. ``PARADNN_PROBE_MAX_LOAD`` overrides it; the same threshold
#: flags a run ``contended`` (:mod:`paradnn.hostutil`). The bandwidth loop's spread judges
#: nothing: on a cloud host other tenants share the memory bandwidth however quiet this host
#: is (a quiet VM's loop spread 27%), so it would keep every GEMM peak from being used.
PROBE_MAX_OTHER_CORES = hostutil.MAX_OTHER_CORES


def probe_max_cv() -> float:
    """The contention threshold on the spread: ``$PARADNN_PROBE_MAX_CV`` or :data:`PROBE_MAX_CV`."""
    return positive_env("PARADNN_PROBE_MAX_CV", PROBE_MAX_CV)


def probe_max_load() -> float:
    """The contention threshold on other processes' CPU use (cores): ``$PARADNN_PROBE_MAX_LOAD``
    or :data:`PROBE_MAX_OTHER_CORES` (:func:`paradnn.hostutil.max_other_cores`)."""
    return hostutil.max_other_cores()


def best_quiet(entries: list[dict[str, Any]], dtype: str) -> dict[str, Any] | None:
    """The denominator's measurement for ``dtype``: the quiet (not contended) entry with the
    highest FLOP/s for it, or None. The best, not the newest: a quiet probe can only come out
    low (a method slowed down), never high, so the best one on record is the closest to the
    hardware, and a later, lower quiet probe does not move every utilization."""
    quiet = [e for e in entries if usable(e, dtype)]
    return max(quiet, key=lambda e: e["peak_flops"][dtype], default=None)


def usable(entry: dict[str, Any], dtype: str) -> bool:
    """Whether a probe measurement may divide ``dtype``'s utilization: measured for it, on a
    quiet host (not ``contended``), with that dtype's own spread within the target (not in
    ``noisy_dtypes``), and possible (:func:`impossible`: it used no more CPUs than its process
    may use; judged from the entry's own fields, so that entries cached before the check are
    judged too)."""
    return (not entry.get("contended") and dtype in entry.get("peak_flops", {})
            and dtype not in (entry.get("noisy_dtypes") or {}) and not impossible(entry))


def unusable_reasons(entry: dict[str, Any], dtype: str) -> list[str]:
    """Why ``entry`` does not divide ``dtype``'s utilization (:func:`usable`), in words; empty
    when it may."""
    return (list(entry.get("contended_reasons") or [])
            + [why for d, why in (entry.get("noisy_dtypes") or {}).items() if d == dtype]
            + list(impossible(entry).values()))


#: How far the CPU time a probe's GEMMs used may exceed the CPUs its process may use (CPU time
#: over wall time) before it is impossible: the clock ticks of the CPU-time accounting and the
#: threads' start and end blur the ratio by a few percent, never by a tenth of every CPU.
CORES_TOLERANCE = 1.10


def impossible(entry: dict[str, Any]) -> dict[str, str]:
    """What makes a probe ``entry`` impossible, in words ({"cores": why}), judged from what the
    probe could check itself: its GEMMs kept more CPUs busy (its process's CPU time over their
    wall time, ``gemm_cores_used``) than the CPUs its process may use (``gemm_cores_allowed``,
    its CPU affinity) by more than :data:`CORES_TOLERANCE`. Such a probe ran its BLAS threads
    outside the process's CPUs (threads not pinned with it): it measured another platform than
    the records that would divide by it. Empty where possible or not known (accelerators, probes
    cached before the check). A nominal peak from the clock the host reports bounds nothing
    (boost clocks exceed it, a VM may report a base clock only: :func:`above_nominal`)."""
    used, allowed = entry.get("gemm_cores_used"), entry.get("gemm_cores_allowed")
    if not isinstance(used, (int, float)) or not isinstance(allowed, (int, float)) or allowed <= 0:
        return {}
    if used > allowed * CORES_TOLERANCE:
        return {"cores": f"the probe's GEMMs kept {used:.2f} CPUs busy, more than the {allowed:g} this "
                         "process may use (its CPU affinity): BLAS threads ran outside it (not pinned), "
                         "so it measured another platform"}
    return {}


def contention_reasons(entry: dict[str, Any]) -> list[str]:
    """Why a probe ``entry`` was measured on a busy host, judged from its own fields and the
    thresholds it was measured with (``max_cv``, ``max_other_cores``): its float32 GEMM's
    spread (float32 is every dtype's floor) above ``max_cv``, or, on a CPU, other processes'
    busy cores (``host_load``) above ``max_other_cores``. The bandwidth loop's spread is not a
    reason (:data:`PROBE_MAX_OTHER_CORES` says why). Empty for a quiet probe."""
    reasons = []
    max_cv = entry.get("max_cv", PROBE_MAX_CV)
    cv = (entry.get("spread") or {}).get("float32")
    if isinstance(cv, (int, float)) and cv > max_cv:
        reasons.append(f"float32 spread cv {cv:.0%} > {max_cv:.0%}")
    other = (entry.get("host_load") or {}).get("other_busy_cores")
    max_load = entry.get("max_other_cores", PROBE_MAX_OTHER_CORES)
    if entry.get("device_platform") == "cpu" and isinstance(other, (int, float)) and other > max_load:
        reasons.append(f"other processes kept {other:.2f} CPU cores busy > {max_load:g}")
    return reasons


def above_nominal(entry: dict[str, Any]) -> dict[str, str]:
    """The dtypes whose measured peak in a probe ``entry`` exceeds the nominal peak of the CPUs
    its process could use (``nominal_flops``, from its CPU affinity: :func:`nominal_cpu_flops`),
    each with a note in words. A note, not a verdict: the nominal clock is what the host
    reports (``cpuinfo_max_freq``, else the ``cpu MHz`` of /proc/cpuinfo, which in a virtual
    machine is its base clock), which boost clocks exceed; a quiet 2-core cloud VM reporting
    2.45 GHz measured 187 GFLOP/s float32 against a nominal 157. Whether a probe is possible is
    judged from the CPUs it used (:func:`impossible`). Empty without a nominal peak
    (accelerators; CPUs whose clock cannot be read)."""
    nominal = entry.get("nominal_flops") or {}
    out = {}
    for dtype, flops in (entry.get("peak_flops") or {}).items():
        bound = nominal.get(dtype)
        if bound and flops > bound:
            out[dtype] = (f"{dtype} {si(flops, 'FLOP/s')} measured, {flops / bound:.2f}x the nominal "
                          f"{si(bound, 'FLOP/s')} ({entry.get('nominal_basis')}): the cores run above "
                          "the clock the host reports (boost)")
    return out


def above_spec(entry: dict[str, Any]) -> dict[str, str]:
    """The dtypes (and ``bandwidth``) whose measured rate in a probe ``entry`` exceeds the
    vendor peak of its device (``spec``: the :data:`PEAKS` entry its device kind matched), each
    with the reason in words. No device runs faster than its datasheet: the table entry is
    wrong for this device (another form factor or clocks) or the device kind matched the wrong
    entry. The measurement itself stays the ceiling (the probe's FLOPs are 2 N^3 per matmul);
    records divided by that spec peak carry ``peak_below_ceiling``."""
    spec = entry.get("spec") or {}
    out = {}
    for dtype, flops in (entry.get("peak_flops") or {}).items():
        bound = (spec.get("peak_flops") or {}).get(dtype)
        if bound and flops > bound:
            out[dtype] = (f"{dtype} {si(flops, 'FLOP/s')} measured, above the vendor peak {si(bound, 'FLOP/s')} "
                          f"of {entry.get('device_kind')}: the table entry (paradnn.hardware.PEAKS) is wrong "
                          "for this device")
    bandwidth, bound = entry.get("peak_bytes_per_sec"), spec.get("peak_bytes_per_sec")
    if bandwidth and bound and bandwidth > bound:
        out["bandwidth"] = (f"bandwidth {si(bandwidth, 'B/s')} measured, above the vendor peak "
                            f"{si(bound, 'B/s')} of {entry.get('device_kind')}")
    return out
