"""A cache of the JAX backend's analyses that depend only on the workload, never on a run.

A sweep measures each config once per repeat, dtype, resume and re-run, and much of a small
config's wall time is analyses whose answer is fixed by the workload and the software: the memory
breakdown's residual split (two abstract evaluations), the unrolled loop variants' cost analysis
of scanned models (two compiles), which step loop the measured program uses (a lowering), the
analytic FLOP count of models without a closed form (a walk over the step's jaxpr, a trace), the
initial state and synthetic batch (a compile and a run, from a fixed seed), and the measured
program this host compiled, serialized with its abstract inputs (``JaxBackend.compile``), so
that a warm run neither traces nor lowers it. Each is kept here
under a key made of the workload's key and a fingerprint of everything else that could change the
answer: paradnn's own source files (by content, so a dirty checkout invalidates it too), the
versions of JAX, jaxlib, Flax and optax, ``XLA_FLAGS``, and the device platform and kind. Every
other compiled program is JAX's persistent compilation cache's job; this cache sits in the
``analyses`` folder inside it (:func:`configure`, called by ``JaxBackend.configure_cache``), so
``--no-cache`` turns both off. Within one process answers are also kept in memory.

Entries are written atomically (a temporary file renamed into place); an unreadable or
truncated entry is a miss, and a failed write leaves the measurement as it is (a cache only
saves time; the value is always the one computed).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import flax
import jax
import jaxlib
import optax

#: Initial states and batches larger than this (B) are not kept on disk: reading them back
#: would cost about what computing them does, and the folder would grow with the sweep.
MAX_STATE_BYTES = 64 * 2**20

_folder: Path | None = None
_memory: dict[str, Any] = {}


def configure(path: str | os.PathLike | None) -> Callable[[], None]:
    """Keep entries in ``path``/analyses from now on (None: in memory only); returns the
    function that restores the previous folder."""
    global _folder
    previous = _folder
    _folder = None if path is None else Path(path) / "analyses"

    def restore() -> None:
        global _folder
        _folder = previous

    return restore


def enabled() -> bool:
    """Whether entries are kept in a folder (:func:`configure`), not only in memory."""
    return _folder is not None


@functools.lru_cache(maxsize=None)
def fingerprint() -> str:
    """What every answer depends on besides the workload (module docstring), hashed."""
    import paradnn

    h = hashlib.sha256()
    root = Path(paradnn.__file__).resolve().parent
    for source in sorted(root.rglob("*.py")):
        h.update(str(source.relative_to(root)).encode())
        h.update(source.read_bytes())
    device = jax.devices()[0]
    h.update(json.dumps([jax.__version__, jaxlib.__version__, flax.__version__, optax.__version__,
                         os.environ.get("XLA_FLAGS", ""), device.platform, device.device_kind,
                         len(jax.devices())]).encode())
    return h.hexdigest()[:16]


def entry_key(kind: str, workload_key: str) -> str:
    """The key of analysis ``kind`` of the workload with key ``workload_key``."""
    return f"{kind}-{workload_key}-{fingerprint()}"


def _path(key: str, suffix: str) -> Path | None:
    return None if _folder is None else _folder / f"{key}{suffix}"


def _write(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError:
        pass  # a cache: the value was computed and is used either way


def lookup(kind: str, workload_key: str) -> Any | None:
    """The kept JSON-able answer of analysis ``kind`` for a workload, None if there is none."""
    key = entry_key(kind, workload_key)
    if key in _memory:
        return _memory[key]
    path = _path(key, ".json")
    if path is not None:
        try:
            value = json.loads(path.read_text())["value"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        _memory[key] = value
        return value
    return None


def store(kind: str, workload_key: str, value: Any) -> None:
    """Keep the JSON-able ``value`` as the answer of analysis ``kind`` for a workload."""
    key = entry_key(kind, workload_key)
    _memory[key] = value
    path = _path(key, ".json")
    if path is not None:
        _write(path, json.dumps({"kind": kind, "workload": workload_key, "value": value}).encode())


def cached_json(kind: str, workload_key: str, compute: Callable[[], Any]) -> Any:
    """The JSON-able answer of analysis ``kind`` for a workload: kept, or ``compute()`` (then
    kept)."""
    value = lookup(kind, workload_key)
    if value is None:
        value = compute()
        store(kind, workload_key, value)
    return value


def load_blob(kind: str, workload_key: str) -> bytes | None:
    """The bytes kept for analysis ``kind`` of a workload (:func:`save_blob`), None if none."""
    path = _path(entry_key(kind, workload_key), ".bin")
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError:
        return None


def save_blob(kind: str, workload_key: str, data: bytes) -> None:
    """Keep ``data`` for analysis ``kind`` of a workload (only with a folder: :func:`configure`)."""
    path = _path(entry_key(kind, workload_key), ".bin")
    if path is not None:
        _write(path, data)


def _leaves(tree: Any) -> list[Any]:
    return jax.tree_util.tree_leaves(tree)


def load_arrays(kind: str, workload_key: str, shapes: Any) -> Any | None:
    """The tree of numpy arrays stored for ``shapes`` (a tree of ``ShapeDtypeStruct``), None
    when there is none (or it does not match the shapes' bytes)."""
    import numpy as np

    path = _path(entry_key(kind, workload_key), ".bin")
    if path is None:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    leaves, out, offset = _leaves(shapes), [], 0
    for s in leaves:
        dtype = np.dtype(s.dtype)
        n = int(np.prod(s.shape, dtype=np.int64)) * dtype.itemsize
        if offset + n > len(data):
            return None
        out.append(np.frombuffer(data, dtype=dtype, count=n // dtype.itemsize if dtype.itemsize else 0,
                                 offset=offset).reshape(s.shape))
        offset += n
    if offset != len(data):
        return None
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shapes), out)


def storable(shapes: Any) -> bool:
    """Whether a tree of ``ShapeDtypeStruct`` may be kept: plain numeric dtypes (no PRNG key
    arrays), at most :data:`MAX_STATE_BYTES` in all, and a folder to keep it in."""
    import numpy as np

    if _folder is None:
        return False
    total = 0
    for s in _leaves(shapes):
        if jax.dtypes.issubdtype(s.dtype, jax.dtypes.prng_key):
            return False
        total += int(np.prod(s.shape, dtype=np.int64)) * np.dtype(s.dtype).itemsize
    return total <= MAX_STATE_BYTES


def save_arrays(kind: str, workload_key: str, tree: Any) -> None:
    """Keep a tree of arrays (device arrays are copied to the host) for :func:`load_arrays`."""
    import numpy as np

    path = _path(entry_key(kind, workload_key), ".bin")
    if path is None:
        return
    _write(path, b"".join(np.ascontiguousarray(np.asarray(x)).tobytes() for x in _leaves(tree)))
