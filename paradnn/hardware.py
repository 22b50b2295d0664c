"""Host facts, the accelerator peak table, and measured peaks (``paradnn probe``).

Utilization uses the vendor peak of a known device (``peak_source = "spec"``) and otherwise the
GEMM FLOPS and memory bandwidth that :func:`probe` measured on this host with this software,
cached under ``~/.cache/paradnn/probe.json`` (``peak_source = "measured"``).

No framework is imported here: the probe's matrix multiplications and bandwidth loop are the
capabilities ``gemm_methods``, ``measure_bandwidth`` and ``probe_versions`` of a backend
(:mod:`paradnn.backends`; JAX's by default); this module chooses, times, caches and applies them.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import math
import os
import platform as _platform
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np

from paradnn import backends
from paradnn.errors import InfrastructureError, ParadnnError

T = 1e12
# Vendor peak of one JAX device: "flops" {dtype: FLOP/s} (what utilization divides by), "bw"
# (memory bandwidth, B/s), "mem" (device memory, B). Dense vendor peaks (docs/gpu.md lists
# them), never "sparse" ones. TPU v2/v3 chips expose one JAX device per TensorCore, so the chip
# figures are halved. TPU float32 matmuls run as bfloat16 passes at default precision, and JAX's
# default float32 matmul on Ampere/Hopper uses TF32 tensor cores (JAX's "Matmul precision"
# docs: "TF32 on recent GPUs" unless jax_default_matmul_precision asks for more): those float32
# peaks are the ones the default precision can reach. The GPU entries also record "float32_full", the non-tensor-core
# FP32 peak that precision="highest" (true float32) is bounded by; utilization never divides by
# it.
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

CACHE_PATH = Path(os.environ.get("PARADNN_CACHE", Path.home() / ".cache" / "paradnn")) / "probe.json"


def spec_peak(device_kind: str) -> dict[str, Any] | None:
    """The vendor peak entry for a JAX device kind (see ``_KIND_ORDER``), or None for devices
    without one (CPUs, unknown accelerators, and MIG slices, which get a fraction of the chip)."""
    words = set(re.split(r"[^a-z0-9]+", device_kind.lower()))
    if "mig" in words:
        return None
    for name, needed in _KIND_ORDER:
        if words.issuperset(needed):
            return PEAKS[name]
    return None


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
    import subprocess

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


def device_memory_bytes(framework: str = backends.DEFAULT) -> int | None:
    """Memory of one device of ``framework`` in bytes (``Backend.device_memory_bytes``: the
    runtime's figure, else the spec table, else on a CPU the host's memory); None if unknown."""
    return backends.get(framework).device_memory_bytes()


def check_writable(folder: Path, what: str, advice: str) -> None:
    """Create ``folder`` and a file in it, or raise InfrastructureError naming it, ``what`` it
    is for and ``advice`` on what to do (a compilation cache, the probe cache)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise InfrastructureError(f"{what} {folder} is not writable ({exc.strerror or exc}); "
                                  f"{advice}") from None


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
    """The peak that utilization divides by, for one device and dtype."""

    flops: float  # FLOP/s
    bytes_per_sec: float  # B/s
    source: str  # "spec" (vendor table) or "measured" (paradnn probe)
    method: str  # the table entry, or the probe method that reached it and when


#: Probe results are not cached when the winning GEMM's repeated timings spread more than this
#: (coefficient of variation): the host was busy, and a low peak would inflate utilization.
#: ``PARADNN_PROBE_MAX_CV`` overrides it (e.g. on a shared CI host, where no peak is published).
PROBE_MAX_CV = 0.10


def probe_max_cv() -> float:
    """The contention threshold in force: ``$PARADNN_PROBE_MAX_CV`` or :data:`PROBE_MAX_CV`."""
    raw = os.environ.get("PARADNN_PROBE_MAX_CV")
    try:
        value = float(raw) if raw is not None else PROBE_MAX_CV
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ParadnnError(f"invalid PARADNN_PROBE_MAX_CV={raw!r}: allowed a positive number")
    return value
#: Square GEMM sizes N per dtype (FLOPs 2 N^3): large enough to reach the BLAS plateau, small
#: enough that a probe takes seconds on a 2-core host.
_PROBE_SIZES = {"float32": (2048, 3072), "bfloat16": (1024, 2048), "float16": (1024, 2048)}
_PROBE_REPS = 2  # timed repetitions per method and size (after one warm call), best taken
_SPREAD_REPS = 5  # repetitions of the winner, whose spread decides whether the probe is cached

# In-process results: a probe too noisy to cache is still measured only once per process.
_MEMO: dict[str, dict[str, Any]] = {}


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
                 sizes: tuple[int, ...] | None = None) -> dict[str, Any]:
    """Square-matmul throughput of every method (name -> factory(dtype, N) of a zero-argument
    call that multiplies two NxN matrices and waits for the result; None where the method lacks
    the dtype) for ``dtype``: ``{"by_method": {name: FLOP/s},
    "best_method", "best_size", "flops"` (best FLOP/s), ``"cv"`` (spread of the winner over
    repeated runs)}. A method that fails (an unknown compiler option) is left out."""
    sizes = sizes or _PROBE_SIZES.get(dtype, (1024, 2048))
    by_method: dict[str, float] = {}
    best: tuple[float, str, int, Callable] | None = None
    for name, factory in methods.items():
        for n in sizes:
            try:
                fn = factory(dtype, n)
            except Exception:  # noqa: BLE001 - a library path this build lacks is just absent
                fn = None
            if fn is None:
                continue
            rate = 2.0 * n**3 / min(_times(fn, _PROBE_REPS))
            by_method[name] = max(by_method.get(name, 0.0), rate)
            if best is None or rate > best[0]:
                best = (rate, name, n, fn)
    if best is None:
        raise RuntimeError(f"no GEMM method ran for dtype {dtype}")
    rate, name, n, fn = best
    spread = _times(fn, _SPREAD_REPS, warm=False)
    # The best of all repetitions is the peak; the spread says whether the host was quiet.
    rate = max(rate, 2.0 * n**3 / min(spread))
    by_method[name] = rate
    return {"by_method": by_method, "best_method": name, "best_size": n, "flops": rate,
            "cv": _cv(spread)}


def nominal_cpu_flops() -> tuple[dict[str, float], str] | None:
    """The CPU's nominal peak from its cores, clock and vector width, or None where the clock
    cannot be read. Assumes two FMA units per core (server x86 cores since Skylake-SP/Zen 4) and
    doubles it for bfloat16 where the CPU has AVX512_BF16 dot products; a nominal figure, not a
    measurement: utilization never divides by it."""
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
    (its framework and compiler versions and flags), numpy's and paradnn's versions and the
    method names. The result expires when any of these change."""
    import paradnn

    return {**versions, "numpy": np.__version__, "paradnn": paradnn.__version__,
            "methods": sorted(methods)}


def _probe_key(info: dict[str, Any], versions: dict[str, Any]) -> str:
    return "|".join(str(x) for x in (info["host"], info["device_platform"], info["device_kind"],
                                     info["cpu_model"], json.dumps(versions, sort_keys=True)))


@contextlib.contextmanager
def _cache_lock():
    """An exclusive lock on the probe cache, so that two probes never measure at once (each
    would see the other as load) and the second one finds the first one's result."""
    CACHE_PATH.parent.mkdir(parents=True, exist_ok=True)
    with open(CACHE_PATH.with_suffix(".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _read_cache() -> dict[str, Any]:
    try:
        return json.loads(CACHE_PATH.read_text())
    except (OSError, ValueError):
        return {}  # missing or corrupt: measured again, not fatal


def probe(refresh: bool = False, dtypes: tuple[str, ...] = ("float32", "bfloat16", "float16"),
          framework: str = backends.DEFAULT) -> dict[str, Any]:
    """Measure (or read from the cache) the best GEMM FLOP/s per dtype and the memory bandwidth
    of the current device, with ``framework``'s probe methods (``Backend.gemm_methods``,
    ``measure_bandwidth``, ``probe_versions``; the reference framework's by default, so that
    every framework's utilization on a CPU divides by the same measured peak).

    Returns ``peak_flops`` {dtype: FLOP/s}, ``gemm`` {dtype: {method: FLOP/s}}, ``best_method``
    {dtype: method}, ``spread`` {dtype or "bandwidth": coefficient of variation},
    ``peak_bytes_per_sec`` (B/s), ``nominal_flops`` and ``nominal_basis`` (CPUs, where readable),
    ``contended`` (True: too noisy, not cached), ``measured_utc``, ``method``, the device,
    host and versions. A reduced-precision peak is at least the float32 one: XLA:CPU may run
    reduced-precision matmuls in float32, so the float32 rate is attainable in such a program.
    """
    backend = backends.get(framework)
    gemm_methods = backends.capability(framework, "gemm_methods", "measure GEMM peaks")
    info = local_device_info(backend.device_info())
    methods = gemm_methods(info["device_platform"])
    versions = _probe_versions(backend.probe_versions(), methods)
    key = _probe_key(info, versions)
    if not refresh:
        hit = _MEMO.get(key) or _read_cache().get(key)
        if hit and all(d in hit.get("peak_flops", {}) for d in dtypes):
            return hit
    with _cache_lock():
        cache = _read_cache()
        if not refresh and key in cache and all(d in cache[key].get("peak_flops", {}) for d in dtypes):
            return cache[key]  # another process measured it while this one waited
        result = _measure(backend, methods, info, versions, tuple(dict.fromkeys(("float32", *dtypes))))
        _MEMO[key] = result
        if not result["contended"]:
            # Entries of this host and device from other software versions have expired.
            same = {k for k, v in cache.items() if v.get("host") == info["host"]
                    and v.get("device_kind") == info["device_kind"]}
            cache = {k: v for k, v in cache.items() if k not in same}
            cache[key] = result
            tmp = CACHE_PATH.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(cache, indent=1))
            os.replace(tmp, CACHE_PATH)  # atomic: concurrent readers never see half a file
    return result


def _measure(backend: Any, methods: dict[str, Callable], info: dict[str, Any],
             versions: dict[str, Any], dtypes: tuple[str, ...]) -> dict[str, Any]:
    on_cpu = info["device_platform"] == "cpu"
    gemm = {d: measure_gemm(d, methods) for d in dtypes}
    stream = backend.measure_bandwidth()
    bandwidth, bw_cv = stream["bytes_per_sec"], stream["cv"]
    peak_flops = {d: max(g["flops"], gemm["float32"]["flops"]) for d, g in gemm.items()}
    best_method = {d: g["best_method"] if g["flops"] >= gemm["float32"]["flops"]
                   else f"float32 {gemm['float32']['best_method']}" for d, g in gemm.items()}
    spread = {d: g["cv"] for d, g in gemm.items()}
    spread["bandwidth"] = bw_cv
    result: dict[str, Any] = {
        **info, "versions": versions, "framework": backend.name,
        "peak_flops": peak_flops, "gemm": {d: g["by_method"] for d, g in gemm.items()},
        "best_method": best_method, "spread": spread, "peak_bytes_per_sec": bandwidth,
        "contended": max(spread.values()) > probe_max_cv(),
        "max_cv": probe_max_cv(),
        "measured_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "method": (f"best of methods {', '.join(methods)} on square NxN matmuls (N per dtype: "
                   + "; ".join(f"{d} {_PROBE_SIZES.get(d)}" for d in dtypes)
                   + f"), best of {_PROBE_REPS} after a warm call, winner repeated {_SPREAD_REPS}x; "
                   f"bandwidth: {stream['method']}"),
    }
    nominal = nominal_cpu_flops() if on_cpu else None
    result["nominal_flops"] = nominal[0] if nominal else None
    result["nominal_basis"] = nominal[1] if nominal else None
    entry = spec_peak(info["device_kind"]) if not on_cpu else None
    result["spec"] = entry and {"peak_flops": entry["flops"], "peak_bytes_per_sec": entry["bw"]}
    return result


def peaks(device_kind: str, dtype: str, backend: str | None = None) -> Peak:
    """The peak of one device for ``dtype``: the spec table for known accelerators, else the
    measured probe of this host (run once and cached; see :func:`probe`)."""
    if backend != "cpu":
        entry = spec_peak(device_kind)
        if entry is not None:
            flops = entry["flops"].get(dtype, entry["flops"]["float32"])
            return Peak(float(flops), float(entry["bw"]), "spec", f"vendor table: {device_kind}")
    measured = probe(dtypes=(dtype,))
    method = (f"measured {measured['measured_utc']}: best of {', '.join(measured['gemm'][dtype])}"
              f" -> {measured['best_method'][dtype]}"
              + (" (contended host: not cached)" if measured["contended"] else ""))
    return Peak(float(measured["peak_flops"][dtype]), float(measured["peak_bytes_per_sec"]),
                "measured", method)
