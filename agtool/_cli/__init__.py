"""The ``agtool`` command.

- ``agtool export --format openai|anthropic|mcp [--table module:TOOLS]`` prints a
  contract table's tools as provider tool definitions (JSON);
- ``agtool lint FILE | --table module:TOOLS [--json] [--strict]`` lists review
  prompts for tool schemas;
- ``agtool mcp serve --table module:TOOLS [--http]`` serves a gated table as an
  MCP server, and ``agtool mcp proxy -- CMD ARGS...`` puts a gate in front of one
  (both need the ``mcp`` extra);
- ``agtool writes list|resolve|forget --store PATH|URL`` shows an operator the
  write keys that are pending or whose outcome is unknown, and settles them;
- ``agtool check --mcp CMD_OR_URL [--allow-writes]`` runs the harness's
  properties over an MCP server's tools from the outside, and exits with
  status 1 when any fails (needs the ``mcp`` extra).

``--table`` modules are looked for in the current folder too. A reader that
stops early (``agtool lint --json | head -1``) ends the command quietly, with
status 141 as a process stopped by SIGPIPE has.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sqlite3
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from .._contract import RISKS, check_table
from .._errors import AgtoolError, TableError
from .._gate import DEFAULT_SCOPE
from .._jsonschema import FORMATS, export_tools, openai_strict_problems
from .._jsonschema.lint import format_findings, lint_file, lint_table
from .._loader import load_table
from .._records import CallRecord, JsonLinesSink
from .._store import SqliteStore
from .writes import add_writes

__all__ = ["main"]

DEFAULT_TABLE = "agtool.tools:TOOLS"
#: Exit statuses: findings under --strict, and input agtool could not read.
EXIT_FINDINGS, EXIT_ERROR = 1, 2
#: The status of a command whose reader closed the pipe: a SIGPIPE death's, 128 + 13.
EXIT_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``agtool`` console script; returns the exit status."""
    parser = command_parser()
    args = parser.parse_args(argv)
    try:
        status = int(args.run(args))
        sys.stdout.flush()  # here, so a closed pipe is met inside the handler below
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_PIPE
    except (AgtoolError, TableError, ImportError) as exc:
        print(f"agtool {args.command}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return status


def command_parser() -> argparse.ArgumentParser:
    """The parser of every ``agtool`` command (the README's examples are checked against it)."""
    parser = argparse.ArgumentParser(prog="agtool", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    _add_export(commands)
    _add_lint(commands)
    _add_mcp(commands)
    add_writes(commands)
    _add_check(commands)
    return parser


def _quiet_stdout() -> None:
    """Point stdout at the null device, so the interpreter's last flush meets no closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # a stdout with no descriptor (captured)
        pass


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
    """The contract table ``module:NAME`` names (looked for in the current folder too), checked."""
    table = load_table(spec, os.getcwd())
    check_table(table)
    return table


def _add_mcp(commands: Any) -> None:
    mcp = commands.add_parser("mcp", help="serve a gated table over MCP, or gate an MCP server")
    actions = mcp.add_subparsers(dest="mcp_command", required=True)
    serve = actions.add_parser(
        "serve", help="serve a contract table as a gated MCP server (stdio, or --http)",
        description="Serve every tool of a contract table through a gate, over stdio or "
        "streamable HTTP. Calls run with the given --scope (default: public reads).")
    serve.add_argument("--table", required=True, metavar="MODULE:NAME")
    serve.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=_port, default=8000)
    _add_gate_options(serve)
    serve.set_defaults(run=_mcp_serve)
    proxy = actions.add_parser(
        "proxy", help="put a gate in front of an MCP server started as CMD ARGS...",
        description="Start CMD as a stdio MCP server and serve its tools over stdio through "
        "a gate built from its own schemas and annotations.")
    proxy.add_argument("--trust-tool", action="append", default=[], metavar="NAME",
                       help="pass NAME through ungated (logged); repeatable")
    proxy.add_argument("--effect", action="append", default=[], metavar="NAME=EFFECT",
                       help="NAME's effect or risk level instead of its annotations' "
                       "(read, write, reversible_write, ...); repeatable")
    proxy.add_argument("--sensitive", action="append", default=[], metavar="NAME.FIELD",
                       help="redact NAME's argument or returned key FIELD; repeatable")
    proxy.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                       help="answer an upstream call still running after SECONDS an error "
                       "(default 60)")
    _add_gate_options(proxy)
    proxy.add_argument("upstream", nargs=argparse.REMAINDER, metavar="-- CMD ARGS",
                       help="the upstream server's command")
    proxy.set_defaults(run=_mcp_proxy)


def _add_gate_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scope", action="append", choices=RISKS, metavar="RISK",
                        help=f"a risk level callers may use, repeatable (default: "
                        f"{', '.join(sorted(DEFAULT_SCOPE))}); one of {', '.join(RISKS)}")
    parser.add_argument("--store", metavar="FILE",
                        help="SQLite file of write outcomes (default: in memory)")
    parser.add_argument("--records", metavar="FILE",
                        help="append one JSON call record per line to FILE (default: stderr)")


def _port(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (0-65535)")
    return port


def _seconds(text: str) -> float:
    seconds = float(text)
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return seconds


def _gate_options(args: argparse.Namespace) -> dict[str, Any]:
    _log_to_stderr(f"{args.command} {args.mcp_command}")
    return {"scope": frozenset(args.scope or DEFAULT_SCOPE), "store": _store(args.store),
            "records": JsonLinesSink(args.records) if args.records else _stderr_record}


def _store(path: str | None) -> SqliteStore | None:
    """The ``--store`` file, opened here so that one that cannot be is a one-line error."""
    if path is None:
        return None
    try:
        return SqliteStore(path)
    except (sqlite3.Error, OSError) as exc:
        raise TableError(f"--store {path}: {exc}") from None


def _stderr_record(record: CallRecord) -> None:
    print(json.dumps(record.as_dict(), sort_keys=True), file=sys.stderr, flush=True)


def _log_to_stderr(command: str) -> None:
    """agtool's warnings (an import's effect, a hidden tool) on stderr, stdout being the wire."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"agtool {command}: %(message)s"))
    logger = logging.getLogger("agtool")
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)


def _mcp_serve(args: argparse.Namespace) -> int:
    from .. import mcp  # the extra: a missing one is a one-line error naming it

    # On stdio, stdout is the wire: what the table's module prints as it loads goes to stderr.
    with contextlib.redirect_stdout(sys.stderr if not args.http else sys.stdout):
        table = _load_table(args.table)
    options = _gate_options(args)
    if args.http:
        mcp.serve_http(table, host=args.host, port=args.port, **options)
    else:
        mcp.serve_stdio(table, **options)
    return 0


def _mcp_proxy(args: argparse.Namespace) -> int:
    from .. import mcp

    command = args.upstream[1:] if args.upstream[:1] == ["--"] else args.upstream
    if not command:
        print("agtool mcp: give the upstream server's command after --", file=sys.stderr)
        return EXIT_ERROR
    effects = dict(_pair(item, "=", "--effect") for item in args.effect)
    sensitive: dict[str, list[str]] = {}
    for item in args.sensitive:
        tool, field = _pair(item, ".", "--sensitive")
        sensitive.setdefault(tool, []).append(field)
    timeout = mcp.DEFAULT_UPSTREAM_TIMEOUT if args.timeout is None else args.timeout
    mcp.proxy(command, trust_tools=args.trust_tool, effects=effects, sensitive=sensitive,
              timeout=timeout, **_gate_options(args))
    return 0


def _pair(item: str, sep: str, option: str) -> tuple[str, str]:
    left, found, right = item.partition(sep)
    if not found or not left or not right:
        raise TableError(f"{option} {item!r}: expected NAME{sep}VALUE")
    return left, right


def _add_check(commands: Any) -> None:
    check = commands.add_parser(
        "check", help="run the harness's properties over an MCP server's tools",
        description="Start an MCP server (or reach one over streamable HTTP), import each "
        "tool's contract from its own schemas, and check from the outside that single-defect "
        "calls and models' mistakes are refused without breaking the session, that valid "
        "calls are answered, and that results keep the outputSchema. Prints a line per "
        f"failing item and a summary; exits with status {EXIT_FINDINGS} if any item fails.")
    check.add_argument("--mcp", required=True, metavar="COMMAND_OR_URL",
                       help="a command started as a stdio server ('python server.py'), or a "
                       "streamable HTTP URL (http://127.0.0.1:8000/mcp)")
    check.add_argument("--allow-writes", action="store_true",
                       help="also call the tools that may write (no readOnlyHint: true)")
    check.add_argument("--seed", type=int, help="the seed of the calls drawn (default: 0 under "
                       "the ci profile, else a new one, printed)")
    check.add_argument("--profile", choices=("dev", "ci", "thorough"),
                       help="the Hypothesis profile (default: ci when CI is set, else dev)")
    check.add_argument("--examples", type=int, metavar="N",
                       help="examples per item (default: the profile's, at most 10)")
    check.add_argument("--server-log", metavar="FILE",
                       help="append a stdio server's stderr to FILE (default: discarded)")
    check.set_defaults(run=_check)


def _check(args: argparse.Namespace) -> int:
    from hypothesis import settings

    from ..harness._mcp_check import choose_seed, run_check
    from ..harness.strategies.profiles import DEFAULT_PROFILE, register_profiles

    register_profiles()
    # Read, not loaded: the command changes no Hypothesis setting of the process it runs in.
    name = args.profile or ("ci" if os.environ.get("CI") else DEFAULT_PROFILE)
    profile = settings.get_profile(name)
    if args.examples is not None:
        profile = settings(profile, max_examples=args.examples)
    seed = choose_seed(args.seed, profile.derandomize)
    print(f"agtool check: {args.mcp}: seed {seed}", flush=True)
    skips: set[tuple[str, str]] = set()

    def line(result: Any) -> None:
        head = result.message.splitlines()[0] if result.message else ""
        if result.outcome == "failed":
            print(f"FAIL {result.item.tool} {result.item.label}: {head}", flush=True)
        elif result.outcome == "skipped" and (result.item.tool, head) not in skips:
            skips.add((result.item.tool, head))  # a write's items share one reason: said once
            print(f"SKIP {result.item.tool}: {head}", flush=True)

    with open(args.server_log or os.devnull, "a") as errlog:
        results = run_check(args.mcp, allow_writes=args.allow_writes, settings=profile,
                            seed=seed, errlog=errlog, progress=line)
    counts = {outcome: sum(result.outcome == outcome for result in results)
              for outcome in ("passed", "failed", "skipped")}
    print(f"agtool check: {len(results)} items: {counts['passed']} passed, {counts['failed']} "
          f"failed, {counts['skipped']} skipped; seed {seed} (the same calls again: --seed "
          f"{seed})")
    return EXIT_FINDINGS if counts["failed"] else 0

