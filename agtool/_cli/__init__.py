"""The ``agtool`` command.

- ``agtool export --format openai|anthropic|mcp [--table module:TOOLS]`` prints a
  contract table's tools as provider tool definitions (JSON);
- ``agtool lint FILE | --table module:TOOLS [--json] [--strict]`` lists review
  prompts for tool schemas;
- ``agtool mcp serve --table module:TOOLS [--http]`` serves a gated table as an
  MCP server, and ``agtool mcp proxy [--http] -- CMD ARGS...`` puts a gate in front
  of one (both need the ``mcp`` extra; ``--http`` off loopback needs ``--token-env``);
- ``agtool writes list|resolve|forget --store PATH|URL`` shows an operator the
  write keys that are pending or whose outcome is unknown, and settles them;
- ``agtool check --mcp CMD_OR_URL [--allow-writes] [--junit F] [--ndjson F]
  [--html F]`` runs the harness's properties over an MCP server's tools from
  the outside, and exits with status 1 when any fails (needs the ``mcp`` extra).

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
    _add_http_options(serve)
    _add_rate_option(serve)
    serve.add_argument("--on-loop", action="append", default=[], metavar="NAME",
                       help="run sync read NAME on the event loop, no worker thread (for a "
                       "body that never blocks); repeatable")
    _add_gate_options(serve)
    serve.set_defaults(run=_mcp_serve)
    proxy = actions.add_parser(
        "proxy", help="put a gate in front of an MCP server started as CMD ARGS... (or at --url)",
        description="Start CMD as a stdio MCP server (or reach one over streamable HTTP at "
        "--url) and serve its tools over stdio through a gate built from its own schemas and "
        "annotations.")
    _add_upstream_options(proxy)
    proxy.add_argument("--pins", metavar="FILE",
                       help="serve only the tools pinned in FILE as they were pinned "
                       "(`agtool mcp pin`); read again whenever the upstream's tools change")
    proxy.add_argument("--restarts", type=_count, default=None, metavar="N",
                       help="restart a lost upstream at most N times a minute, then exit "
                       "(default 5; 0: exit at the first loss)")
    proxy.add_argument("--trust-tool", action="append", default=[], metavar="NAME",
                       help="pass NAME through ungated (logged); repeatable")
    proxy.add_argument("--effect", action="append", default=[], metavar="NAME=EFFECT",
                       help="NAME's effect or risk level instead of its annotations' "
                       "(read, write, reversible_write, ...); repeatable")
    proxy.add_argument("--memo", action="append", default=[], metavar="NAME=SECONDS",
                       help="remember NAME's successful reads for SECONDS (default: no upstream "
                       "read is remembered; any write forgets them all); repeatable")
    proxy.add_argument("--sensitive", action="append", default=[], metavar="NAME.FIELD",
                       help="redact NAME's argument or returned key FIELD; repeatable")
    proxy.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                       help="answer an upstream call still running after SECONDS an error "
                       "(default 60)")
    _add_http_options(proxy)
    _add_rate_option(proxy)
    _add_gate_options(proxy)
    proxy.add_argument("upstream", nargs=argparse.REMAINDER, metavar="-- CMD ARGS",
                       help="the upstream server's command")
    proxy.set_defaults(run=_mcp_proxy)
    pin = actions.add_parser(
        "pin", help="pin the tools an MCP server lists now, for `agtool mcp proxy --pins`",
        description="Start CMD (or reach --url), and write a digest of each listed tool's "
        "name, description, schemas and annotations to FILE, replacing what it held.")
    _add_upstream_options(pin)
    pin.add_argument("--pins", required=True, metavar="FILE")
    pin.add_argument("upstream", nargs=argparse.REMAINDER, metavar="-- CMD ARGS",
                     help="the upstream server's command")
    pin.set_defaults(run=_mcp_pin)


def _add_upstream_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", metavar="URL",
                        help="a streamable HTTP MCP server (http://127.0.0.1:9000/mcp) instead "
                        "of CMD")
    parser.add_argument("--env", action="append", default=[], metavar="NAME",
                        help="hand the environment variable NAME to the upstream, beside the "
                        "MCP SDK's default safe set (never AGTOOL_SECRET); repeatable")


def _add_rate_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", action="append", default=[], metavar="NAME=N/SECONDS",
                        help="let N calls of tool NAME (* for every tool) through per SECONDS "
                        "per client; more are answered a retryable RATE_LIMITED; repeatable")


def _rates(args: argparse.Namespace) -> Any:
    """The ``--rate`` flags as ``Rates`` (``None`` without any); a malformed one is one line."""
    from ..mcp._rates import Rates

    try:
        return Rates(args.rate) if args.rate else None
    except ValueError as exc:
        raise TableError(str(exc)) from None


def _add_http_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP (at /mcp) "
                        "instead of stdio")
    parser.add_argument("--host", default="127.0.0.1",
                        help="the address --http binds (default 127.0.0.1); anything but "
                        "loopback needs --token-env")
    parser.add_argument("--port", type=_port, default=8000)
    parser.add_argument("--token-env", action="append", default=[], metavar="VAR",
                        help="a bearer token every --http request must carry, read from "
                        "environment variable VAR (one client per VAR); repeatable")
    parser.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="a browser origin (scheme://host[:port]) --http answers; "
                        "others are refused 403; repeatable")


def _http_options(args: argparse.Namespace) -> Any:
    """The ``--http`` flags as ``HttpOptions``, checked: a refusal is a one-line error."""
    from ..mcp._http import HttpOptions, check_binding, tokens_from_env

    try:
        http = HttpOptions(args.host, args.port, tokens_from_env(args.token_env),
                           tuple(args.allow_origin))
        check_binding(http)
    except ValueError as exc:
        raise TableError(str(exc)) from None
    return http


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


def _count(text: str) -> int:
    count = int(text)
    if count < 0:
        raise argparse.ArgumentTypeError(f"{count} is not a count (0 or more)")
    return count


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
    served = {"on_loop": args.on_loop, "rates": _rates(args)}
    if args.http:
        http = _http_options(args)
        options = _gate_options(args)
        mcp.serve_http(table, host=http.host, port=http.port, tokens=http.tokens,
                       allow_origins=http.allow_origins, **served, **options)
    else:
        mcp.serve_stdio(table, **served, **_gate_options(args))
    return 0


def _upstream_of(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]] | None:
    """The upstream's command and options, or ``None`` (said on stderr) when there is none."""
    command = args.upstream[1:] if args.upstream[:1] == ["--"] else args.upstream
    if bool(command) == bool(args.url):
        print("agtool mcp: give the upstream server's command after --, or --url, not both",
              file=sys.stderr)
        return None
    if "AGTOOL_SECRET" in args.env:
        print("agtool mcp: --env AGTOOL_SECRET: the gate's secret is never handed to the "
              "upstream server", file=sys.stderr)
        return None
    return command, {"url": args.url, "env": args.env}


def _mcp_pin(args: argparse.Namespace) -> int:
    from .. import mcp

    upstream = _upstream_of(args)
    if upstream is None:
        return EXIT_ERROR
    _log_to_stderr("mcp pin")
    try:
        pins = mcp.pin(upstream[0], args.pins, **upstream[1])
    except AgtoolError:  # an upstream that did not start is an OSError too: not the file's
        raise
    except OSError as exc:
        raise TableError(f"--pins {args.pins}: {exc}") from None
    print(f"agtool mcp pin: {len(pins)} tools pinned in {args.pins}", file=sys.stderr)
    return 0


def _mcp_proxy(args: argparse.Namespace) -> int:
    from .. import mcp

    upstream = _upstream_of(args)
    if upstream is None:
        return EXIT_ERROR
    command, upstream_options = upstream
    effects = dict(_pair(item, "=", "--effect") for item in args.effect)
    sensitive: dict[str, list[str]] = {}
    for item in args.sensitive:
        tool, field = _pair(item, ".", "--sensitive")
        sensitive.setdefault(tool, []).append(field)
    timeout = mcp.DEFAULT_UPSTREAM_TIMEOUT if args.timeout is None else args.timeout
    restarts = mcp.DEFAULT_RESTARTS if args.restarts is None else args.restarts
    http = _http_options(args) if args.http else None
    memo = {name: _memo_seconds(seconds) for name, seconds in
            (_pair(item, "=", "--memo") for item in args.memo)}
    mcp.proxy(command, trust_tools=args.trust_tool, effects=effects, sensitive=sensitive,
              timeout=timeout, pins=args.pins, restarts=restarts, http=http, rates=_rates(args),
              memo=memo, **upstream_options, **_gate_options(args))
    return 0


def _memo_seconds(text: str) -> float:
    try:
        return _seconds(text)
    except (ValueError, argparse.ArgumentTypeError):
        raise TableError(f"--memo ...={text}: expected a positive number of seconds") from None


def _pair(item: str, sep: str, option: str) -> tuple[str, str]:
    left, found, right = item.partition(sep)
    if not found or not left or not right:
        raise TableError(f"{option} {item!r}: expected NAME{sep}VALUE")
    return left, right


def _add_check(commands: Any) -> None:
    check = commands.add_parser(
        "check", help="run the harness's properties over an MCP server's tools",
        description="Start an MCP server (or reach one over streamable HTTP), import each "
        "tool's contract from its own schemas, and check from the outside that it keeps what "
        "it declared: calls its schema refuses are refused, pinned on their defect; valid "
        "calls are answered within the outputSchema; no error is answered as a success; the "
        "server survives every call; its listing does not change; a secret planted in its "
        "environment never comes back. Prints a line per finding (FAIL, WARN, INCONCLUSIVE) "
        f"and a summary; exits with status {EXIT_FINDINGS} if any item fails (or warns, "
        "under --strict).")
    check.add_argument("--mcp", required=True, metavar="COMMAND_OR_URL",
                       help="a command started as a stdio server ('python server.py'), or a "
                       "streamable HTTP URL (http://127.0.0.1:8000/mcp)")
    check.add_argument("--allow-writes", action="store_true",
                       help="also call the tools that may write (no readOnlyHint: true)")
    check.add_argument("--allow-tool", action="append", default=[], metavar="NAME",
                       help="also call this tool though it may write (repeatable)")
    check.add_argument("--env", action="append", default=[], metavar="NAME[=VALUE]",
                       help="pass this variable to a started server (repeatable); it gets only "
                       "the MCP SDK's safe environment (HOME, PATH, ...) and a canary otherwise")
    check.add_argument("--examples", metavar="FILE",
                       help="calls that should succeed: a JSON object of tool name -> list of "
                       "argument objects")
    check.add_argument("--seed", type=int, help="the seed of the calls drawn (default: 0 under "
                       "the ci profile, else a new one, printed)")
    check.add_argument("--profile", choices=("dev", "ci", "thorough"),
                       help="the Hypothesis profile (default: ci when CI is set, else dev)")
    check.add_argument("--max-examples", type=int, metavar="N",
                       help="examples per item (default: the profile's, at most 10)")
    check.add_argument("--timeout", type=float, metavar="SECONDS",
                       help="the seconds a call may take (default: 15)")
    check.add_argument("--tool-timeout", action="append", default=[], metavar="TOOL=SECONDS",
                       help="the seconds a call of one tool may take (repeatable)")
    check.add_argument("--item", action="append", default=[], metavar="TOOL::LABEL",
                       help="run only this item, named exactly (repeatable)")
    check.add_argument("--strict", action="store_true",
                       help=f"exit with status {EXIT_FINDINGS} on warnings too")
    check.add_argument("--junit", metavar="FILE", help="write JUnit XML, one test case per item")
    check.add_argument("--ndjson", metavar="FILE", help="write one JSON line per item")
    check.add_argument("--html", metavar="FILE",
                       help="write a self-contained HTML page: a tool by property matrix")
    check.add_argument("--server-log", metavar="FILE",
                       help="append a stdio server's stderr to FILE (default: discarded)")
    check.set_defaults(run=_check)


def _check(args: argparse.Namespace) -> int:
    from hypothesis import settings

    from ..harness._mcp_check import choose_seed, never_accepted, run_check
    from ..harness._mcp_options import CheckOptions
    from ..harness._mcp_report import FindingLines, Run, write_reports
    from ..harness.strategies.profiles import DEFAULT_PROFILE, register_profiles

    register_profiles()
    # Read, not loaded: the command changes no Hypothesis setting of the process it runs in.
    name = args.profile or ("ci" if os.environ.get("CI") else DEFAULT_PROFILE)
    profile = settings.get_profile(name)
    if args.max_examples is not None:
        profile = settings(profile, max_examples=args.max_examples)
    options = CheckOptions.read(
        allow_writes=args.allow_writes, allow_tools=args.allow_tool, env=args.env,
        examples_file=args.examples, timeout=args.timeout, tool_timeouts=args.tool_timeout,
        strict=args.strict)
    seed = choose_seed(args.seed, profile.derandomize)
    run = Run(args.mcp, seed, options, profile=args.profile or "",
              max_examples=args.max_examples)
    print(f"agtool check: {args.mcp}: seed {seed}", flush=True)

    lines = FindingLines(run)

    def progress(result: Any) -> None:
        for line in lines(result):
            print(line, flush=True)

    with open(args.server_log or os.devnull, "a") as errlog:
        results = run_check(args.mcp, allow_writes=options.allow_writes,
                            allow_tools=options.allow_tools, settings=profile, seed=seed,
                            errlog=errlog, env=options.env, timeout=options.timeout,
                            tool_timeouts=options.tool_timeouts, examples=options.examples,
                            only=set(args.item), progress=progress)
    for tool in never_accepted(results):
        print(f"NEVER ACCEPTED {tool}: no call of it was accepted, so its refusals could not "
              f"be pinned on their defects; give calls that succeed with --examples FILE, "
              f"a JSON object like {json.dumps({tool: [{'ARG': 'VALUE'}]})}", flush=True)
    write_reports(run, results, junit=args.junit, ndjson=args.ndjson, html=args.html)
    counts = {outcome: sum(result.outcome == outcome for result in results)
              for outcome in ("passed", "failed", "warned", "inconclusive", "skipped")}
    print(f"agtool check: {len(results)} items: {counts['passed']} passed, {counts['failed']} "
          f"failed, {counts['warned']} warned, {counts['inconclusive']} inconclusive, "
          f"{counts['skipped']} skipped; seed {seed} (the same calls again: --seed {seed})")
    findings = counts["failed"] + (counts["warned"] if options.strict else 0)
    return EXIT_FINDINGS if findings else 0

