"""The one guard every command that writes a file goes through.

* Never an input: an output path that is one of the command's input stores is refused, even with
  ``--force``.
* Never a file paradnn did not write: an existing file is replaced only when paradnn wrote it
  (its name and SHA-256 are in the folder's ledger ``.paradnn-outputs.json``) or with ``force``.
* Atomic: the content goes to a temporary file in the same folder, then ``os.replace`` puts it
  in place, so a crash or a full disk leaves the old file or the new one, never half of one.
* An unwritable folder is one :class:`~paradnn.errors.ParadnnError` naming the path and the
  reason, never a traceback.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from paradnn.errors import ParadnnError

#: File in each output folder listing what paradnn wrote there: name -> SHA-256 of the content.
LEDGER = ".paradnn-outputs.json"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _ledger(folder: Path) -> dict[str, str]:
    try:
        data = json.loads((folder / LEDGER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def written_by_paradnn(path: Path) -> bool:
    """Whether ``path`` holds exactly what paradnn last wrote there (ledger name and hash)."""
    try:
        return _ledger(path.parent).get(path.name) == _sha256(path)
    except OSError:
        return False


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def check_output(path: str | os.PathLike, flag: str = "-o", inputs: Iterable[str | os.PathLike] = (),
                 force: bool = False) -> Path:
    """Refuse ``path`` as an output if it is an input, or an existing file paradnn did not write
    (unless ``force``); returns it as a Path."""
    out = Path(path)
    for given in inputs:
        if _same_file(out, Path(given)) or out.resolve() == Path(given).resolve():
            raise ParadnnError(f"{flag} {out}: is also an input ({given}); name a different output")
    if out.is_dir():
        raise ParadnnError(f"{flag} {out}: is a directory; allowed: a file path")
    if out.exists() or out.is_symlink():
        if not out.is_file():
            raise ParadnnError(f"{flag} {out}: exists and is not a regular file")
        if not force and not written_by_paradnn(out):
            raise ParadnnError(f"{flag} {out}: exists and was not written by paradnn; "
                               "choose another path or pass --force to replace it")
    return out


def write_output(path: str | os.PathLike, write: Callable[[Path], None], flag: str = "-o",
                 inputs: Iterable[str | os.PathLike] = (), force: bool = False) -> Path:
    """Check ``path`` (:func:`check_output`), call ``write(tmp)`` to fill a temporary file in its
    folder, move it into place atomically and note it in the folder's ledger."""
    out = check_output(path, flag, inputs, force)
    folder = out.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp" + out.suffix, dir=folder)
    except OSError as exc:
        raise ParadnnError(f"{flag} {out}: cannot write in {folder}: "
                           f"{exc.strerror or type(exc).__name__}") from None
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.replace(tmp, out)
    except OSError as exc:
        raise ParadnnError(f"{flag} {out}: writing failed: {exc.strerror or exc}; "
                           "nothing was replaced") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    _note(out)
    return out


def _note(out: Path) -> None:
    ledger = _ledger(out.parent)
    ledger[out.name] = _sha256(out)
    try:
        fd, name = tempfile.mkstemp(prefix=f"{LEDGER}.", suffix=".tmp", dir=out.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(ledger, f, indent=1, sort_keys=True)
        os.replace(name, out.parent / LEDGER)
    except OSError:
        # The output itself is in place; without the ledger entry the next write to this path
        # needs --force, which errs on the side of keeping the file.
        pass
