"""The one guard every command that writes a file goes through.

* Never an input: an output path that is one of the command's input stores is refused, even with
  ``--force``.
* Never a file paradnn did not write: an existing file is replaced only when paradnn wrote it
  (its name and SHA-256 are in the folder's ledger ``.paradnn-outputs.json``) or with ``force``.
* Atomic: the content goes to a temporary file in the same folder, then ``os.replace`` puts it
  in place, so a crash or a full disk leaves the old file or the new one, never half of one.
  The file gets the mode an ordinary ``open(path, "w")`` would leave it with (a new file 0666
  less the umask, a replaced file its own), not the temporary file's 0600.
* An unwritable folder is one :class:`~paradnn.errors.ParadnnError` naming the path and the
  reason, never a traceback.
* Checked before any work: every command-line argument that names a path declares what the
  command does with it through :func:`path_type` (its argparse ``type=``). An output's suffix is
  checked while the command line is parsed, so ``--plot fig.txt`` is refused before anything is
  measured; the handler calls :func:`check_output` (inputs, foreign files) before its work and
  :func:`write_output` at the end. A test walks every subcommand's parser and fails on a path
  argument that does not declare its role (tests/test_faults.py).

How paradnn recognises its own outputs: a file is paradnn's when the ledger in its folder lists
its name with the SHA-256 of exactly its current content. The ledger is written (atomically too)
after each output; a file edited by hand, replaced by another program, or never listed is the
user's, and stays unless ``--force``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from paradnn.errors import ParadnnError, echo

#: Suffixes of the figure formats every command that saves a figure accepts (matplotlib writes
#: each, chosen by the suffix).
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")

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


#: What a command does with a path argument (:class:`PathArg.role`) -> what that means.
ROLES: dict[str, str] = {
    "output": "a file the command replaces through this guard (never an input, never a file "
              "paradnn did not write unless --force, atomically)",
    "folder": "a folder whose files the command replaces through this guard, one by one",
    "store": "a results store the command adds rows to (paradnn.store: created, or an existing "
             "paradnn store extended in place; any other file is refused, nothing is replaced)",
    "cache": "a folder of paradnn's own files, made under names of its own and moved into place "
             "whole (a folder already there is used, never overwritten)",
    "input": "a file the command only reads",
}


@dataclasses.dataclass(frozen=True)
class PathArg:
    """What a command does with one path argument: ``role`` (a key of :data:`ROLES`), ``flag``
    (as the user types it, e.g. ``"plan --csv"``), the ``suffixes`` an output may have
    (lower-case, with the dot; empty: any), and whether ``-`` means standard output."""

    role: str
    flag: str
    suffixes: tuple[str, ...] = ()
    stdout: bool = False

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"PathArg role {self.role!r}; allowed: {', '.join(ROLES)}")

    def parse(self, text: str) -> str:
        """``text`` if it can name this argument's path; ParadnnError naming the value and what
        is allowed otherwise (argparse puts the flag in front). Reads nothing but the path's
        kind (file, folder)."""
        if self.stdout and text == "-":
            return text
        if not text or "\0" in text:
            raise ParadnnError(f"{echo(text)}: allowed: a path")
        if self.role == "output":
            if self.suffixes and Path(text).suffix.lower() not in self.suffixes:
                allowed = ", ".join(self.suffixes[:-1]) + (" or " if len(self.suffixes) > 1 else "") \
                    + self.suffixes[-1]
                raise ParadnnError(f"{echo(text)}: allowed: a {allowed} file"
                                   + (" (or - for standard output)" if self.stdout else ""))
            if os.path.isdir(text):
                raise ParadnnError(f"{echo(text)}: is a directory; allowed: a file path")
        elif self.role in ("folder", "cache") and os.path.exists(text) and not os.path.isdir(text):
            raise ParadnnError(f"{echo(text)}: exists and is not a directory; allowed: a folder")
        return text


def path_type(role: str, flag: str, suffixes: Iterable[str] = (), stdout: bool = False,
              then: Callable[[str], str] | None = None) -> Callable[[str], str]:
    """An argparse ``type=`` for a path argument that declares its ``role`` (:class:`PathArg`):
    the path is checked while the command line is parsed (a wrong suffix, a folder given for a
    file) and a refused value is argparse's one-line usage error (exit 2). ``then``: a further
    check of the same value (e.g. :func:`paradnn.store.check_store`), whose ParadnnError is
    turned into the same usage error. The returned function carries the PathArg as
    ``paradnn_path`` (:func:`path_arg`)."""
    spec = PathArg(role, flag, tuple(s.lower() for s in suffixes), stdout)

    def convert(text: str) -> str:
        try:
            value = spec.parse(text)
            return then(value) if then is not None and value != "-" else value
        except ParadnnError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = f"{role} path"
    convert.paradnn_path = spec  # type: ignore[attr-defined]
    return convert


def path_arg(action: argparse.Action) -> PathArg | None:
    """The :class:`PathArg` an argparse action declared through :func:`path_type`, else None."""
    return getattr(action.type, "paradnn_path", None)


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
        # mkstemp makes its file 0600, and ``write`` may have put another file in its place:
        # the output gets the mode an ordinary open(out, "w") would leave it with.
        os.chmod(tmp, _mode_for(out))
        os.replace(tmp, out)
    except OSError as exc:
        raise ParadnnError(f"{flag} {out}: writing failed: {exc.strerror or exc}; "
                           "nothing was replaced") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    _note(out)
    return out


def umask() -> int:
    """This process's umask, read without changing it where the system says it
    (``/proc/self/status``); elsewhere set and put back at once (``os.umask`` only swaps)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The permission bits an ordinary ``open(path, "w")`` gives a new file: 0666 less the
    umask (0644 under the usual umask 0022)."""
    return 0o666 & ~umask()


def _mode_for(out: Path) -> int:
    """The permission bits ``open(out, "w")`` would leave ``out`` with: an existing file's own
    (opening it keeps them), else :func:`new_file_mode`."""
    try:
        return stat.S_IMODE(os.stat(out).st_mode)
    except OSError:
        return new_file_mode()


def _note(out: Path) -> None:
    ledger = _ledger(out.parent)
    ledger[out.name] = _sha256(out)
    try:
        fd, name = tempfile.mkstemp(prefix=f"{LEDGER}.", suffix=".tmp", dir=out.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(ledger, f, indent=1, sort_keys=True)
        os.chmod(name, _mode_for(out.parent / LEDGER))  # as open() would, not mkstemp's 0600
        os.replace(name, out.parent / LEDGER)
    except OSError:
        # The output itself is in place; without the ledger entry the next write to this path
        # needs --force, which errs on the side of keeping the file.
        pass
