"""Device detection, the accelerator peak table, and measured peaks (``paradnn probe``).

Utilization uses the vendor peak of a known device (``peak_source = "spec"``) and otherwise the
GEMM FLOPS and memory bandwidth that :func:`probe` measured on this host with this software,
cached under ``~/.cache/paradnn/probe.json`` (``peak_source = "measured"``).
"""

from __future__ import annotations

import functools
import json
import os
import platform as _platform
import socket
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

T = 1e12
# JAX device_kind substring (lower case) -> (per-device FLOP/s by dtype, per-device bytes/s, memory B).
# Dense peaks (REFERENCE.md section 4), never "sparse" ones. TPU v2/v3 chips expose one JAX
# device per TensorCore, so the chip figures are halved. TPU float32 matmuls run as bfloat16
# passes at default precision, and JAX's default float32 matmul on Ampere/Hopper uses TF32
# tensor cores: those float32 peaks are the ones that the default precision can reach.
PEAKS: dict[str, dict[str, Any]] = {
    "tpu v2": {"flops": {"bfloat16": 45 * T / 2, "float32": 45 * T / 2}, "bw": 600e9 / 2, "mem": 8 * 2**30},
    "tpu v3": {"flops": {"bfloat16": 123 * T / 2, "float32": 123 * T / 2}, "bw": 900e9 / 2, "mem": 16 * 2**30},
    "tpu v4": {"flops": {"bfloat16": 275 * T, "float32": 275 * T}, "bw": 1200e9, "mem": 32 * 2**30},
    "tpu v5 lite": {"flops": {"bfloat16": 197 * T, "float32": 197 * T}, "bw": 819e9, "mem": 16e9},
    "tpu v5e": {"flops": {"bfloat16": 197 * T, "float32": 197 * T}, "bw": 819e9, "mem": 16e9},
    "tpu v5p": {"flops": {"bfloat16": 459 * T, "float32": 459 * T}, "bw": 2765e9, "mem": 95e9},
    "tpu v6 lite": {"flops": {"bfloat16": 918 * T, "float32": 918 * T}, "bw": 1638e9, "mem": 32e9},
    "tpu v6e": {"flops": {"bfloat16": 918 * T, "float32": 918 * T}, "bw": 1638e9, "mem": 32e9},
    "v100": {"flops": {"float16": 125 * T, "bfloat16": 15.7 * T, "float32": 15.7 * T}, "bw": 900e9, "mem": 16e9},
    "a100": {"flops": {"float16": 312 * T, "bfloat16": 312 * T, "float32": 156 * T}, "bw": 2039e9, "mem": 80e9},
    "h100": {"flops": {"float16": 989 * T, "bfloat16": 989 * T, "float32": 495 * T}, "bw": 3.35e12, "mem": 80e9},
    "h200": {"flops": {"float16": 989 * T, "bfloat16": 989 * T, "float32": 495 * T}, "bw": 4.8e12, "mem": 141e9},
}
# Order matters: "tpu v5p" must be tried before the generic "tpu v5" forms.
_KIND_ORDER = ["tpu v5p", "tpu v5 lite", "tpu v5e", "tpu v6 lite", "tpu v6e", "tpu v2", "tpu v3", "tpu v4",
               "h200", "h100", "a100", "v100"]

CACHE_PATH = Path(os.environ.get("PARADNN_CACHE", Path.home() / ".cache" / "paradnn")) / "probe.json"


def spec_peak(device_kind: str) -> dict[str, Any] | None:
    """The vendor peak entry for a JAX device kind, or None for unknown devices (CPUs)."""
    kind = device_kind.lower()
    for name in _KIND_ORDER:
        if name in kind:
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


def platform_info() -> dict[str, Any]:
    """backend, device_kind, device_count, host, cpu_model of the default JAX backend."""
    devices = jax.devices()
    return {
        "backend": devices[0].platform,
        "device_kind": devices[0].device_kind,
        "device_count": len(devices),
        "host": socket.gethostname(),
        "cpu_model": cpu_model(),
    }


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
    """Versions of everything that shapes a measurement, and the paradnn source revision
    (:func:`paradnn_revision`; recorded in every row but not part of the record key)."""
    import flax
    import jaxlib
    import optax

    import paradnn

    return {
        "paradnn_version": paradnn.__version__,
        "paradnn_revision": paradnn_revision(),
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "flax_version": flax.__version__,
        "optax_version": optax.__version__,
        # The JAX backend runs no TensorFlow; a TF backend will record its version here. Never
        # "whatever happens to be imported": the version is part of the resume key.
        "tf_version": None,
        "python_version": _platform.python_version(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }


def device_memory_bytes() -> int | None:
    """Memory of one device in bytes: from the runtime where it reports it, else the spec table,
    else None (CPUs: pass a memory limit explicitly)."""
    device = jax.devices()[0]
    try:
        stats = device.memory_stats()
    except Exception:  # some backends raise instead of returning None
        stats = None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    entry = spec_peak(device.device_kind)
    return int(entry["mem"]) if entry else None


def _probe_key(info: dict[str, Any], sw: dict[str, Any]) -> str:
    return "|".join(str(x) for x in (info["host"], info["backend"], info["device_kind"], info["cpu_model"],
                                     sw["jax_version"], sw["jaxlib_version"], sw["xla_flags"]))


def _best_time(fn, *args, reps: int) -> float:
    jax.block_until_ready(fn(*args))  # compile and warm
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t0)
    return best


def measure_gemm(dtype: str, sizes: tuple[int, ...] = (1024, 2048, 4096), reps: int = 3) -> float:
    """Best square-matmul throughput in FLOP/s (2*N^3 per product) over ``sizes``."""
    best = 0.0
    for n in sizes:
        key = jax.random.key(n)
        a = jax.random.normal(key, (n, n), jnp.float32).astype(dtype)
        b = jax.random.normal(jax.random.fold_in(key, 1), (n, n), jnp.float32).astype(dtype)
        t = _best_time(jax.jit(jnp.dot), a, b, reps=reps)
        best = max(best, 2.0 * n**3 / t)
    return best


def measure_bandwidth(megabytes: int = 256, reps: int = 5) -> float:
    """Best streaming bandwidth in B/s: read and write one float32 array in place (donated)."""
    n = megabytes * 2**20 // 4
    f = jax.jit(lambda x: x * 1.0001 + 1.0, donate_argnums=0)
    x = jnp.zeros((n,), jnp.float32)
    x = jax.block_until_ready(f(x))
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        x = jax.block_until_ready(f(x))
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n * 4 / best


def probe(refresh: bool = False, dtypes: tuple[str, ...] = ("float32", "bfloat16", "float16")) -> dict[str, Any]:
    """Measure (or read from the cache) the GEMM peak per dtype and the memory bandwidth of the
    current device. Returns ``device_kind``, ``peak_flops`` {dtype: FLOP/s},
    ``peak_bytes_per_sec`` (B/s), ``spec`` (the vendor entry if known), host and versions."""
    info, sw = platform_info(), software_info()
    key = _probe_key(info, sw)
    cache: dict[str, Any] = {}
    if CACHE_PATH.exists():
        try:
            cache = json.loads(CACHE_PATH.read_text())
        except (OSError, ValueError):
            cache = {}  # a corrupt cache is re-measured, not fatal
    result = {} if refresh else dict(cache.get(key, {}))
    missing = [d for d in dtypes if d not in result.get("peak_flops", {})]
    if not missing and "peak_bytes_per_sec" in result:
        return result
    result.update(info)
    result.update(jax_version=sw["jax_version"], jaxlib_version=sw["jaxlib_version"])
    result["peak_flops"] = {
        **result.get("peak_flops", {}),
        **{d: measure_gemm(d, sizes=(1024, 2048, 4096) if d == "float32" else (1024, 2048)) for d in missing},
    }
    if "peak_bytes_per_sec" not in result:
        result["peak_bytes_per_sec"] = measure_bandwidth()
    result["measured_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result["method"] = ("best of 3 jnp.dot NxN (N=1024,2048,4096 fp32; 1024,2048 others); "
                        "bandwidth: in-place x*a+b on 256 MiB fp32, donated, best of 5")
    entry = spec_peak(info["device_kind"]) if info["backend"] != "cpu" else None
    result["spec"] = entry and {"peak_flops": entry["flops"], "peak_bytes_per_sec": entry["bw"]}
    cache[key] = result
    CACHE_PATH.parent.mkdir(parents=True, exist_ok=True)
    tmp = CACHE_PATH.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cache, indent=1))
    os.replace(tmp, CACHE_PATH)  # atomic: concurrent sweep children never read half a file
    return result


def peaks(device_kind: str, dtype: str, backend: str | None = None) -> tuple[float, float, str]:
    """(peak FLOP/s, peak B/s, source) of one device for ``dtype``: the spec table for known
    accelerators, else the measured probe of this host (run once and cached)."""
    if backend != "cpu":
        entry = spec_peak(device_kind)
        if entry is not None:
            flops = entry["flops"].get(dtype, entry["flops"]["float32"])
            return float(flops), float(entry["bw"]), "spec"
    measured = probe(dtypes=(dtype,))
    return float(measured["peak_flops"][dtype]), float(measured["peak_bytes_per_sec"]), "measured"
