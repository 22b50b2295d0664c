"""The `paradnn` command: thin argparse subcommands over importable functions.

Each module named in ``COMMANDS`` defines ``register(subparsers)``, adding the subcommands listed
there with ``set_defaults(func=handler)``; a handler takes the parsed ``argparse.Namespace`` and
returns an exit status. A command line that names a subcommand builds (and imports) only the
module that registers it, so ``paradnn run`` never loads the report's or the store's libraries
before it measures; ``--help``, no subcommand or an unknown one build every module, so the usage
lists them all. Every ``PARADNN_*`` variable is checked first (:mod:`paradnn.envcheck`), before a
framework is imported. Bad input (any ``ParadnnError``, a plugin that fails to load included) and
faults of the environment (an ``OSError``: an unwritable folder, a full disk) become one line on
stderr and exit status 2; a ``ParadnnWarning`` becomes one line ``paradnn: warning: ...``. Set
``PARADNN_DEBUG=1`` to see the traceback of an environment fault. Ctrl-C, SIGTERM and SIGHUP
(unless ignored, as under ``nohup``) stop a command the same way, after its clean-up (child
processes stopped, the store closed), with one line and exit status 130, 143 or 129.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import warnings

from paradnn.envcheck import os_cause
from paradnn.errors import ParadnnError, ParadnnWarning, Terminated

#: Module of paradnn.cli -> the subcommands its ``register`` adds, in the order of `paradnn --help`
#: (tests/test_faults.py checks this table against the parsers the modules build).
COMMANDS: dict[str, tuple[str, ...]] = {
    "run": ("run", "probe", "list", "maxbatch"),
    "sweep": ("sweep", "status", "merge", "export"),
    "report": ("report", "plot", "profile"),
    "plan": ("plan",),
    "system": ("ops", "collectives", "scaling"),
    "infeed": ("infeed",),
    "compare": ("compare",),
    "predict": ("predict",),
    "ledger": ("ledger",),
}

#: Subcommands that measure and then read or write the probe cache (``paradnn.hardware``): its
#: folder is checked before they start, so that an unwritable one is one line at once rather
#: than after the measurement. ``sweep`` checks it itself before its first config (the line then
#: says how to resume).
PROBE_CACHE_COMMANDS: tuple[str, ...] = ("run", "probe", "maxbatch", "ops", "scaling", "ledger")

#: Store that every store-reading or -writing command uses when none is named.
DEFAULT_STORE = "results.db"


class _HelpFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" to every flag whose help does not already say its default; flags
    state their unit in their own help text."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return text + " (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    # argparse exits 2 on usage errors already; keep its one-line message, drop the usage dump
    # for subcommands so the error is the first thing a user reads.
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, error_line(message) + "\n")


def error_line(message: object) -> str:
    """``paradnn: error: MESSAGE`` as one line: characters that would break it (a line break, a
    carriage return, any other control character in a value the user gave: a path, a flag's
    value) are shown escaped (``\\n``), so that a script or a log reads the whole error on its
    one line."""
    text = str(message)
    return "paradnn: error: " + "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def typed(parse, *args, **kwargs):
    """An argparse ``type=`` from a parser of :mod:`paradnn.units`: its SpecError becomes the
    usage error (one line, exit 2) naming the flag, the value and what is allowed."""
    def convert(text: str):
        try:
            return parse(text, *args, **kwargs)
        except ParadnnError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


def module_of(command: str | None) -> str | None:
    """The module of paradnn.cli that registers the subcommand ``command``, or None for a name
    that is no subcommand (an option such as ``--help``, a typo, nothing)."""
    return next((module for module, names in COMMANDS.items() if command in names), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``paradnn`` parser: with ``command`` (a subcommand's name) only the subcommands of the
    module that registers it, which is all that parsing that command line needs; without it,
    or for a name that is no subcommand, every subcommand (the usage and ``--help`` list all)."""
    parser = Parser(prog="paradnn", description="Benchmark deep-learning training platforms.")
    from paradnn import __version__

    parser.add_argument("--version", action="version", version=f"paradnn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    only = module_of(command)
    for name in COMMANDS if only is None else (only,):
        importlib.import_module(f"paradnn.cli.{name}").register(sub)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None):
    # Our own warnings are one line for the user, once per command however often the store is
    # read; everyone else's keep Python's format.
    if issubclass(category, ParadnnWarning):
        if str(message) not in _shown:
            _shown.add(str(message))
            print(f"paradnn: warning: {message}", file=sys.stderr)
    else:
        _python_show_warning(message, category, filename, lineno, file, line)


_python_show_warning = warnings.showwarning
_shown: set[str] = set()


#: Subcommands that measure (or may: a sweep with the in-process executor) in their own
#: process, so start with huge pages for malloc (:func:`_restart_with_huge_pages`). A sweep's
#: workers get them from :mod:`paradnn.spawn` either way; the probe of the host's peaks runs as
#: ``paradnn probe`` in a child and sees memory as the workloads it divides do.
IN_PROCESS_MEASURING = frozenset({"run", "probe", "maxbatch", "profile", "ops", "collectives", "scaling",
                                  "infeed", "ledger", "sweep"})


def _restart_with_huge_pages() -> None:
    """Start this command again, same process, with glibc's huge pages for malloc
    (:mod:`paradnn.hostmem`): glibc reads the setting only when a process starts, and without
    it a CPU step of a large model spends much of its time faulting in its temporaries. Nothing
    happens where the setting is there (the user's value, or after the restart) or glibc lacks
    it; a failed ``exec`` leaves this process to run as it is (``host_huge_pages`` says so)."""
    from paradnn import hostmem

    restart = hostmem.reexec_args(os.environ)
    if restart is not None:
        argv, env = restart
        try:
            os.execve(sys.executable, argv, env)
        except OSError:
            pass


def _check_environment(line: list[str]) -> None:
    """Before anything else of a command: every ``PARADNN_*`` variable parsed
    (:func:`paradnn.envcheck.check`), and for the subcommands of :data:`PROBE_CACHE_COMMANDS`
    the probe cache's folder writable, so that neither is found after a measurement."""
    from paradnn import envcheck

    envcheck.check()
    if line[:1] and line[0] in PROBE_CACHE_COMMANDS and not {"--help", "-h"} & set(line):
        from paradnn import hardware

        hardware.check_cache_folder()


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


def last_words(text: str) -> None:
    """Print a line of a command's stop on stderr, which a hangup may have closed (EIO on a gone
    terminal): the exit status still tells."""
    try:
        print(text, file=sys.stderr)
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    # The subcommand is the first argument (the top level has no option that takes a value);
    # anything else (--help, --version, a typo) gets the whole parser and its usage.
    line = sys.argv[1:] if argv is None else argv
    if argv is None and line[:1] and line[0] in IN_PROCESS_MEASURING and not {"--help", "-h"} & set(line):
        _restart_with_huge_pages()
    if argv is None:
        # The command line only (a caller of main() keeps its own handling): SIGTERM unwinds as
        # Ctrl-C does, so a sweep stopped by `timeout` or a scheduler stops its children, closes
        # its store and says what is kept, instead of dying mid-way without a word. SIGHUP (the
        # terminal closed) likewise, unless it is ignored (nohup): then the sweep goes on.
        signal.signal(signal.SIGTERM, _terminate)
        if signal.getsignal(signal.SIGHUP) is signal.SIG_DFL:
            signal.signal(signal.SIGHUP, _terminate)
    spawn = None
    try:
        try:
            _check_environment(line)
        except ParadnnError as exc:  # before the sweep's worker starts: it would import a framework
            print(error_line(exc), file=sys.stderr)
            return 2
        if line[:1] == ["sweep"] and not {"--dry-run", "--help", "-h"} & set(line):
            # Its measuring worker starts Python and imports the default framework while this
            # process imports the sweep's modules; the process executor adopts it, and it is
            # killed below if none does (bad input, another executor).
            from paradnn import frameworks, spawn

            spawn.prestart(frameworks.DEFAULT)
        return _main(line)
    except KeyboardInterrupt as stop:
        # The shell's convention: 128 + the signal's number.
        if isinstance(stop, Terminated):
            last_words(f"paradnn: terminated ({signal.Signals(stop.signum).name})")
            return 128 + stop.signum
        last_words("paradnn: interrupted")
        return 128 + signal.SIGINT
    finally:
        if spawn is not None:
            spawn.discard()


def _main(line: list[str]) -> int:
    try:
        # The parser reads the family and framework registries, which import the plugins of
        # $PARADNN_PLUGINS: a bad one is the user's error, one line.
        parser = build_parser(line[0] if line else None)
    except ParadnnError as exc:
        print(error_line(exc), file=sys.stderr)
        return 2
    args = parser.parse_args(line)
    warnings.showwarning = _show_warning
    try:
        return int(args.func(args) or 0)
    except ParadnnError as exc:
        print(error_line(exc), file=sys.stderr)
        return 2
    except OSError as exc:
        # A fault of the environment that no check above classified (a folder that vanished,
        # an I/O error): one line naming the file, not a traceback.
        if os.environ.get("PARADNN_DEBUG"):
            raise
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        print(error_line(f"{os_cause(exc)}{where}"), file=sys.stderr)
        return 2
    finally:
        warnings.showwarning = _python_show_warning


if __name__ == "__main__":
    sys.exit(main())
