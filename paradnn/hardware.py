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
(:mod:`paradnn.backends`; JAX's by default); this module chooses, times, caches and applies them.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import platform as _platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np

from paradnn import frameworks, hostutil, precision
from paradnn.envcheck import os_cause
from paradnn.errors import InfrastructureError, ParadnnError
from paradnn.units import positive_env, si

T = 1e12
# Vendor peak of one JAX device: "flops" {dtype: FLOP/s} (what utilization divides by), "bw"
# (memory bandwidth, B/s), "mem" (device memory, B). Dense vendor peaks (docs/gpu.md lists
# them), never "sparse" ones. TPU v2/v3 chips expose one JAX device per TensorCore, so the chip
# figures are halved. TPU float32 matmuls run as bfloat16 passes at default precision, and JAX's
# default float32 matmul on Ampere/Hopper uses TF32 tensor cores (JAX's "Matmul precision"
# docs: "TF32 on recent GPUs" unless jax_default_matmul_precision asks for more): those float32
# peaks are the ones the default precision can reach. The GPU entries also record "float32_full", the non-tensor-core
# FP32 peak that true float32 is bounded by: a float32 run whose measured matmul_precision_used
# is "highest" divides by it (:func:`_spec_flops`).
# NVIDIA datasheets print tensor-core peaks "with sparsity"; the dense figures here are half.
#   H100 SXM/PCIe/NVL: NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100):
#     SXM 67 FP32, 989 TF32*, 1979 BF16/FP16*, 3.35 TB/s, 80 GB; PCIe 51, 756*, 1513*, 2.0 TB/s,
#     80 GB; NVL 60, 835*, 1671*, 3.9 TB/s, 94 GB (* sparse).
#   H200 SXM/NVL: NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200):
#     SXM 67, 989*, 1979*, 4.8 TB/s, 141 GB; NVL 60, 835*, 1671*, 4.8 TB/s, 141 GB.
PEAKS: dict[str, dict[str, Any]] = {
    "tpu v2": {"flops": {"bfloat16": 45 * T / 2, "float32": 45 * T / 2}, "bw": 600e9 / 2, "mem": 8 * 2**30},
    "tpu v3": {"flops": {"bfloat16": 123 * T / 2, "float32": 123 * T / 2}, "bw": 900e9 / 2, "mem": 16 * 2**30},
    "tpu v4": {"flops": {"bfloat16": 275 * T, "float32": 275 * T}, "bw": 1200e9, "mem": 32 * 2**30},
    "tpu v5e": {"flops": {"bfloat16": 197 * T, "float32": 197 * T}, "bw": 819e9, "mem": 16e9},
    "tpu v5p": {"flops": {"bfloat16": 459 * T, "float32": 459 * T}, "bw": 2765e9, "mem": 95e9},
    "tpu v6e": {"flops": {"bfloat16": 918 * T, "float32": 918 * T}, "bw": 1638e9, "mem": 32e9},
    "v100": {"flops": {"float16": 125 * T, "bfloat16": 15.7 * T, "float32": 15.7 * T}, "float32_full": 15.7 * T,
             "bw": 900e9, "mem": 16e9},
    "a100": {"flops": {"float16": 312 * T, "bfloat16": 312 * T, "float32": 156 * T}, "float32_full": 19.5 * T,
             "bw": 2039e9, "mem": 80e9},
    "h100 sxm": {"flops": {"float16": 989 * T, "bfloat16": 989 * T, "float32": 495 * T}, "float32_full": 67 * T,
                 "bw": 3.35e12, "mem": 80e9},
    "h100 pcie": {"flops": {"float16": 756 * T, "bfloat16": 756 * T, "float32": 378 * T}, "float32_full": 51 * T,
                  "bw": 2.0e12, "mem": 80e9},
    "h100 nvl": {"flops": {"float16": 835 * T, "bfloat16": 835 * T, "float32": 418 * T}, "float32_full": 60 * T,
                 "bw": 3.9e12, "mem": 94e9},
    "h200 sxm": {"flops": {"float16": 989 * T, "bfloat16": 989 * T, "float32": 495 * T}, "float32_full": 67 * T,
                 "bw": 4.8e12, "mem": 141e9},
    "h200 nvl": {"flops": {"float16": 835 * T, "bfloat16": 835 * T, "float32": 418 * T}, "float32_full": 60 * T,
                 "bw": 4.8e12, "mem": 141e9},
}
# How JAX device_kind strings map to PEAKS entries: the first rule whose words all appear as
# whole words of the lower-cased kind wins (words split at anything not a letter or digit), so
# "NVIDIA H100 PCIe" never falls into the SXM entry and "NVIDIA GH200 480GB" is not an H200.
# Kinds CUDA reports (JAX's device_kind is the CUDA device name): "NVIDIA H100 80GB HBM3" (SXM;
# the PCIe card has HBM2e), "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200",
# "NVIDIA H200 NVL". An H100 kind that names neither form nor HBM3 gets no spec entry (the
# measured probe is used) rather than a guess. A plain "NVIDIA H200" is taken as the SXM part.
_KIND_ORDER: list[tuple[str, tuple[str, ...]]] = [
    ("tpu v5p", ("tpu", "v5p")), ("tpu v5e", ("tpu", "v5", "lite")), ("tpu v5e", ("tpu", "v5e")),
    ("tpu v6e", ("tpu", "v6", "lite")), ("tpu v6e", ("tpu", "v6e")),
    ("tpu v2", ("tpu", "v2")), ("tpu v3", ("tpu", "v3")), ("tpu v4", ("tpu", "v4")),
    ("h100 nvl", ("h100", "nvl")), ("h100 pcie", ("h100", "pcie")),
    ("h100 sxm", ("h100", "sxm")), ("h100 sxm", ("h100", "sxm5")), ("h100 sxm", ("h100", "hbm3")),
    ("h200 nvl", ("h200", "nvl")), ("h200 sxm", ("h200",)),
    ("a100", ("a100",)), ("v100", ("v100",)),
]

#: The probe cache: ``$PARADNN_CACHE/probe.json``, default ``~/.cache/paradnn/probe.json``. Its
#: folder must be writable where a run needs the measured peak (:func:`check_cache_folder`).
CACHE_PATH = Path(os.environ.get("PARADNN_CACHE", Path.home() / ".cache" / "paradnn")) / "probe.json"
#: What to do about a probe cache folder that cannot be written.
CACHE_ADVICE = "set PARADNN_CACHE to a writable folder (it holds the probe cache; default ~/.cache/paradnn)"


def spec_name(device_kind: str) -> str | None:
    """The ``PEAKS`` entry name for a JAX device kind (see ``_KIND_ORDER``), or None for devices
    without one (CPUs, unknown accelerators, and MIG slices, which get a fraction of the chip)."""
    words = set(re.split(r"[^a-z0-9]+", device_kind.lower()))
    if "mig" in words:
        return None
    for name, needed in _KIND_ORDER:
        if words.issuperset(needed):
            return name
    return None


def spec_peak(device_kind: str) -> dict[str, Any] | None:
    """The vendor peak entry for a JAX device kind (:func:`spec_name`), or None."""
    name = spec_name(device_kind)
    return PEAKS[name] if name is not None else None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _platform.processor() or _platform.machine()


def cpu_affinity_kind(kind: str) -> str:
    """A CPU device's kind as recorded: ``kind`` itself when this process may run on every
    logical CPU of the host, else ``kind`` plus the share it may use, e.g. ``cpu (affinity 1 of
    2 logical CPUs)`` under ``taskset -c 0``. A restricted CPU is another platform: its peak
    differs (the probe cache is keyed on the kind), its records must not resume or average with
    the unrestricted ones, and figures must tell the two apart; an unrestricted CPU keeps the
    plain kind, so its record keys are those of earlier paradnn versions."""
    if not hasattr(os, "sched_getaffinity"):
        return kind
    allowed, total = len(os.sched_getaffinity(0)), os.cpu_count()
    if not total or allowed >= total:
        return kind
    return f"{kind} (affinity {allowed} of {total} logical CPUs)"


def local_device_info(info: dict[str, Any]) -> dict[str, Any]:
    """A backend's ``device_info`` as this process records it: a CPU's ``device_kind`` names a
    restricted CPU affinity (:func:`cpu_affinity_kind`), whichever framework reported it, so that
    the runner and the peak probe (keyed on the kind) agree on the platform."""
    if info.get("device_platform") != "cpu":
        return info
    return {**info, "device_kind": cpu_affinity_kind(str(info.get("device_kind") or "cpu"))}


# Seconds each git call may take when reading paradnn's source revision: a slow or hung git
# (network file system, credential prompt) must never hold up a measurement.
_GIT_TIMEOUT_S = 2.0


@functools.lru_cache(maxsize=1)
def paradnn_revision() -> str:
    """The paradnn source that is running: ``git:<commit>`` or ``git:<commit>+dirty`` when the
    package is imported from a git checkout, else ``version:<paradnn.__version__>``.

    Dirty means tracked files differ from the commit (``git status --porcelain
    --untracked-files=no``): stores, reports and other untracked files do not count. The
    package directory must itself be tracked by that checkout, so a wheel installed into a
    virtual environment that happens to live inside some git repository reports its version,
    not that repository's commit. No git, a timeout or any git failure gives the version.
    """
    import paradnn

    package_dir = Path(paradnn.__file__).resolve().parent
    # GIT_DIR/GIT_WORK_TREE from the caller's environment would point git at another repo.
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE")}

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(package_dir), *args], capture_output=True,
                                  text=True, timeout=_GIT_TIMEOUT_S, env=env)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    tracked = commit and git("ls-files", "--", "__init__.py")
    status = git("status", "--porcelain", "--untracked-files=no") if tracked else None
    if not commit or not tracked or status is None:
        return f"version:{paradnn.__version__}"
    return f"git:{commit}" + ("+dirty" if status else "")


def software_info() -> dict[str, Any]:
    """The framework-free software fields of every record: ``paradnn_version``, the paradnn
    source revision (:func:`paradnn_revision`; recorded in every row but not part of the record
    key) and ``python_version``. A backend adds its framework's (``Backend.software_info``)."""
    import paradnn

    return {
        "paradnn_version": paradnn.__version__,
        "paradnn_revision": paradnn_revision(),
        "python_version": _platform.python_version(),
    }


def device_memory_bytes(framework: str = frameworks.DEFAULT) -> int | None:
    """Memory of one device of ``framework`` in bytes (``Backend.device_memory_bytes``: the
    runtime's figure, else the spec table, else on a CPU the host's memory); None if unknown."""
    return frameworks.get(framework).device_memory_bytes()


def check_writable(folder: Path, what: str, advice: str) -> None:
    """Create ``folder`` and a file in it, or raise InfrastructureError naming it, ``what`` it
    is for, the cause (from the errno: read-only, permission denied, no space, a file where a
    folder should be) and ``advice`` on what to do (a compilation cache, the probe cache)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise InfrastructureError(f"{what} {folder} is not writable ({os_cause(exc)}); {advice}") from None


def check_cache_folder() -> None:
    """InfrastructureError (one line: the folder, the cause, :data:`CACHE_ADVICE`) unless the
    probe cache's folder can be created and written."""
    check_writable(CACHE_PATH.parent, "the probe cache folder", CACHE_ADVICE)


def host_memory_bytes() -> int | None:
    """Physical memory of this host in bytes (sysconf pages x page size), or the memory limit of
    this process's cgroup (v2 ``memory.max``) where that is smaller; None if neither is known."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 0
    try:
        text = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        cgroup = int(text) if text.isdigit() else 0
    except OSError:
        cgroup = 0
    known = [v for v in (total, cgroup) if v > 0]
    return min(known) if known else None


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
#: Seconds a probe may spend on its GEMMs before it skips the remaining (method, size) pairs
#: (each dtype keeps at least one); ``PARADNN_PROBE_BUDGET_S`` overrides it. The skipped pairs are
#: recorded (``incomplete``), so a peak that missed a method says so.
PROBE_BUDGET_S = 40.0
#: Seconds after a contended probe during which no new automatic probe runs (``paradnn probe
#: --refresh`` always measures): a busy host must not pay a probe on every run.
PROBE_RETRY_S = 3600.0
#: Contended measurements kept per host and software (the newest), as a record of the host's load.
_KEEP_CONTENDED = 5


def probe_max_cv() -> float:
    """The contention threshold on the spread: ``$PARADNN_PROBE_MAX_CV`` or :data:`PROBE_MAX_CV`."""
    return positive_env("PARADNN_PROBE_MAX_CV", PROBE_MAX_CV)


def probe_max_load() -> float:
    """The contention threshold on other processes' CPU use (cores): ``$PARADNN_PROBE_MAX_LOAD``
    or :data:`PROBE_MAX_OTHER_CORES` (:func:`paradnn.hostutil.max_other_cores`)."""
    return hostutil.max_other_cores()


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
    left out. Past ``deadline``
    (``time.perf_counter()`` seconds) the remaining pairs are skipped once one has run."""
    sizes = sizes or PROBE_PLANS["cpu"]["gemm_sizes"].get(dtype, (1024, 2048))
    by_method: dict[str, float] = {}
    skipped: list[str] = []
    best: tuple[float, str, int, Callable] | None = None
    for name, factory in methods.items():
        for n in sizes:
            if best is not None and deadline is not None and time.perf_counter() > deadline:
                skipped.append(f"{name} {n}")
                continue
            try:
                fn = factory(dtype, n)
                if fn is None:
                    continue
                flop = 2.0 * n**3 * getattr(fn, "matmuls", 1)
                rate = flop / min(_times(fn, _PROBE_REPS))
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


def nominal_cpu_flops() -> tuple[dict[str, float], str] | None:
    """The CPU's nominal peak from its cores, clock and vector width, or None where the clock
    cannot be read. Assumes two FMA units per core (server x86 cores since Skylake-SP/Zen 4) and
    doubles it for bfloat16 where the CPU has AVX512_BF16 dot products; a nominal figure, not a
    measurement: utilization divides by it only where no quiet probe is on record
    (``peak_source`` nominal), and it bounds nothing (boost clocks exceed the reported one)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    ghz, flags = None, set()
    try:
        max_khz = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()
        ghz = int(max_khz) / 1e6
    except (OSError, ValueError):
        pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz") and ghz is None:
                ghz = float(line.split(":", 1)[1]) / 1e3
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except (OSError, ValueError):
        pass
    if not ghz or not cores:
        return None
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags else 4
    fp32 = cores * ghz * 1e9 * lanes * 2 * 2
    bf16 = fp32 * 2 if "avx512_bf16" in flags else fp32
    basis = (f"{cores} cores x {ghz:.2f} GHz x {lanes} float32 lanes x 2 FMA units (assumed) x "
             f"2 FLOP/FMA" + ("; bfloat16 x2 (AVX512_BF16)" if bf16 > fp32 else ""))
    return {"float32": fp32, "bfloat16": bf16, "float16": fp32}, basis


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


@contextlib.contextmanager
def _cache_lock():
    """An exclusive lock on the probe cache, so that two probes never measure at once (each
    would see the other as load) and the second one finds the first one's result. An
    unwritable folder is an InfrastructureError (:func:`check_cache_folder`), before measuring."""
    check_cache_folder()
    with open(CACHE_PATH.with_suffix(".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _read_cache() -> dict[str, Any]:
    try:
        cache = json.loads(CACHE_PATH.read_text())
    except (OSError, ValueError):
        return {}  # missing or corrupt: measured again, not fatal
    return cache if isinstance(cache, dict) else {}


#: Why a probe of a cache written before the host's load was checked is never a denominator.
UNCHECKED_LOAD = ("measured by an earlier paradnn that judged contention by the spread alone, "
                  "without the host's load: a steadily busy host passed as quiet")


def _entries(cache: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The measurements on record for ``key``, oldest first. A cache written before measurements
    were kept as a list held one result per key, judged quiet by its spread alone: a steady
    neighbour passed (on the project's host, such an entry read 42 GFLOP/s float32 where quiet
    probes read about 150). It is kept on record, with an id fixed by its key and time so that
    every reader names it alike, and never used (``contended``, :data:`UNCHECKED_LOAD`)."""
    value = cache.get(key)
    if isinstance(value, dict) and "peak_flops" in value:
        return [{**value, "id": _legacy_id(key, str(value.get("measured_utc", ""))),
                 "contended": True, "contended_reasons": [UNCHECKED_LOAD]}]
    if isinstance(value, dict) and isinstance(value.get("measurements"), list):
        # An earlier-format entry already converted into the list carries no host load either.
        # Entries with a host load are judged again by today's rule (contention_reasons): one
        # judged contended by its bandwidth loop's spread alone is quiet.
        out = []
        for e in value["measurements"]:
            if not isinstance(e, dict):
                continue
            if "host_load" in e:
                reasons = contention_reasons(e)
                e = {**e, "contended": bool(reasons), "contended_reasons": reasons}
            elif not e.get("contended"):
                e = {**e, "contended": True, "contended_reasons": [UNCHECKED_LOAD]}
            out.append(e)
        return out
    return []


def _digest(text: str) -> str:
    """12 hex digits of ``text``'s SHA-256: the id of a figure fixed by its text."""
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _measurement_id(key: str, measured_utc: str) -> str:
    """A new measurement's id (unique: the clock's nanoseconds are part of it)."""
    import hashlib

    return hashlib.sha256(f"{key}|{measured_utc}|{time.time_ns()}".encode()).hexdigest()[:12]


def _legacy_id(key: str, measured_utc: str) -> str:
    """The id of a measurement that a cache of the earlier format kept without one: fixed by
    its key and time, so that every process that reads it gives its records the same id."""
    import hashlib

    return hashlib.sha256(f"{key}|{measured_utc}|legacy".encode()).hexdigest()[:12]


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


def on_record(framework: str = frameworks.DEFAULT) -> list[dict[str, Any]]:
    """Every probe measurement on record for this host, device and ``framework``'s software
    (quiet and contended), oldest first; reads the cache, measures nothing."""
    *_, key = _probe_context(framework)
    return list(_MEMO.get(key) or _entries(_read_cache(), key))


def _probe_context(framework: str) -> tuple[Any, dict[str, Callable], dict[str, Any], dict[str, Any], str]:
    backend = frameworks.get(framework)
    gemm_methods = frameworks.capability(framework, "gemm_methods", "measure GEMM peaks")
    info = local_device_info(backend.device_info())
    methods = gemm_methods(info["device_platform"])
    versions = _probe_versions(backend.probe_versions(), methods)
    return backend, methods, info, versions, _probe_key(info, versions)


def _answer(entries: list[dict[str, Any]], dtypes: tuple[str, ...], now: float) -> dict[str, Any] | None:
    """What a probe without ``refresh`` returns without measuring: the best quiet entry covering
    every dtype (``in_use``), else the newest contended one covering them when it is younger than
    :data:`PROBE_RETRY_S` (not in use: the host was busy a moment ago), else None (measure)."""
    quiet = [best_quiet(entries, d) for d in dtypes]
    if all(quiet):
        return {**quiet[0], "in_use": True}
    recent = [e for e in entries if not all(usable(e, d) for d in dtypes)
              and all(d in e.get("peak_flops", {}) for d in dtypes)
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
    newest contended one if younger than :data:`PROBE_RETRY_S`, else a new measurement. With
    ``refresh``: always a new one. Every measurement is stored (the cache is
    ``$PARADNN_CACHE/probe.json``), a contended one marked as such, with the reasons and the host
    load it saw; it never becomes a denominator.

    Returns ``id``, ``peak_flops`` {dtype: FLOP/s}, ``gemm`` {dtype: {method: FLOP/s}},
    ``best_method`` {dtype: method}, ``spread`` {dtype or "bandwidth": coefficient of variation},
    ``peak_bytes_per_sec`` (B/s), ``host_load`` (``other_busy_cores``: cores other processes kept
    busy during the probe, ``loadavg_1m``, ``cpus``), ``contended`` and ``contended_reasons``,
    ``incomplete`` (pairs skipped past the time budget), ``nominal_flops`` and ``nominal_basis``
    (CPUs, where readable), ``measured_utc``, ``method``, the device, host and versions, and
    ``in_use`` (whether utilization divides by it now). A reduced-precision peak is at least the
    float32 one: XLA:CPU may run reduced-precision matmuls in float32, so the float32 rate is
    attainable in such a program.
    """
    backend, methods, info, versions, key = _probe_context(framework)
    dtypes = tuple(dict.fromkeys(("float32", *dtypes)))
    # A measurement covers every dtype of PROBE_DTYPES, so that filling in a dtype later never
    # brings a second float32 measurement (and a second denominator) for the same software.
    measured = tuple(dict.fromkeys((*PROBE_DTYPES, *dtypes)))
    if not refresh:
        hit = _answer(_MEMO.get(key) or _entries(_read_cache(), key), dtypes, time.time())
        if hit is not None:
            return hit
    with _cache_lock():
        cache = _read_cache()
        entries = _entries(cache, key)
        if not refresh:
            hit = _answer(entries, dtypes, time.time())
            if hit is not None:  # another process measured it while this one waited
                _MEMO[key] = entries
                return hit
        notify(f"measuring this host's peak FLOP/s and bandwidth ({', '.join(measured)}; once per host "
               f"and software, at most about {probe_budget_s():.0f} s of GEMMs; cached in {CACHE_PATH})")
        result = _measure(backend, methods, info, versions, measured)
        result["id"] = _measurement_id(key, result["measured_utc"])
        contended = [e for e in entries if e.get("contended")][-(_KEEP_CONTENDED - 1):]
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
        cache = _keep_recent(cache, info)
        tmp = CACHE_PATH.with_suffix(f".{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(cache, indent=1))
            os.replace(tmp, CACHE_PATH)  # atomic: concurrent readers never see half a file
        except OSError as exc:  # the folder was checked: a disk that filled up since, say
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise InfrastructureError(f"the probe cache {CACHE_PATH} cannot be written ({os_cause(exc)}); "
                                      f"{CACHE_ADVICE}") from None
        _MEMO[key] = entries
    used = best_quiet(entries, "float32")
    return {**result, "in_use": used is not None and used["id"] == result["id"]}


#: Software keys kept per host and device in the probe cache (the most recently measured): several
#: installations of paradnn on one host (two Pythons, two JAX versions) share the cache, and each
#: keeps its own probe instead of expiring the other's (which made each re-probe on every run).
KEEP_SOFTWARE_KEYS = 8


def _keep_recent(cache: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    """``cache`` with at most :data:`KEEP_SOFTWARE_KEYS` keys of ``info``'s host and device
    kind, the most recently measured; other hosts' keys untouched."""
    def mine(value: Any) -> bool:
        return (isinstance(value, dict) and value.get("host") == info["host"]
                and value.get("device_kind") == info["device_kind"])

    def newest(value: dict[str, Any]) -> float:
        stamps = [e.get("measured_epoch_s", 0.0) for e in value.get("measurements") or [] if isinstance(e, dict)]
        return max([value.get("updated_epoch_s", 0.0), *stamps])

    ours = sorted((k for k, v in cache.items() if mine(v)), key=lambda k: newest(cache[k]), reverse=True)
    dropped = set(ours[KEEP_SOFTWARE_KEYS:])
    return {k: v for k, v in cache.items() if k not in dropped}


def _busy_cores_since(start: tuple[float, int, int, float] | None) -> tuple[tuple[float, int, int, float] | None, float | None]:
    """A reading of the whole host's busy CPU ticks (the aggregate ``cpu`` line of /proc/stat)
    and this process's CPU time; given an earlier reading, also the cores that other processes
    kept busy on average since it (None where /proc/stat is unreadable)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
        ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError, IndexError):
        return None, None
    t = os.times()
    now = (time.perf_counter(), sum(ticks) - ticks[3] - ticks[4], sum(ticks), t.user + t.system)
    if start is None:
        return now, None
    wall = now[0] - start[0]
    total = now[2] - start[2]
    if wall <= 0 or total <= 0:
        return now, None
    cpus = os.cpu_count() or 1
    host_cores = (now[1] - start[1]) / total * cpus
    own_cores = (now[3] - start[3]) / wall
    return now, max(0.0, host_cores - own_cores)


def _measure(backend: Any, methods: dict[str, Callable], info: dict[str, Any],
             versions: dict[str, Any], dtypes: tuple[str, ...]) -> dict[str, Any]:
    on_cpu = info["device_platform"] == "cpu"
    plan = probe_plan(info["device_platform"])
    sizes = plan["gemm_sizes"]
    budget = probe_budget_s()
    start = time.perf_counter()
    load0, _ = _busy_cores_since(None)
    # Each dtype gets its share of the budget, so that a slow one never starves the others;
    # float32 (the default dtype, and the floor of the others) gets half of it.
    weights = [2.0 if d == "float32" else 1.0 for d in dtypes]
    ends = np.cumsum(weights) / sum(weights)
    cpu0, wall0 = os.times(), time.perf_counter()
    gemm = {d: measure_gemm(d, methods, sizes.get(d), deadline=start + budget * float(end))
            for d, end in zip(dtypes, ends)}
    cpu1, gemm_wall = os.times(), time.perf_counter() - wall0
    # The CPUs the GEMMs kept busy (this process's CPU time over their wall time) against the
    # CPUs it may use: more is impossible (impossible()); on an accelerator, host threads only.
    gemm_cores = ((cpu1.user + cpu1.system - cpu0.user - cpu0.system) / gemm_wall
                  if on_cpu and gemm_wall > 0 else None)
    stream = backend.measure_bandwidth(plan["bandwidth_mib"], plan["bandwidth_calls"])
    _, other_cores = _busy_cores_since(load0)
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
        "gemm_cores_allowed": float(len(os.sched_getaffinity(0))) if on_cpu and hasattr(os, "sched_getaffinity")
        else (float(os.cpu_count() or 1) if on_cpu else None),
        "incomplete": {d: g["skipped"] for d, g in gemm.items() if g["skipped"]},
        "probe_s": time.perf_counter() - start,
        "measured_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "measured_epoch_s": time.time(),
        "method": (f"best of methods {', '.join(methods)} on square NxN matmuls (N per dtype: "
                   + "; ".join(f"{d} {sizes.get(d)}" for d in dtypes)
                   + f"), best of {_PROBE_REPS} after a warm call, winner repeated {_SPREAD_REPS}x, "
                   f"within {budget:g} s; bandwidth: {stream['method']}"),
    }
    nominal = nominal_cpu_flops() if on_cpu else None
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


def _spec_flops(entry: dict[str, Any], dtype: str, precision_used: str | None) -> tuple[float, str]:
    """(FLOP/s, which rate) of a vendor-table entry for ``dtype`` computed at the measured
    ``matmul_precision_used`` (:mod:`paradnn.precision`). The table's float32 rate is what the
    default precision reaches (TF32 on NVIDIA Ampere and later, bfloat16 passes on a TPU); a run
    measured at full float32 on a GPU divides by the non-tensor FP32 rate (``float32_full``),
    one at bfloat16 passes by the bfloat16 rate (a third of it for 3 passes, a sixth for full
    float32 on a TPU). Not yet validated on a GPU or TPU (docs/gpu.md). A label naming two
    levels (matmul and convolution) takes the faster, so that utilization is never overstated."""
    flops = entry["flops"]
    if dtype != "float32" or not precision_used:
        return flops.get(dtype, flops["float32"]), f"{dtype} rate"
    # A TPU (no float32_full) computes full float32 as 6 bfloat16 passes (JAX's BF16_BF16_F32_X6).
    by_level = {"highest": ((entry["float32_full"], "FP32 non-tensor rate") if "float32_full" in entry
                            else (flops["bfloat16"] / 6, "bfloat16 rate / 6 passes")),
                "tf32": (flops["float32"], "float32 (TF32) rate"),
                "bf16x3": (flops.get("bfloat16", flops["float32"]) / 3, "bfloat16 rate / 3 passes"),
                "bf16": (flops.get("bfloat16", flops["float32"]), "bfloat16 rate")}
    rates = [by_level[level] for level in precision.levels_of(precision_used) if level in by_level]
    return max(rates) if rates else (flops["float32"], "float32 rate")


def peaks(device_kind: str, dtype: str, backend: str | None = None, precision_used: str | None = None,
          framework: str = frameworks.DEFAULT) -> Peak:
    """The peak of one device (``backend``: its platform, cpu|gpu|tpu) for ``dtype``: the spec
    table for known accelerators (for float32, the rate of the measured ``precision_used``:
    :func:`_spec_flops`), else the best quiet probe of this host and software on record
    (measured once, :func:`measured_peak`; for a run of ``framework`` on an accelerator, see
    :func:`ceiling`). A CPU where only contended probes are on record divides by its nominal
    peak (:func:`nominal_peak`, ``source`` "nominal"): a peak measured under load would inflate
    utilization, and a stable named denominator keeps every run's utilization. An accelerator
    without a vendor entry or a quiet probe has none (``flops`` None, ``method`` says why)."""
    if backend != "cpu":
        name = spec_name(device_kind)
        if name is not None:
            entry = PEAKS[name]
            flops, rate = _spec_flops(entry, dtype, precision_used)
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
    nominal = nominal_cpu_flops()
    why = f"; no measured peak: {missing.method}" if missing is not None and missing.method else ""
    if nominal is None:
        return Peak(None, None, "none", "no quiet probe on record and no nominal peak (the CPU clock "
                    "cannot be read)" + why)
    figures, basis = nominal
    flops = figures.get(dtype, figures["float32"])
    loaded = [e.get("peak_bytes_per_sec") for e in on_record() if isinstance(e.get("peak_bytes_per_sec"), (int, float))]
    bandwidth = max(loaded) if loaded else None
    return Peak(float(flops), None if bandwidth is None else float(bandwidth), "nominal",
                basis + why, "nominal:" + _digest(basis),
                None, 0.0, None, "measured under load" if bandwidth is not None else None)


def measured_peak(dtype: str) -> Peak:
    """The best quiet probe of this host, device and software on record for ``dtype``
    (:func:`best_quiet`; :func:`probe` measures one first where none is on record), as a
    :class:`Peak` with ``source`` "measured" (and, for float32, the ``precision`` its GEMMs ran
    at); ``flops`` None and ``source`` "none" (``method`` says why) where no usable probe is on
    record."""
    answer = probe(dtypes=(dtype,))
    chosen = best_quiet(on_record(), dtype)
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
