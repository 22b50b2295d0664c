"""TensorFlow's start-up chatter, filtered from stderr while TensorFlow starts.

Importing TensorFlow 2.21 writes lines such as::

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 00:00:1795821133.851580 5591 port.cc:153] oneDNN custom operations are on. ...
    I0000 00:00:1795821133.853700 5591 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
    E0000 00:00:1795821139.621302 5591 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: ...

from its C++ libraries, before its own logging is set up, so ``TF_CPP_MIN_LOG_LEVEL`` (which
paradnn sets to 2 unless the user chose a value) does not hide them: they carry nothing for a
paradnn user. :func:`quiet` redirects the process's file descriptor 2 through a filter while
TensorFlow is imported and finds its devices, dropping only

* TensorFlow's log lines below the ``TF_CPP_MIN_LOG_LEVEL`` in force (``I...`` at 1 and above,
  ``W...`` at 2 and above, ``E...`` at 3), and absl's line about messages before
  ``InitializeLog`` (at 1 and above);
* the failed ``cuInit`` of a host without an NVIDIA driver (``/proc/driver/nvidia``), where no
  GPU can be used anyway; on a host with one, the line stays: it is a real fault there.

Everything else (paradnn's own lines, Python warnings, tracebacks, other libraries' messages)
passes through at once, in order.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterator

#: A line of TensorFlow's (absl's) C++ logging: severity letter, date, time, thread, file:line].
#: Before absl's logging is initialized the date is 0000 and the seconds run from the epoch
#: (``I0000 00:00:1795821547.853495``), hence ``\d+`` seconds.
_LOG_LINE = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [^\]\s]+:\d+\] ")
#: absl's note, written once per library before its logging is initialized.
_ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
#: The CUDA driver's initialization failing: expected on a host without an NVIDIA driver.
_CUINIT = re.compile(r"failed call to cuInit")
#: TF_CPP_MIN_LOG_LEVEL -> the severities it hides.
_HIDDEN = {0: "", 1: "I", 2: "IW", 3: "IWE"}
#: Seconds the filter waits for the last lines after TensorFlow started (a child process that
#: inherited the redirected descriptor could keep it open for ever).
_DRAIN_S = 2.0


def log_level() -> int:
    """The ``TF_CPP_MIN_LOG_LEVEL`` in force: the user's (0 to 3), else paradnn's 2 (set here,
    before TensorFlow reads it), which hides TensorFlow's INFO and WARNING lines."""
    if not os.environ.get("TF_CPP_MIN_LOG_LEVEL", "").strip():  # unset or empty: paradnn's
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    try:
        return min(max(int(os.environ["TF_CPP_MIN_LOG_LEVEL"]), 0), 3)
    except ValueError:
        return 0  # a value TensorFlow cannot read either: hide nothing


def nvidia_driver() -> bool:
    """Whether this host has an NVIDIA kernel driver (so CUDA could start)."""
    return os.path.exists("/proc/driver/nvidia")


def chatter(line: str, level: int, driver: bool) -> bool:
    """Whether ``line`` (without its newline) is TensorFlow start-up chatter to drop under
    ``TF_CPP_MIN_LOG_LEVEL`` ``level`` on a host with (``driver``) or without an NVIDIA driver."""
    if line.rstrip() == _ABSL_PREAMBLE:
        return level >= 1
    match = _LOG_LINE.match(line)
    if match is None:
        return False
    if match.group(1) in _HIDDEN[level]:
        return True
    return match.group(1) == "E" and not driver and bool(_CUINIT.search(line))


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """While the block runs (TensorFlow's import and device discovery), pass file descriptor 2
    through a filter that drops TensorFlow's start-up chatter (:func:`chatter`) and writes every
    other line on at once. Where the descriptor cannot be redirected, nothing is filtered."""
    level, driver = log_level(), nvidia_driver()
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    try:
        read_end, write_end = os.pipe()
    except OSError:
        os.close(saved)
        yield
        return

    def pump() -> None:
        pending = b""
        with os.fdopen(read_end, "rb", buffering=0) as source:
            while True:
                try:
                    chunk = source.read(65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                out = b"".join(raw + b"\n" for raw in lines
                               if not chatter(raw.decode("utf-8", "replace"), level, driver))
                if out:
                    os.write(saved, out)
        if pending and not chatter(pending.decode("utf-8", "replace"), level, driver):
            os.write(saved, pending)

    thread = threading.Thread(target=pump, name="paradnn-tf-stderr", daemon=True)
    thread.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved, 2)  # the pipe's last writer closes: the pump reads its end and stops
        thread.join(_DRAIN_S)
        if not thread.is_alive():
            os.close(saved)
