"""The ``nas`` command. Heavy imports (torch, Lightning) happen inside the subcommands so that
``nas --help`` stays fast.

Bad input exits with status 2 and one line on stderr saying what is wrong and what is allowed,
before anything is written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from nas.commands.coordcheck import add_coordcheck_parser
from nas.commands.data import add_data_parser
from nas.commands.diff import add_diff_parser
from nas.commands.generate import add_generate_parser
from nas.commands.report import add_report_parser
from nas.commands.spaces import add_spaces_parser
from nas.commands.status import add_status_parser
from nas.commands.sweep import add_sweep_parser
from nas.commands.train import add_train_parser
from nas.commands.ui import add_ui_parser
from nas.exits import Exit

EXIT_USAGE = Exit.USAGE


class UsageError(Exception):
    """Bad input: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but an error is one line (no usage dump), raised so main() reports it."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> Parser:
    parser = Parser(prog="nas", description="Depth-scaling ablations for Transformers.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    add_train_parser(sub)
    add_spaces_parser(sub)
    add_sweep_parser(sub)
    add_report_parser(sub)
    add_status_parser(sub)
    add_diff_parser(sub)
    add_ui_parser(sub)
    add_coordcheck_parser(sub)
    add_generate_parser(sub)
    add_data_parser(sub)
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
