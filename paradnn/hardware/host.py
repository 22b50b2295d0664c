"""Host facts: the CPU model and affinity, the paradnn revision and software fields, device and
host memory, whether a folder is writable, the CPU's nominal peak and the load other processes
put on the host."""

from __future__ import annotations

import functools
import os
import platform as _platform
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from paradnn import frameworks
from paradnn.envcheck import os_cause
from paradnn.errors import InfrastructureError


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


def busy_cores_since(start: tuple[float, int, int, float] | None) -> tuple[tuple[float, int, int, float] | None, float | None]:
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
