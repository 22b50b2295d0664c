"""The `paradnn` command: thin argparse subcommands over importable functions.

Each module in ``_COMMAND_MODULES`` defines ``register(subparsers)``, adding its subcommands
with ``set_defaults(func=handler)``; a handler takes the parsed ``argparse.Namespace`` and returns
an exit status. Bad input (any ``ParadnnError``) becomes one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from paradnn.errors import ParadnnError

_COMMAND_MODULES = ("run", "sweep", "report", "plan")


class _Parser(argparse.ArgumentParser):
    # argparse exits 2 on usage errors already; keep its one-line message, drop the usage dump
    # for subcommands so the error is the first thing a user reads.
    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"paradnn: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="paradnn", description="Benchmark deep-learning training platforms.")
    from paradnn import __version__

    parser.add_argument("--version", action="version", version=f"paradnn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in _COMMAND_MODULES:
        importlib.import_module(f"paradnn.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ParadnnError as exc:
        print(f"paradnn: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("paradnn: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
