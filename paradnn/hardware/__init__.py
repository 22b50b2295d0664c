"""Host facts, the accelerator peak table, and measured peaks (``paradnn probe``).

Utilization uses the vendor peak of a known device (``peak_source = "spec"``) and otherwise the
best quiet GEMM FLOP/s and memory bandwidth that :func:`probe` measured on this host with this
software, kept under ``~/.cache/paradnn/probe.json`` (``peak_source = "measured"``): one peak per
host and software, chosen deliberately. A probe measured on a busy host is stored as contended
(with the load it saw) and never divides anything; every record names the probe it used
(``peak_id``, ``peak_measured_utc``, ``peak_spread``). Every record also names the measured
ceiling beside the peak (:func:`ceiling`: the best quiet probe, also on a device whose peak is
the vendor's; on a CPU the same probe as the peak), so that utilization is given against both.

No framework is imported here: the probe's matrix multiplications and bandwidth loop are the
capabilities ``gemm_methods``, ``measure_bandwidth`` and ``probe_versions`` of a backend
(:mod:`paradnn.frameworks`; JAX's by default); this module chooses, times, caches and applies them.

The modules, one job each (every name is importable from this package; a test that replaces a
module's global, such as ``probe_cache.CACHE_PATH``, replaces it in the module named):

* ``vendor``: the vendor peak table (:data:`PEAKS`) and how a device kind names its entry;
* ``host``: host facts (CPU model and affinity, revision, memory, nominal CPU peak, host load);
* ``quality``: the contention thresholds and which probe measurements may divide utilization;
* ``probe_cache``: the probe cache file with its lock, its entries and their ids;
* ``probing``: the probe itself (:func:`probe`, :func:`measure_gemm`);
* ``selection``: the :class:`Peak` a run divides by (:func:`peaks`) and its :func:`ceiling`.
"""


from paradnn.hardware.host import (
    check_writable,
    cpu_affinity_kind,
    cpu_model,
    device_memory_bytes,
    host_memory_bytes,
    local_device_info,
    nominal_cpu_flops,
    paradnn_revision,
    software_info,
)
from paradnn.hardware.probe_cache import (
    CACHE_ADVICE,
    CACHE_PATH,
    KEEP_SOFTWARE_KEYS,
    UNCHECKED_LOAD,
    check_cache_folder,
)
from paradnn.hardware.probing import (
    PROBE_BUDGET_S,
    PROBE_DTYPES,
    PROBE_PLANS,
    PROBE_RETRY_S,
    measure_gemm,
    notify,
    numpy_gemm,
    on_record,
    probe,
    probe_budget_s,
    probe_plan,
)
from paradnn.hardware.quality import (
    CORES_TOLERANCE,
    PROBE_MAX_CV,
    PROBE_MAX_OTHER_CORES,
    above_nominal,
    above_spec,
    best_quiet,
    contention_reasons,
    impossible,
    probe_max_cv,
    probe_max_load,
    unusable_reasons,
    usable,
)
from paradnn.hardware.selection import (
    CEILING_CHILD_TIMEOUT_S,
    Peak,
    at_precision,
    ceiling,
    ceilings,
    measured_peak,
    nominal_peak,
    peaks,
    utilization_metrics,
)
from paradnn.hardware.vendor import PEAKS, T, spec_name, spec_peak

__all__ = [
    "PEAKS", "T", "spec_name", "spec_peak", "check_writable", "cpu_affinity_kind", "cpu_model",
    "device_memory_bytes", "host_memory_bytes", "local_device_info", "nominal_cpu_flops",
    "paradnn_revision", "software_info", "CORES_TOLERANCE", "PROBE_MAX_CV", "PROBE_MAX_OTHER_CORES",
    "above_nominal", "above_spec", "best_quiet", "contention_reasons", "impossible", "probe_max_cv",
    "probe_max_load", "unusable_reasons", "usable", "CACHE_ADVICE", "CACHE_PATH",
    "KEEP_SOFTWARE_KEYS", "UNCHECKED_LOAD", "check_cache_folder", "PROBE_BUDGET_S", "PROBE_DTYPES",
    "PROBE_PLANS", "PROBE_RETRY_S", "measure_gemm", "notify", "numpy_gemm", "on_record", "probe",
    "probe_budget_s", "probe_plan", "CEILING_CHILD_TIMEOUT_S", "at_precision", "ceiling",
    "ceilings", "measured_peak", "nominal_peak", "Peak", "peaks", "utilization_metrics",
]
