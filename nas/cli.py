"""The ``nas`` command. Heavy imports (torch, Lightning) happen inside the subcommands so that
``nas --help`` stays fast.

Bad input exits with status 2 and one line on stderr saying what is wrong and what is allowed,
before anything is written.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from nas.exits import Exit

EXIT_USAGE = Exit.USAGE
# The commands, in the order ``nas --help`` lists them: each a module of ``nas/commands`` whose
# ``add_parser(sub)`` adds its parser and the function it runs. A new command is a module there
# and its name here.
COMMANDS = (
    "train",
    "spaces",
    "sweep",
    "report",
    "status",
    "diff",
    "ui",
    "coordcheck",
    "generate",
    "data",
)


class UsageError(Exception):
    """Bad input: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but an error is one line (no usage dump), raised so main() reports it."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> Parser:
    parser = Parser(prog="nas", description="Depth-scaling ablations for Transformers.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name in COMMANDS:
        importlib.import_module(f"nas.commands.{name}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return int(args.run(args) or 0)
    except (UsageError, ValueError) as err:
        # Only validation errors reach here as ValueError: configs, data and the CLI raise them
        # before any training starts, so nothing has been written.
        print(f"nas: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
