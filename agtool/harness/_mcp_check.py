"""The harness on any MCP server, from the outside: its tools against their own schemas.

A target is a command (``python my_server.py``, started as a stdio server) or
a streamable HTTP URL (``http://127.0.0.1:8000/mcp``). Its tools are listed
through the official MCP client and each ``inputSchema``/``outputSchema`` goes
through the import path (``import_tool``): the contract the strategies draw
from. Then, per tool, as items:

- ``refused[<site>]``: a call with exactly one defect at that defect site
  must be refused (``isError``, or a JSON-RPC error), and the server and the
  session must survive it: the valid call sent next still gets an answer;
- ``mistake[<kind>]``: the same for a call carrying one of the mistakes
  models make (``bool-for-int``, ``extra-argument``, ...);
- ``accepts``: a valid call must not be refused, and its result must keep
  the ``outputSchema`` (checked by ``jsonschema``, independently of agtool)
  and the imported return contract (which names ``shape``, ``empty``,
  ``too_big`` or ``range``);
- ``contract``: only for a tool whose schemas the importer cannot enforce,
  skipped with the importer's reason (a tool whose input schema cannot be
  enforced gets no other item; one whose output schema cannot, gets its
  results checked by ``jsonschema`` alone).

What the schema refuses is read by two oracles, which must agree before a
call is sent: the gate's own check on the imported contract gives the exact
reason the strategies planted, and ``jsonschema`` on the server's own
``inputSchema`` must refuse it too, with every object closed (an argument the
schema does not name is refused, as by the gate: a server that drops it runs
with defaults and answers a wrong success). A draw the two read differently
(``1.0`` for an integer, ``STRICTER_THAN_JSON_SCHEMA``) or that JSON cannot
carry (NaN) is not sent. A tool that writes (no ``readOnlyHint: true``) is
called only when writes are allowed; otherwise its items are skipped.

Every call goes through one ``ClientSession`` per tool, opened when the tool's
first item runs and closed before the next tool's; a server that dies is
reported on the call that killed it, and the next item starts it again.
Calls are drawn from the seed alone: the same seed, the same calls.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import shlex
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    AsyncExitStack,
    asynccontextmanager,
)
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp.types as types
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .._errors import ServerGone, UpstreamUnavailable
from .._gate import Gate
from .._jsonschema import SchemaError, ToolDefinition, import_tool, tool_definition
from .._reasons import shown
from ..mcp._proxy import _LISTED_KEYS
from ..mcp._proxy import _cause as _first_cause

__all__ = [
    "CALL_TIMEOUT",
    "EXAMPLES_PER_ITEM",
    "PROPERTIES",
    "CheckItem",
    "ItemResult",
    "McpTarget",
    "Transport",
    "choose_seed",
    "item_test",
    "plan",
    "run_check",
    "run_item",
]

#: The properties, in the order items are listed.
PROPERTIES = ("contract", "refused", "mistake", "accepts")
#: The most examples one item draws, whatever the profile: each is a round trip to a
#: subprocess (two for ``refused``), and shrinking a failure adds more.
EXAMPLES_PER_ITEM = 10
#: Seconds one call may take before the server is taken for hung: it then fails the item.
CALL_TIMEOUT = 30.0
#: The seed of a derandomized profile (``ci``): the same calls on every run.
DERANDOMIZED_SEED = 0
# Where JSON Schema keeps schemas: in a mapping of them, a list of them, or one.
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
_SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SCHEMA_KEYS = frozenset({"items", "additionalProperties", "not", "if", "then", "else",
                          "contains"})


# --- The server under test ---------------------------------------------------------------------


def _is_url(target: str) -> bool:
    return target.startswith(("http://", "https://"))


#: Makes the read and write streams of a session: an async context manager, as
#: ``stdio_client`` is (for a server in this process, the SDK's in-memory transport).
Transport = Callable[[], AbstractAsyncContextManager[Any]]


@asynccontextmanager
async def _open_session(target: str, errlog: Any, transport: Transport | None
                        ) -> AsyncIterator[ClientSession]:
    async with AsyncExitStack() as stack:
        if transport is not None:
            read, write = await stack.enter_async_context(transport())
        elif _is_url(target):
            read, write = await stack.enter_async_context(streamable_http_client(target))
        else:
            command = shlex.split(target)
            # The whole environment, as a shell would pass it: the server's keys live there.
            params = StdioServerParameters(command=command[0], args=command[1:],
                                           env=dict(os.environ))
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        session = await stack.enter_async_context(ClientSession(read, write))
        with anyio.fail_after(CALL_TIMEOUT):
            await session.initialize()
        yield session


def _cause(exc: BaseException) -> str:
    """The first real failure inside ``exc``; a bare timeout said as one."""
    cause = _first_cause(exc)
    return f"no answer within {CALL_TIMEOUT:g} s" if cause == "TimeoutError: " else cause


def _with_fileno(stream: Any) -> Any:
    """``stream`` if a subprocess can write to it, else the null device (a captured stderr)."""
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return open(os.devnull, "w")  # closed by McpTarget.close
    return stream


@dataclass(frozen=True)
class Answer:
    """A server's answer to one ``tools/call``."""

    refused: bool  #: ``isError``, or a JSON-RPC error in place of a result
    structured: Any  #: ``structuredContent`` (``None`` when absent)
    text: str  #: the text blocks, joined
    protocol_error: bool = False

    @property
    def value(self) -> Any:
        """What the gate would check: the structured content, or the JSON the text holds."""
        if self.structured is not None:
            return self.structured
        try:
            return json.loads(self.text)
        except ValueError:
            return {"text": self.text}

    @property
    def reason(self) -> str:
        """An agtool server's structured reason (``args:type:limit``), else ``""``."""
        error = self.structured.get("error") if isinstance(self.structured, dict) else None
        details = error.get("details") if isinstance(error, dict) else None
        reason = details.get("reason") if isinstance(details, dict) else None
        return reason if isinstance(reason, str) else ""


class McpTarget:
    """One MCP server under test, reached through the official client.

    Use as a context manager (or call ``close``). Calls are synchronous: an
    event loop in a background thread holds the client session, so a
    Hypothesis test can make them one by one.
    """

    def __init__(self, target: str, *, errlog: Any = None,
                 transport: Transport | None = None) -> None:
        if not target.strip():
            raise ValueError("the MCP server to check is empty: give a command or a URL")
        self.target = target
        given = errlog if errlog is not None else sys.stderr
        self._errlog = _with_fileno(given)
        self._own_errlog = self._errlog is not given
        self._transport = transport
        self._portal_cm: AbstractContextManager[BlockingPortal] = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._session: tuple[str, ClientSession, AbstractContextManager[Any]] | None = None
        self._listing: list[types.Tool] | None = None

    def __enter__(self) -> McpTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the open session (ending a stdio server) and the event loop."""
        self._drop()
        self._portal_cm.__exit__(None, None, None)
        if self._own_errlog:
            self._errlog.close()

    def _drop(self) -> None:
        if self._session is not None:
            _, _, opened = self._session
            self._session = None
            with contextlib.suppress(Exception):  # a dead server's close is no news
                opened.__exit__(None, None, None)

    def session(self, key: str) -> ClientSession:
        """The session of ``key`` (a tool), opened now unless it is the open one."""
        if self._session is not None and self._session[0] == key:
            return self._session[1]
        self._drop()
        opened = self._portal.wrap_async_context_manager(
            _open_session(self.target, self._errlog, self._transport))
        try:
            session = opened.__enter__()
        except Exception as exc:  # a missing command, a crash, a server that is not MCP
            raise UpstreamUnavailable(f"{self.target!r} did not start as an MCP server "
                                      f"({_cause(exc)})") from None
        self._session = (key, session, opened)
        return session

    def tools(self) -> list[types.Tool]:
        """Every tool the server lists, page after page (listed once)."""
        if self._listing is None:
            self._listing = self._portal.call(self._list, self.session(""))
        return list(self._listing)

    async def _list(self, session: ClientSession) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        try:
            while True:
                with anyio.fail_after(CALL_TIMEOUT):
                    page = await session.list_tools(
                        params=None if cursor is None else types.PaginatedRequestParams(
                            cursor=cursor))
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return tools
        except Exception as exc:
            raise UpstreamUnavailable(f"{self.target!r} did not list its tools "
                                      f"({_cause(exc)})") from None

    def call(self, tool: str, arguments: dict[str, Any]) -> Answer:
        """One ``tools/call``; ``ServerGone`` if the server or the session did not survive it."""
        session = self.session(tool)
        try:
            answer: Answer = self._portal.call(self._call, session, tool, arguments)
            return answer
        except ServerGone:
            self._drop()  # the next call starts the server again
            raise

    async def _call(self, session: ClientSession, tool: str, arguments: dict[str, Any]
                    ) -> Answer:
        request = types.CallToolRequest(params=types.CallToolRequestParams(
            name=tool, arguments=arguments))
        try:
            # send_request, not call_tool: call_tool checks the result against the listed
            # outputSchema itself and raises, and the harness wants to see the result.
            result = await session.send_request(request, types.CallToolResult,
                                                request_read_timeout_seconds=CALL_TIMEOUT)
        except MCPError as exc:
            if exc.code in (types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT):
                raise ServerGone(f"{exc} (JSON-RPC {exc.code})") from None
            return Answer(True, None, f"JSON-RPC error {exc.code}: {exc}", protocol_error=True)
        except Exception as exc:  # a closed stream, a result that is no CallToolResult
            raise ServerGone(_cause(exc)) from None
        text = "\n".join(block.text for block in result.content
                         if isinstance(block, types.TextContent))
        return Answer(bool(result.is_error), result.structured_content, text)


# --- What is checked of each tool -------------------------------------------------------------


@dataclass(frozen=True)
class CheckItem:
    """One property of one tool: what it is run over, or why it is not run."""

    tool: str
    prop: str
    case: Any = None  #: a ``DefectSite`` (refused), a mistake kind (mistake), or ``None``
    skip: str = ""  #: why the item is not run; ``""`` when it is

    @property
    def label(self) -> str:
        """``refused[type:limit]``, ``mistake[bool-for-int]``, ``accepts``."""
        if self.case is None:
            return self.prop
        case = self.case.replace(" ", "-") if isinstance(self.case, str) else str(self.case)
        return f"{self.prop}[{case}]"


@dataclass
class ToolUnderTest:
    """A listed tool: its imported contract, its schemas, and how far they could be imported."""

    name: str
    listing: ToolDefinition
    entry: dict[str, Any] | None  #: ``None`` when its input schema cannot be enforced
    problem: str = ""  #: what the importer refused, if anything
    writes: bool = False
    _validators: dict[str, Any] = field(default_factory=dict)

    def validator(self, which: str) -> Any:
        """A ``jsonschema`` validator of the input (closed) or output schema."""
        if which not in self._validators:
            from jsonschema.validators import (
                Draft202012Validator,
                validator_for,
            )

            schema = (_closed(self.listing.input_schema) if which == "input"
                      else self.listing.output_schema)
            self._validators[which] = validator_for(schema, default=Draft202012Validator)(schema)
        return self._validators[which]


def _closed(schema: Any, top: bool = True) -> Any:
    """``schema`` closed as the gate reads arguments: the whole set, and every object that
    names its keys, refuse a key they do not name unless they say otherwise (a free-form
    object stays free)."""
    if not isinstance(schema, dict):
        return schema
    closed = dict(schema)
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            closed[key] = {name: _closed(child, False) for name, child in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            closed[key] = [_closed(child, False) for child in value]
        elif key in _SCHEMA_KEYS:
            closed[key] = _closed(value, False)
    if (top or "properties" in closed) and "additionalProperties" not in closed:
        closed["additionalProperties"] = False
    return closed


def tools_under_test(target: McpTarget) -> list[ToolUnderTest]:
    """The server's tools, each imported as far as the importer can enforce its schemas."""
    found = []
    for index, tool in enumerate(target.tools()):
        listing = {key: value for key, value in tool.model_dump(
            by_alias=True, exclude_none=True, mode="json").items() if key in _LISTED_KEYS}
        where = f"/tools/{index}"
        try:
            definition = tool_definition(listing, target.target, where)
        except SchemaError as exc:  # a listing the importer cannot read at all
            bare = ToolDefinition(tool.name, "mcp", "", {}, None, where, where)
            found.append(ToolUnderTest(tool.name, bare, None, str(exc)))
            continue
        found.append(_imported(definition, target.target))
    return found


def _imported(definition: ToolDefinition, source: str) -> ToolUnderTest:
    # The harness's logger notes (a tool without readOnlyHint) are said by the skip reason.
    with _quiet_imports():
        try:
            entry = import_tool(definition, source=source)
            problem = ""
        except SchemaError as exc:
            problem = str(exc)
            try:  # the input alone, so its calls can still be checked
                entry = import_tool(ToolDefinition(
                    definition.name, definition.format, definition.description,
                    definition.input_schema, None, definition.input_at, "",
                    definition.annotations), source=source)
                problem += "; its results are checked against outputSchema by jsonschema alone"
            except SchemaError:
                entry = None
    writes = entry is not None and entry.get("effect") == "write"
    if entry is None:
        hints = definition.annotations or {}
        writes = hints.get("readOnlyHint") is not True
    return ToolUnderTest(definition.name, definition, entry, problem, writes)


@contextlib.contextmanager
def _quiet_imports() -> Iterator[None]:
    logger = logging.getLogger("agtool")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def plan(tools: Sequence[ToolUnderTest], *, allow_writes: bool = False) -> list[CheckItem]:
    """Every item of every tool, in listing order; skipped ones carry their reason."""
    from .strategies import defect_sites, mistake_kinds

    items: list[CheckItem] = []
    for tool in tools:
        if tool.problem:
            items.append(CheckItem(tool.name, "contract",
                                   skip=f"not enforceable by the gate: {tool.problem}"))
        if tool.entry is None:
            continue
        skip = "" if allow_writes or not tool.writes else (
            f"tool {shown(tool.name)!r} may write (no readOnlyHint: true): called only when "
            f"writes are allowed (--agtool-allow-writes, or agtool check --allow-writes)")
        table = {tool.name: tool.entry}
        items += [CheckItem(tool.name, "refused", site, skip)
                  for site in defect_sites(table, tool.name)]
        items += [CheckItem(tool.name, "mistake", kind, skip)
                  for kind in mistake_kinds(table, tool.name)]
        items.append(CheckItem(tool.name, "accepts", None, skip))
    return items


# --- The properties --------------------------------------------------------------------------


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 200 else text[:197] + "..."


def _wire(args: Any) -> Any:
    """``args`` as the server receives them (a JSON round trip), or ``None`` if JSON cannot."""
    try:
        return json.loads(json.dumps(args, allow_nan=False))
    except (TypeError, ValueError):
        return None


def _first_error(validator: Any, value: Any) -> Any:
    """The error ``jsonschema`` would raise for ``value``, or ``None``."""
    from jsonschema.exceptions import best_match

    return best_match(validator.iter_errors(value))


def _schema_refusal(tool: ToolUnderTest, args: Any) -> str:
    """What ``jsonschema`` finds wrong with ``args`` on the closed input schema, or ``""``."""
    error = _first_error(tool.validator("input"), args)
    if error is None:
        return ""
    return f"{error.json_path}: {error.message}"


class _Checks:
    """The checks of one tool's items, against one server, counting what they sent."""

    def __init__(self, target: McpTarget, tool: ToolUnderTest) -> None:
        if tool.entry is None:  # pragma: no cover - plan() makes no such item
            raise ValueError(f"tool {tool.name!r} has no contract to check")
        self.target, self.tool = target, tool
        self.table = {tool.name: tool.entry}
        self.gate = Gate(self.table)  # only its checks are used: its body never runs
        self.drawn: Counter[str] = Counter()
        self.gone = ""  #: what broke the server, once something did
        #: Examples sent, shrinking's included (a draw not sent is not counted).
        self.sent = 0

    def sendable(self, args: Any, reasons: frozenset[str]) -> Any:
        """``args`` on the wire, if both oracles read it as the draw meant; else ``None``."""
        wire = _wire(args)
        if not isinstance(wire, dict):
            _event("not sent: JSON cannot carry it")
            return None
        if self.gate.validate_args(self.tool.name, wire) not in reasons:
            _event("not sent: the JSON round trip changed the defect")
            return None
        valid = reasons == frozenset({""})
        if bool(_schema_refusal(self.tool, wire)) == valid:
            _event("not sent: jsonschema reads the schema otherwise (STRICTER_THAN_JSON_SCHEMA)")
            return None
        return wire

    def send(self, args: dict[str, Any], what: str) -> Answer:
        # After a death, the item's later examples (shrinking's) are not sent: each would
        # start the server again only to kill it, and the news is the call that did.
        if self.gone:
            raise AssertionError(self.gone)
        try:
            return self.target.call(self.tool.name, args)
        except ServerGone as exc:
            self.gone = (f"{what} {shown(self.tool.name)}({_show(args)}) broke the server or "
                         f"the session: {exc}; the item's later examples were not sent")
            raise AssertionError(self.gone) from None

    def refused(self, args: Any, reasons: frozenset[str], how: str, follow: Any) -> None:
        """A defective call is refused, with an agtool server's reason if it gives one."""
        from hypothesis import assume

        wire = self.sendable(args, reasons)
        assume(wire is not None)
        self.sent += 1
        self.drawn[how] += 1
        answer = self.send(wire, "the defective call")
        name = shown(self.tool.name)
        expected = sorted("args:" + reason for reason in reasons)
        if not answer.refused:
            raise AssertionError(
                f"tool {name!r} accepted a call its schema refuses: {name}({_show(wire)}) "
                f"answered {_show(answer.value)}; planted {' or '.join(expected)} ({how}); "
                f"jsonschema: {_schema_refusal(self.tool, wire)}")
        _event("refused as a JSON-RPC error" if answer.protocol_error else "refused: isError")
        if answer.reason and answer.reason not in expected:
            raise AssertionError(
                f"tool {name!r} refused {name}({_show(wire)}) with {answer.reason!r}; the "
                f"defect planted is {' or '.join(map(repr, expected))}")
        valid = _wire(follow)
        if isinstance(valid, dict):  # the session must still answer a valid call
            self.send(valid, f"after the refused {name}({_show(wire)}), the valid call")

    def accepts(self, args: Any) -> None:
        """A valid call is not refused, and its result keeps the tool's output contract."""
        from hypothesis import assume

        wire = self.sendable(args, frozenset({""}))
        assume(wire is not None)
        self.sent += 1
        self.drawn["valid call"] += 1
        answer = self.send(wire, "the valid call")
        name = shown(self.tool.name)
        if answer.refused:
            raise AssertionError(
                f"tool {name!r} refused what its schema admits: {name}({_show(wire)}) "
                f"answered {answer.reason or answer.text[:200]!r}")
        self._check_result(wire, answer)
        _event("accepts: " + ("empty result" if _is_empty(answer.value) else "answered"))

    def _check_result(self, wire: dict[str, Any], answer: Answer) -> None:
        name = shown(self.tool.name)
        what = f"{name}({_show(wire)}) returned {_show(answer.value)}"
        reason = self.gate.validate_result(self.tool.name, answer.value)
        if self.tool.listing.output_schema is not None:
            if answer.structured is None:
                raise AssertionError(f"tool {name!r} has an outputSchema but "
                                     f"{name}({_show(wire)}) returned no structuredContent")
            error = _first_error(self.tool.validator("output"), answer.structured)
            if error is not None:
                raise AssertionError(
                    f"{what}, outside its outputSchema at {error.json_path}: {error.message}"
                    + (f" (the gate says result:{reason})" if reason else ""))
        if reason:
            raise AssertionError(f"{what}, which its return contract refuses: result:{reason}")


def _event(text: str) -> None:
    """``hypothesis.event``, for ``--hypothesis-show-statistics``; nothing outside a test."""
    from hypothesis import event as record
    from hypothesis.control import currently_in_test_context

    if currently_in_test_context():
        record(text)


def _is_empty(value: Any) -> bool:
    if isinstance(value, dict):
        return not value or any(isinstance(each, list) and not each for each in value.values())
    return value in ([], "", None)


def item_test(target: McpTarget, tool: ToolUnderTest, item: CheckItem, settings: Any,
              seed: int) -> tuple[Callable[[], None], _Checks]:
    """The Hypothesis test of ``item``, and its checks (which count what they sent)."""
    from hypothesis import HealthCheck, Phase, given
    from hypothesis import seed as with_seed
    from hypothesis import settings as Settings
    from hypothesis import strategies as st

    from .strategies import model_mistakes, one_defect_args, valid_args

    checks = _Checks(target, tool)
    table, name = checks.table, tool.name
    strategy: st.SearchStrategy[Any]
    check: Callable[[Any], None]
    if item.prop == "refused":
        site = item.case
        strategy = st.tuples(one_defect_args(table, name, site.kind, site.arg, site.path),
                             valid_args(table, name))

        def check(drawn: Any) -> None:
            call, follow = drawn
            checks.refused(call.args, frozenset({call.reason}), f"{site.kind}: {call.how}",
                           follow)
    elif item.prop == "mistake":
        strategy = st.tuples(model_mistakes(table, name, item.case), valid_args(table, name))

        def check(drawn: Any) -> None:
            mistake, follow = drawn
            checks.refused(mistake.args, mistake.reasons, f"mistake: {mistake.kind}", follow)
    else:
        strategy = valid_args(table, name)
        check = checks.accepts

    def test(drawn: Any) -> None:
        check(drawn)

    base = settings if settings is not None else Settings()
    suppressed = (*base.suppress_health_check, HealthCheck.too_slow,
                  HealthCheck.function_scoped_fixture, HealthCheck.differing_executors)
    # No explain phase: it replays a failure many times over, each a round trip.
    phases = tuple(phase for phase in base.phases if phase is not Phase.explain)
    configured = Settings(base, max_examples=min(base.max_examples, EXAMPLES_PER_ITEM),
                          database=None, deadline=None, suppress_health_check=suppressed,
                          phases=phases)
    wrapped = with_seed(seed)(configured(given(strategy)(test)))
    return wrapped, checks


def choose_seed(given_seed: int | None, derandomized: bool) -> int:
    """The seed of a run: the one given, the fixed one of a derandomized profile, or a new one."""
    if given_seed is not None:
        return int(given_seed)
    if derandomized:
        return DERANDOMIZED_SEED
    return random.SystemRandom().randrange(2**32)


# --- Running every item, outside pytest --------------------------------------------------------


@dataclass(frozen=True)
class ItemResult:
    """How one item ended: ``passed``, ``failed`` or ``skipped``, and what it sent."""

    item: CheckItem
    outcome: str
    message: str
    examples: int
    seed: int
    drawn: Mapping[str, int] = field(default_factory=dict)


def run_item(target: McpTarget, tool: ToolUnderTest, item: CheckItem, settings: Any,
             seed: int) -> ItemResult:
    """Run one item; a failure is a result, not an exception."""
    if item.skip:
        return ItemResult(item, "skipped", item.skip, 0, seed)
    test, checks = item_test(target, tool, item, settings, seed)
    try:
        test()
    except Exception as exc:
        found = getattr(exc, "exceptions", None) or [exc]
        lines = [_failure_text(one) for one in found]
        return ItemResult(item, "failed", "\n".join(lines), checks.sent, seed,
                          dict(checks.drawn))
    return ItemResult(item, "passed", "", checks.sent, seed, dict(checks.drawn))


def _failure_text(exc: BaseException) -> str:
    head = str(exc) if isinstance(exc, AssertionError) else f"{type(exc).__name__}: {exc}"
    notes = [note for note in getattr(exc, "__notes__", []) if note.strip()]
    return "\n".join([head, *notes])


def run_check(target_spec: str, *, allow_writes: bool = False, settings: Any = None,
              seed: int = DERANDOMIZED_SEED, errlog: Any = None,
              transport: Transport | None = None,
              progress: Callable[[ItemResult], None] | None = None) -> list[ItemResult]:
    """Every item of every tool of the server at ``target_spec``; ``UpstreamUnavailable``
    if it does not start or list its tools. ``transport`` reaches a server in this process
    instead (``target_spec`` then only names it)."""
    with McpTarget(target_spec, errlog=errlog, transport=transport) as target:
        tools = {tool.name: tool for tool in tools_under_test(target)}
        results = []
        for item in plan(list(tools.values()), allow_writes=allow_writes):
            result = run_item(target, tools[item.tool], item, settings, seed)
            if progress is not None:
                progress(result)
            results.append(result)
    return results
