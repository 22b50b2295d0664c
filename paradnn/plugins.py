"""User plugins: modules named in ``$PARADNN_PLUGINS`` that register families or frameworks.

A family (:func:`paradnn.families.register`) or a framework (:func:`paradnn.backends.register`)
registered by user code exists only in the process that ran that code. Naming the module in
``PARADNN_PLUGINS`` (comma-separated module names, e.g. ``PARADNN_PLUGINS=mylab.families,
mylab.numpy_backend``) makes both registries import it when they first load, so the
registration also happens in the ``paradnn`` command and in the child processes of the process
and Ray executors, which inherit the environment. No framework is imported here.
"""

from __future__ import annotations

import importlib
import os
import re

from paradnn.errors import ParadnnError

#: The environment variable naming the plugin modules.
ENV = "PARADNN_PLUGINS"

_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
# Modules already imported (or being imported: a plugin that imports a registry re-enters here).
_imported: set[str] = set()


def plugin_modules() -> list[str]:
    """The module names in ``$PARADNN_PLUGINS``, in order; ParadnnError naming the variable
    and its value when an entry is not a dotted module name."""
    text = os.environ.get(ENV, "")
    names = [part.strip() for part in text.split(",") if part.strip()]
    for name in names:
        if not _MODULE.match(name):
            raise ParadnnError(f"invalid {ENV}={text!r}: {name!r} is not a module name; allowed: "
                               "comma-separated importable module names, e.g. mylab.plugin")
    return names


def load_plugins() -> list[str]:
    """Import every module of ``$PARADNN_PLUGINS`` not imported yet (each once per process);
    returns the names imported now. A module that cannot be found is a ParadnnError naming the
    variable and its value; an exception raised by the plugin's own code propagates."""
    loaded = []
    for name in plugin_modules():
        if name in _imported:
            continue
        _imported.add(name)
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            _imported.discard(name)
            raise ParadnnError(f"invalid {ENV}={os.environ.get(ENV, '')!r}: cannot import plugin "
                               f"module {name!r} ({exc}); allowed: comma-separated importable "
                               "module names (on PYTHONPATH)") from None
        except BaseException:
            _imported.discard(name)
            raise
        loaded.append(name)
    return loaded


__all__ = ["ENV", "load_plugins", "plugin_modules"]
