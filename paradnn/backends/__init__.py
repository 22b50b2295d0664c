"""The framework packages: ``paradnn.backends.jax`` (the reference), ``.tensorflow`` and ``.torch``.

Each package's ``__init__`` is framework-free and defines ``INFO`` (a
:class:`~paradnn.frameworks.FrameworkInfo`); its ``backend`` module imports the framework and
defines ``BACKEND``. No package here imports another's (a test checks it), and no module outside
a framework's package imports it: paradnn reaches a framework only through the registry,
:mod:`paradnn.frameworks`.

For plug-in authors this package also offers the registry and the settings helpers under their
documented names (``paradnn.backends.register``, ``FrameworkInfo``, ``Options``, ``setting``,
``choice``...): they are those of :mod:`paradnn.frameworks` and :mod:`paradnn.settings`, where
paradnn's own modules import them from.
"""

from paradnn.frameworks import (
    BUILTIN,
    DEFAULT,
    Backend,
    FrameworkInfo,
    Program,
    available,
    builders,
    capability,
    check_environments,
    get,
    meta,
    names,
    option_default,
    option_fields,
    option_help,
    option_names,
    parse_option,
    register,
    replaced_by,
    unregister,
)
from paradnn.settings import NoOptions, Options, choice, one_of, parse_field, setting

__all__ = ["BUILTIN", "DEFAULT", "Backend", "FrameworkInfo", "NoOptions", "Options", "Program",
           "available", "builders", "capability", "check_environments", "choice", "get", "meta", "names", "one_of",
           "option_default", "option_fields", "option_help", "option_names", "parse_field",
           "parse_option", "register", "replaced_by", "setting", "unregister"]
