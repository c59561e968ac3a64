"""The ``agtool`` command: ``agtool report`` regenerates the measured tool report."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agtool`` console script; returns the exit status."""
    parser = argparse.ArgumentParser(prog="agtool", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "report",
        help="regenerate reports/tool_report.json and .md from real runs",
        add_help=False,  # the report's own parser answers --help
    )
    args, rest = parser.parse_known_args(argv)
    if args.command == "report":
        # Imported here: the report pulls in the harness, which plain gate users do not need.
        from reports import main as report_main

        return report_main(rest)
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover - argparse refuses first
    return 2  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
