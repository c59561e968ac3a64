"""The ``agtool`` command.

- ``agtool report`` regenerates the measured tool report;
- ``agtool export --format openai|anthropic|mcp [--table module:TOOLS]`` prints a
  contract table's tools as provider tool definitions (JSON);
- ``agtool lint FILE | --table module:TOOLS [--json] [--strict]`` lists review
  prompts for tool schemas.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ._contract import check_table
from ._errors import AgtoolError
from ._jsonschema import FORMATS, export_tools, openai_strict_problems
from ._lint import format_findings, lint_file, lint_table

__all__ = ["main"]

DEFAULT_TABLE = "agtool.tools:TOOLS"
#: Exit statuses: findings under --strict, and input agtool could not read.
EXIT_FINDINGS, EXIT_ERROR = 1, 2


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agtool`` console script; returns the exit status."""
    parser = argparse.ArgumentParser(prog="agtool", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "report",
        help="regenerate reports/tool_report.json and .md from real runs",
        add_help=False,  # the report's own parser answers --help
    )
    _add_export(commands)
    _add_lint(commands)
    args, rest = parser.parse_known_args(argv)
    if args.command == "report":
        # Imported here: the report pulls in the harness, which plain gate users do not need.
        from reports import main as report_main

        return report_main(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        return int(args.run(args))
    except (AgtoolError, _BadTable) as exc:
        print(f"agtool {args.command}: {exc}", file=sys.stderr)
        return EXIT_ERROR


class _BadTable(Exception):
    """A ``--table`` value that names no importable table."""


def _add_export(commands: Any) -> None:
    export = commands.add_parser(
        "export", help="print a contract table's tools as OpenAI, Anthropic or MCP tools",
        description="Print every tool of a contract table as JSON tool definitions. An OpenAI "
        "tool is strict only when strict mode can state its contract exactly; the others "
        "are exported with strict: false, and the reasons are printed to stderr.")
    export.add_argument("--format", required=True, choices=FORMATS)
    export.add_argument("--table", default=DEFAULT_TABLE, metavar="MODULE:NAME",
                        help=f"the contract table to export (default {DEFAULT_TABLE})")
    export.set_defaults(run=_export)


def _add_lint(commands: Any) -> None:
    lint = commands.add_parser(
        "lint", help="list review prompts for tool schemas (rules R1-R5)",
        description="Review prompts for tool schemas, not a score: R1 required-field "
        "density, R2 open strings, R3 boolean switches, R4 null sentinels, R5 id-like "
        "fields not marked echo.")
    lint.add_argument("file", nargs="?", help="a JSON file of OpenAI, Anthropic or MCP tools")
    lint.add_argument("--table", metavar="MODULE:NAME", help="lint a contract table instead")
    lint.add_argument("--json", action="store_true", help="print findings as JSON")
    lint.add_argument("--strict", action="store_true",
                      help=f"exit with status {EXIT_FINDINGS} when there are findings")
    lint.set_defaults(run=_lint)


def _export(args: argparse.Namespace) -> int:
    table = _load_table(args.table)
    print(json.dumps(export_tools(table, args.format), indent=2, ensure_ascii=False))
    if args.format == "openai":
        for name in table:
            for problem in openai_strict_problems(table, name):
                print(f"note: {name} is exported with strict: false: {problem}",
                      file=sys.stderr)
    return 0


def _lint(args: argparse.Namespace) -> int:
    if (args.file is None) == (args.table is None):
        print("agtool lint: give a FILE or --table MODULE:NAME, not both", file=sys.stderr)
        return EXIT_ERROR
    findings = lint_file(args.file) if args.file else lint_table(_load_table(args.table))
    if args.json:
        print(json.dumps([finding.as_dict() for finding in findings], indent=2,
                         ensure_ascii=False))
    else:
        print(format_findings(findings))
    return EXIT_FINDINGS if args.strict and findings else 0


def _load_table(spec: str) -> Mapping[str, Any]:
    """The contract table named ``module:NAME``, validated."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise _BadTable(f"--table {spec!r}: expected MODULE:NAME, e.g. {DEFAULT_TABLE}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise _BadTable(f"--table {spec!r}: cannot import {module_name!r}: {exc}") from exc
    table = getattr(module, attribute, None)
    if table is None:
        raise _BadTable(f"--table {spec!r}: {module_name} has no {attribute!r}")
    check_table(table)
    return table  # type: ignore[no-any-return]  # check_table refuses anything but a dict


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
