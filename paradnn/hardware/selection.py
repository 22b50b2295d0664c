"""Peak selection: the :class:`Peak` a run's utilization divides by (the vendor table, the best
quiet probe, or a CPU's nominal peak: :func:`peaks`), its measured ceiling (:func:`ceiling`,
from a child process for another framework) and a record's utilization columns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, NamedTuple

from paradnn import frameworks, precision
from paradnn.errors import ParadnnError
from paradnn.hardware import host, probing
from paradnn.hardware.probe_cache import digest
from paradnn.hardware.probing import PROBE_DTYPES
from paradnn.hardware.quality import best_quiet, unusable_reasons
from paradnn.hardware.vendor import PEAKS, spec_flops, spec_name


class Peak(NamedTuple):
    """The peak that utilization divides by, for one device and dtype. ``flops`` is None where
    no usable figure exists (utilization is then not computed, and the record says why)."""

    flops: float | None  # FLOP/s
    bytes_per_sec: float | None  # B/s
    #: "spec" (vendor table), "measured" (the best quiet paradnn probe), "nominal" (a CPU's
    #: cores x clock x vector width, where no quiet probe is on record) or "none"
    source: str
    method: str  # the table entry, or the probe method that reached it and when
    id: str | None = None  # the probe measurement's id ("spec:<entry>" for the vendor table)
    measured_utc: str | None = None  # when that measurement was taken (None for the table)
    spread: float | None = None  # its winner's coefficient of variation (0 for the table)
    #: a probe's internal precision of its float32 GEMMs (a paradnn.precision level, e.g. "tf32"),
    #: None where unknown (the table, other dtypes, probes of earlier versions)
    precision: str | None = None
    #: where ``bytes_per_sec`` comes from when it differs from ``source``: "measured under load"
    #: (the best bandwidth of the contended probes on record, a lower bound); None: ``source``
    bytes_source: str | None = None


def peaks(device_kind: str, dtype: str, backend: str | None = None, precision_used: str | None = None,
          framework: str = frameworks.DEFAULT) -> Peak:
    """The peak of one device (``backend``: its platform, cpu|gpu|tpu) for ``dtype``: the spec
    table for known accelerators (for float32, the rate of the measured ``precision_used``:
    :func:`spec_flops`), else the best quiet probe of this host and software on record
    (measured once, :func:`measured_peak`; for a run of ``framework`` on an accelerator, see
    :func:`ceiling`). A CPU where only contended probes are on record divides by its nominal
    peak (:func:`nominal_peak`, ``source`` "nominal"): a peak measured under load would inflate
    utilization, and a stable named denominator keeps every run's utilization. An accelerator
    without a vendor entry or a quiet probe has none (``flops`` None, ``method`` says why)."""
    if backend != "cpu":
        name = spec_name(device_kind)
        if name is not None:
            entry = PEAKS[name]
            flops, rate = spec_flops(entry, dtype, precision_used)
            return Peak(float(flops), float(entry["bw"]), "spec", f"vendor table: {device_kind}, {rate}",
                        f"spec:{name}", None, 0.0)
    if backend in (None, "cpu"):
        measured = at_precision(measured_peak(dtype), dtype, precision_used)
        return measured if measured.flops is not None else nominal_peak(dtype, measured)
    return at_precision(_accelerator_probe(backend, dtype, framework), dtype, precision_used)


def nominal_peak(dtype: str, missing: Peak | None = None) -> Peak:
    """The CPU's nominal peak for ``dtype`` (:func:`nominal_cpu_flops`) as a :class:`Peak` with
    ``source`` "nominal": the denominator of a CPU where no quiet probe is on record (``missing``
    says why, in ``method``). Its bandwidth is the best any probe of this host and software
    measured (``bytes_source`` "measured under load": a lower bound; None without a probe).
    ``flops`` None (``source`` "none") where the clock cannot be read."""
    nominal = host.nominal_cpu_flops()
    why = f"; no measured peak: {missing.method}" if missing is not None and missing.method else ""
    if nominal is None:
        return Peak(None, None, "none", "no quiet probe on record and no nominal peak (the CPU clock "
                    "cannot be read)" + why)
    figures, basis = nominal
    flops = figures.get(dtype, figures["float32"])
    loaded = [e.get("peak_bytes_per_sec") for e in probing.on_record()
              if isinstance(e.get("peak_bytes_per_sec"), (int, float))]
    bandwidth = max(loaded) if loaded else None
    return Peak(float(flops), None if bandwidth is None else float(bandwidth), "nominal",
                basis + why, "nominal:" + digest(basis),
                None, 0.0, None, "measured under load" if bandwidth is not None else None)


def measured_peak(dtype: str) -> Peak:
    """The best quiet probe of this host, device and software on record for ``dtype``
    (:func:`best_quiet`; :func:`probe` measures one first where none is on record), as a
    :class:`Peak` with ``source`` "measured" (and, for float32, the ``precision`` its GEMMs ran
    at); ``flops`` None and ``source`` "none" (``method`` says why) where no usable probe is on
    record."""
    answer = probing.probe(dtypes=(dtype,))
    chosen = best_quiet(probing.on_record(), dtype)
    if chosen is None:
        reasons = "; ".join(unusable_reasons(answer, dtype)) or "contended"
        return Peak(None, None, "none",
                    f"no quiet probe on record for this host and software: the last one ({answer['measured_utc']}, "
                    f"id {answer['id']}) was not usable ({reasons}); run `paradnn probe --refresh` on a quiet host",
                    None, answer.get("measured_utc"), None)
    level = chosen.get("float32_precision") if dtype == "float32" else None
    method = (f"measured {chosen['measured_utc']} (probe {chosen['id']}): best of "
              f"{', '.join(chosen['gemm'][dtype])} -> {chosen['best_method'][dtype]}"
              + (f"; float32 GEMMs at precision {level}" if level else ""))
    return Peak(float(chosen["peak_flops"][dtype]), float(chosen["peak_bytes_per_sec"]), "measured", method,
                chosen["id"], chosen["measured_utc"], float(chosen["spread"][dtype]),
                chosen.get("float32_precision") if dtype == "float32" else None)


def at_precision(peak: Peak, dtype: str, precision_used: str | None) -> Peak:
    """``peak`` (a probe) as the bound of a run whose float32 products used ``precision_used``
    (its measured ``matmul_precision_used``): itself where the probe's float32 GEMMs ran at the
    fastest level the run used, or where either precision is unknown; else no figure (``source``
    "none", ``method`` says why). A float32 GEMM at TF32 is several times faster than at full
    float32 on an NVIDIA GPU: a run at full float32 measured against a TF32 probe would read a
    low utilization, and a TF32 run against a full-float32 probe could exceed its bound."""
    if dtype != "float32" or peak.flops is None or not peak.precision or not precision.is_level(precision_used):
        return peak
    levels = precision.levels_of(str(precision_used))
    fastest = [name for _, name in precision.LEVELS if name in levels][-1]  # LEVELS: slowest first
    if fastest == peak.precision:
        return peak
    return Peak(None, None, "none", f"probe {peak.id} measured float32 GEMMs at {peak.precision}; this run's "
                f"float32 products used {precision_used}: no probe at that precision on record")


def utilization_metrics(peak: Peak, ceiling: Peak, executed: float | None, useful: float | None,
                        devices: int = 1) -> dict[str, Any]:
    """A record's columns of what it divides by: the peak (``peak_*``) and the measured ceiling
    (``ceiling_*``) of one device, and the achieved FLOP/s over each times ``devices``:
    ``flops_utilization`` and ``ceiling_utilization`` from ``executed`` (FLOP/s counted by the
    framework), ``model_flops_utilization`` and ``model_ceiling_utilization`` from ``useful``
    (analytic FLOP/s); None where a figure is missing (``paradnn.record.METRICS``)."""
    def over(achieved: float | None, per_device: float | None) -> float | None:
        return achieved / (per_device * devices) if achieved is not None and per_device else None

    return {
        "peak_flops": peak.flops, "peak_bytes_per_sec": peak.bytes_per_sec, "peak_source": peak.source,
        "peak_bytes_source": peak.bytes_source or (peak.source if peak.bytes_per_sec is not None else None),
        "peak_method": peak.method, "peak_id": peak.id, "peak_measured_utc": peak.measured_utc,
        "peak_spread": peak.spread,
        "flops_utilization": over(executed, peak.flops), "model_flops_utilization": over(useful, peak.flops),
        "ceiling_flops": ceiling.flops, "ceiling_bytes_per_sec": ceiling.bytes_per_sec,
        "ceiling_id": ceiling.id, "ceiling_method": ceiling.method,
        "ceiling_utilization": over(executed, ceiling.flops),
        "model_ceiling_utilization": over(useful, ceiling.flops),
    }


#: Seconds a run waits for the ceiling probe of another framework's process (:func:`ceiling`):
#: the probe's GEMM budget plus the child's start, compiles and bandwidth loop, with room.
CEILING_CHILD_TIMEOUT_S = 600.0
# The child's answer, per process (a worker measures many configs; the child runs once).
_CHILD_CEILINGS: dict[str, Any] = {}


def ceiling(device_platform: str, dtype: str, framework: str = frameworks.DEFAULT,
            peak: Peak | None = None, precision_used: str | None = None) -> Peak:
    """The measured ceiling of one device for ``dtype``: the best quiet probe of this host,
    device and software (:func:`measured_peak`), whatever the peak utilization divides by.
    Where ``peak`` is itself measured (a CPU, a device without a vendor entry), the ceiling is
    that same probe: it is returned as is, nothing is measured twice; where it is nominal or
    none, no quiet probe is on record and there is no ceiling.

    On an accelerator the probe runs (once per host and software, cached like a CPU's) with
    the reference framework (JAX). A run of another framework there (PyTorch) gets it from a
    child process (``paradnn probe --json``, with JAX's GPU memory preallocation off): JAX in
    the run's own process would reserve most of the device memory that framework needs. A
    probe that fails on an accelerator (out of memory beside the run's own buffers) gives no
    ceiling (``source`` "none", ``method`` says why) rather than failing the run; so does a
    float32 run at another precision than the probe's (``precision_used``: :func:`at_precision`)."""
    if peak is not None and peak.source == "measured":
        return peak
    if peak is not None and peak.source in ("nominal", "none"):
        # The peak is not measured because no quiet probe is on record: no ceiling either.
        return Peak(None, None, "none", "no quiet probe on record for this host and software "
                    "(run paradnn probe --refresh on a quiet host)")
    if device_platform == "cpu":
        return at_precision(measured_peak(dtype), dtype, precision_used)
    return at_precision(_accelerator_probe(device_platform, dtype, framework), dtype, precision_used)


def _accelerator_probe(device_platform: str, dtype: str, framework: str) -> Peak:
    """The best quiet probe for ``dtype`` as a run of ``framework`` on an accelerator gets it:
    in its own process (:func:`measured_peak`) with the reference framework, else from a child
    process (:func:`ceiling` says why). A probe that fails gives ``source`` "none" with the
    reason (the run keeps its spec utilization; on a device without a vendor entry it has no
    utilization) instead of failing the run."""
    try:
        if framework == frameworks.DEFAULT:
            return measured_peak(dtype)
        return _child_ceiling(dtype, device_platform)
    except ParadnnError:
        raise  # bad settings (PARADNN_PROBE_*) or an unwritable cache are the user's to fix
    except Exception as exc:  # noqa: BLE001 - an environment fault, not the workload's result
        return Peak(None, None, "none", f"the ceiling probe failed: {type(exc).__name__}: {exc}"[:1000])


def ceilings(dtypes: tuple[str, ...] = PROBE_DTYPES) -> dict[str, Peak]:
    """:func:`measured_peak` of each of ``dtypes``: the ceilings ``paradnn probe`` reports (and
    its ``--json`` gives a run of another framework, :func:`ceiling`)."""
    return {dtype: measured_peak(dtype) for dtype in dtypes}


def _child_ceiling(dtype: str, device_platform: str) -> Peak:
    """The ceiling for ``dtype`` measured (or read from the cache) by ``paradnn probe --json``
    in a child process of the reference framework, once per process: a failure is remembered
    too (a sweep does not start the child again for every config), and so is a child that saw
    another device platform than the run's ``device_platform`` (JAX without its CUDA plugin on
    a GPU host probes the CPU, a ceiling of the wrong device)."""
    if "ceilings" not in _CHILD_CEILINGS:
        env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
        try:
            # stderr is the run's: the child says when it measures.
            done = subprocess.run([sys.executable, "-m", "paradnn", "probe", "--json"], stdout=subprocess.PIPE,
                                  text=True, env=env, timeout=CEILING_CHILD_TIMEOUT_S)
            if done.returncode != 0:
                raise RuntimeError(f"`paradnn probe --json` exited with status {done.returncode}")
            answer = json.loads(done.stdout.strip().splitlines()[-1])
            _CHILD_CEILINGS["ceilings"] = answer["ceilings"]
            _CHILD_CEILINGS["device"] = (answer.get("device_platform"), answer.get("device_kind"))
        except Exception as exc:  # noqa: BLE001 - remembered, then reported by the caller
            _CHILD_CEILINGS["ceilings"] = {}
            _CHILD_CEILINGS["error"] = f"{type(exc).__name__}: {exc}"
    if "error" in _CHILD_CEILINGS:
        raise RuntimeError(_CHILD_CEILINGS["error"])
    platform, kind = _CHILD_CEILINGS["device"]
    if platform != device_platform:
        return Peak(None, None, "none", f"the reference framework's probe sees another device ({platform}: "
                    f"{kind}) than this run ({device_platform}): install JAX for this device (for "
                    "NVIDIA GPUs pip install 'paradnn[gpu-cuda13]' or 'paradnn[gpu]')")
    known = _CHILD_CEILINGS["ceilings"].get(dtype)
    if known is None:
        return Peak(None, None, "none", f"the ceiling probe measured no {dtype}")
    return Peak(**known)
