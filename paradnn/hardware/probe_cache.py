"""The probe cache (``$PARADNN_CACHE/probe.json``) with its lock: reading its measurements (an
earlier format's judged again), their ids, writing it, and how many keys and contended entries
it keeps."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from paradnn.envcheck import os_cause
from paradnn.errors import InfrastructureError
from paradnn.hardware.host import check_writable
from paradnn.hardware.quality import contention_reasons

#: The probe cache: ``$PARADNN_CACHE/probe.json``, default ``~/.cache/paradnn/probe.json``. Its
#: folder must be writable where a run needs the measured peak (:func:`check_cache_folder`).
CACHE_PATH = Path(os.environ.get("PARADNN_CACHE", Path.home() / ".cache" / "paradnn")) / "probe.json"
#: What to do about a probe cache folder that cannot be written.
CACHE_ADVICE = "set PARADNN_CACHE to a writable folder (it holds the probe cache; default ~/.cache/paradnn)"


def check_cache_folder() -> None:
    """InfrastructureError (one line: the folder, the cause, :data:`CACHE_ADVICE`) unless the
    probe cache's folder can be created and written."""
    check_writable(CACHE_PATH.parent, "the probe cache folder", CACHE_ADVICE)


#: Contended measurements kept per host and software (the newest), as a record of the host's load.
KEEP_CONTENDED = 5


@contextlib.contextmanager
def cache_lock():
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


def read_cache() -> dict[str, Any]:
    """The probe cache file's contents (key -> entry); empty where the file is missing, corrupt
    or not a JSON object."""
    try:
        cache = json.loads(CACHE_PATH.read_text())
    except (OSError, ValueError):
        return {}  # missing or corrupt: measured again, not fatal
    return cache if isinstance(cache, dict) else {}


#: Why a probe of a cache written before the host's load was checked is never a denominator.
UNCHECKED_LOAD = ("measured by an earlier paradnn that judged contention by the spread alone, "
                  "without the host's load: a steadily busy host passed as quiet")


def entries_of(cache: dict[str, Any], key: str) -> list[dict[str, Any]]:
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


def digest(text: str) -> str:
    """12 hex digits of ``text``'s SHA-256: the id of a figure fixed by its text."""
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:12]


def measurement_id(key: str, measured_utc: str) -> str:
    """A new measurement's id (unique: the clock's nanoseconds are part of it)."""
    import hashlib

    return hashlib.sha256(f"{key}|{measured_utc}|{time.time_ns()}".encode()).hexdigest()[:12]


def _legacy_id(key: str, measured_utc: str) -> str:
    """The id of a measurement that a cache of the earlier format kept without one: fixed by
    its key and time, so that every process that reads it gives its records the same id."""
    import hashlib

    return hashlib.sha256(f"{key}|{measured_utc}|legacy".encode()).hexdigest()[:12]


#: Software keys kept per host and device in the probe cache (the most recently measured): several
#: installations of paradnn on one host (two Pythons, two JAX versions) share the cache, and each
#: keeps its own probe instead of expiring the other's (which made each re-probe on every run).
KEEP_SOFTWARE_KEYS = 8


def keep_recent(cache: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
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


def write_cache(cache: dict[str, Any]) -> None:
    """Replace the probe cache file by ``cache`` (JSON), atomically: concurrent readers never see
    half a file. InfrastructureError (the file, the cause, :data:`CACHE_ADVICE`) where it cannot
    be written."""
    tmp = CACHE_PATH.with_suffix(f".{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(cache, indent=1))
        os.replace(tmp, CACHE_PATH)  # atomic: concurrent readers never see half a file
    except OSError as exc:  # the folder was checked: a disk that filled up since, say
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise InfrastructureError(f"the probe cache {CACHE_PATH} cannot be written ({os_cause(exc)}); "
                                  f"{CACHE_ADVICE}") from None
