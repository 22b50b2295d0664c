"""User plugins: modules named in ``$PARADNN_PLUGINS`` that register families or frameworks.

A family (:func:`paradnn.families.register`) or a framework (:func:`paradnn.backends.register`)
registered by user code exists only in the process that ran that code. Naming the module in
``PARADNN_PLUGINS`` (comma-separated module names, e.g. ``PARADNN_PLUGINS=mylab.families,
mylab.numpy_backend``) makes both registries import it when they load, so the registration also
happens in the ``paradnn`` command and in the child processes of the process and Ray executors,
which inherit the environment. No framework is imported here.

:func:`load_plugins` is the one loader: whatever goes wrong while a plugin is imported (it cannot
be found, it has a syntax error, its code raises, a registry refuses what it registers) becomes
one :class:`PluginError` naming the plugin module and its error (type, message, file and line).
A failure is remembered: every later use of a registry in the process raises the same error, so
no command and no child process goes on without a plugin the user asked for.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import traceback
from pathlib import Path

from paradnn.errors import ParadnnError

#: The environment variable naming the plugin modules.
ENV = "PARADNN_PLUGINS"

#: Longest error text of a plugin in the one line that reports it, in characters.
MAX_ERROR_CHARS = 500

_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
# paradnn's own source folder: a frame there is the registry, not the plugin (see _where).
_SOURCE_DIR = str(Path(__file__).resolve().parent) + os.sep
# Modules already imported (or being imported).
_imported: set[str] = set()
# Plugins whose import failed -> the message of their error, raised again (as a new exception, so
# that no traceback grows) by every later load in this process.
_failed: dict[str, str] = {}
# The plugins being imported now, innermost last (their registrations are attributed to them).
_loading: list[str] = []
# The value of $PARADNN_PLUGINS whose modules are all imported (None: none yet).
_complete: str | None = None


class PluginError(ParadnnError):
    """A module of ``$PARADNN_PLUGINS`` that failed to load; the message names the module, the
    variable and the plugin's error. Its only argument is the message, so it pickles (an
    executor's child process sends it to the parent)."""


@functools.cache
def _parse(text: str) -> tuple[str, ...]:
    # Cached by the variable's text: the registries call load_plugins on every lookup.
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    for name in names:
        if not _MODULE.match(name):
            raise ParadnnError(f"invalid {ENV}={text!r}: {name!r} is not a module name; allowed: "
                               "comma-separated importable module names, e.g. mylab.plugin")
    return names


def plugin_modules() -> list[str]:
    """The module names in ``$PARADNN_PLUGINS``, in order; ParadnnError naming the variable
    and its value when an entry is not a dotted module name."""
    return list(_parse(os.environ.get(ENV, "")))


def loading() -> str | None:
    """The plugin module being imported now (None when none is): what a registration made by
    its code records as its source."""
    return _loading[-1] if _loading else None


def _where(exc: BaseException) -> str:
    """Where ``exc`` came from, as ``file:line``: a syntax error's own position, else the
    innermost frame outside paradnn and Python's import machinery (the plugin's line, or the
    line of a module it imported; for a registry's refusal, the plugin's call of register)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith("<frozen")
              and not os.path.realpath(f.filename).startswith(_SOURCE_DIR)]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""


def _not_found(name: str, exc: BaseException) -> bool:
    """Whether ``exc`` says that the plugin module ``name`` itself (or a package above it) does
    not exist, rather than a module that the plugin's code imports."""
    missing = getattr(exc, "name", None)
    return isinstance(exc, ModuleNotFoundError) and missing is not None and (
        name == missing or name.startswith(missing + "."))


def describe(name: str, exc: BaseException) -> str:
    """One line saying that plugin ``name`` failed with ``exc``."""
    value = os.environ.get(ENV, "")
    if _not_found(name, exc):
        return (f"invalid {ENV}={value!r}: cannot import plugin module {name!r} ({exc}); allowed: "
                "comma-separated importable module names (on PYTHONPATH)")
    if isinstance(exc, SyntaxError):
        error = f"SyntaxError: {exc.msg}"
    elif isinstance(exc, ParadnnError):
        error = str(exc)  # a registry's refusal says what is allowed; its type adds nothing
    else:
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    error = " ".join(error.split())  # one line, whatever the plugin's message holds
    if len(error) > MAX_ERROR_CHARS:
        error = error[:MAX_ERROR_CHARS - 3] + "..."
    where = _where(exc)
    return (f"plugin module {name!r} of {ENV}={value!r} failed to load: {error}"
            + (f" (at {where})" if where else "") + f"; fix it or remove it from {ENV}")


def load_plugins() -> list[str]:
    """Import every module of ``$PARADNN_PLUGINS`` not imported yet (each once per process);
    returns the names imported now. Any failure of a plugin is a :class:`PluginError` (see the
    module's docstring), raised again by every later call while the plugin stays listed. A call
    made while a plugin is being imported (its code uses a registry) imports nothing."""
    global _complete
    text = os.environ.get(ENV, "")
    if text == _complete:
        return []  # all imported already (a registry's lookup, a child's explicit load): one compare
    names = plugin_modules()
    for name in names:
        if name in _failed:
            raise PluginError(_failed[name])
    if _loading:
        return []  # the outer call imports the rest, in order, once this plugin is done
    loaded = []
    for name in names:
        if name in _imported:
            continue
        _imported.add(name)
        _loading.append(name)
        try:
            importlib.import_module(name)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure of user code is one line
            # A KeyboardInterrupt is the user's, not the plugin's: it propagates.
            _imported.discard(name)
            _failed[name] = describe(name, exc)
            raise PluginError(_failed[name]) from None
        finally:
            _loading.pop()
        loaded.append(name)
    _complete = text
    return loaded


__all__ = ["ENV", "PluginError", "describe", "load_plugins", "loading", "plugin_modules"]
