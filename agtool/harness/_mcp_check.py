"""The harness on any MCP server, from the outside: its tools against their own schemas.

A target is a command (``python my_server.py``, started as a stdio server in
the SDK's safe environment, see ``agtool.harness._mcp_target``) or a
streamable HTTP URL (``http://127.0.0.1:8000/mcp``). Its tools are listed
through the official MCP client and each ``inputSchema``/``outputSchema`` goes
through the import path (``import_tool``): the contract the strategies draw
from. What the server *declared* is judged by ``jsonschema`` on its schemas as
written, never on agtool's copy. Per tool, as items, in this order:

- ``accepts``: the known-good calls (``--examples``, the schema's hints; see
  ``agtool.harness._mcp_known``), then valid calls drawn, each one argument
  away from a call that succeeded when there is one. A result outside the
  ``outputSchema`` fails; a refused valid call, an error text answered as a
  success, or an empty success where the same call with another value found
  something, warns: the schema is looser than the behaviour;
- ``refused[<site>]`` and ``mistake[<kind>]``: a call with exactly one defect
  (or one model mistake), planted on a call known to succeed when there is
  one. Accepted while the server's schema refuses it: a failure (and said as
  an error answered as a success when its text is one). Accepted while an open
  object admits it (an extra argument, no ``additionalProperties: false``): a
  warning. Refused: it counts only once pinned on its defect, when the same
  call without the defect is accepted in the same session right after, or the
  error names the planted field; otherwise inconclusive;
- ``secret``: no answer of the tool holds the canary planted in the server's
  environment;
- ``listing``: the tool's listing, re-listed after its calls, is what it was
  (a description or schema that changes during a run is a rug pull);
- ``contract``: only for a tool whose schemas the importer cannot enforce,
  skipped with the importer's reason.

Verdicts: ``failed`` when the server breaks a contract it declared (also a
crash, a session left unusable, a server frozen after a call), ``warned``,
``inconclusive`` (nothing pinned, or a tool still at work when its time limit
ended: named long-running, not failed), ``passed`` and ``skipped``. A tool that
writes (no ``readOnlyHint: true``) is called only when writes are allowed, or
when it is allowed by name. Calls are drawn from the seed and the server's
answers alone: the same seed against the same server, the same calls.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp.types as types

from .._errors import LongRunning, ServerGone, UpstreamUnavailable
from .._gate import Gate
from .._jsonschema import SchemaError, ToolDefinition, import_tool, tool_definition
from .._reasons import shown
from ..mcp._proxy import _LISTED_KEYS
from ._mcp_known import hinted_calls
from ._mcp_target import CALL_TIMEOUT, Answer, McpTarget, Transport, one_line

__all__ = [
    "CALL_TIMEOUT",
    "EXAMPLES_PER_ITEM",
    "OUTCOMES",
    "PROPERTIES",
    "CheckItem",
    "ItemResult",
    "McpTarget",
    "ServerGone",
    "Transport",
    "choose_seed",
    "plan",
    "run_check",
    "run_item",
]

#: The properties, in the order a tool's items run: ``accepts`` first, so the refusals
#: can be planted on calls known to succeed; ``listing`` last, after every call.
PROPERTIES = ("contract", "accepts", "refused", "mistake", "secret", "listing")
#: How an item can end, worst first.
OUTCOMES = ("failed", "warned", "inconclusive", "passed", "skipped")
#: The most examples one item draws, whatever the profile: each is a round trip to a
#: subprocess (two for ``refused``), and shrinking a failure adds more.
EXAMPLES_PER_ITEM = 10
#: The seed of a derandomized profile (``ci``): the same calls on every run.
DERANDOMIZED_SEED = 0
#: The most calls kept per tool as known to succeed.
MAX_KNOWN = 8
#: What to tighten in a schema that admits a value the server refuses, by its type.
_TIGHTEN = {"integer": "minimum/maximum", "number": "minimum/maximum",
            "string": "pattern, enum or minLength", "array": "minItems, maxItems or items",
            "object": "required or properties"}


# --- What is checked of each tool -------------------------------------------------------------


@dataclass(frozen=True)
class CheckItem:
    """One property of one tool: what it is run over, or why it is not run."""

    tool: str
    prop: str
    case: Any = None  #: a ``DefectSite`` (refused), a mistake kind (mistake), or ``None``
    skip: str = ""  #: why the item is not run; ``""`` when it is

    @property
    def case_label(self) -> str:
        """The case alone: ``type:limit``, ``bool-for-int``; ``""`` for none."""
        if self.case is None:
            return ""
        return self.case.replace(" ", "-") if isinstance(self.case, str) else str(self.case)

    @property
    def label(self) -> str:
        """``refused[type:limit]``, ``mistake[bool-for-int]``, ``accepts``."""
        return f"{self.prop}[{self.case_label}]" if self.case is not None else self.prop

    @property
    def name(self) -> str:
        """``tool::label``: what ``--item`` selects, exactly."""
        return f"{self.tool}::{self.label}"


@dataclass
class ToolUnderTest:
    """A listed tool: its imported contract, its schemas, what the run learnt of it."""

    name: str
    listing: ToolDefinition
    entry: dict[str, Any] | None  #: ``None`` when its input schema cannot be enforced
    problem: str = ""  #: what the importer refused, if anything
    writes: bool = False
    task_required: bool = False  #: ``execution.taskSupport: required``
    listed: dict[str, Any] = field(default_factory=dict)  #: as first listed, for ``listing``
    given: list[dict[str, Any]] = field(default_factory=list)  #: ``--examples`` calls
    #: Calls the server accepted, each with whether its answer was empty.
    known: list[tuple[dict[str, Any], bool]] = field(default_factory=list)
    probed: bool = False  #: whether ``accepts`` has run (the known calls are looked for)
    answered: int = 0  #: calls of it that got an answer
    long_running: str = ""  #: why its calls are no longer sent
    _validators: dict[str, Any] = field(default_factory=dict)

    def validator(self, which: str) -> Any:
        """A ``jsonschema`` validator of the input or output schema, as the server wrote it."""
        if which not in self._validators:
            from jsonschema.validators import Draft202012Validator, validator_for

            schema = (self.listing.input_schema if which == "input"
                      else self.listing.output_schema)
            self._validators[which] = validator_for(schema, default=Draft202012Validator)(schema)
        return self._validators[which]

    def remember(self, args: dict[str, Any], empty: bool) -> None:
        """Keep ``args`` as a call known to succeed (a base for refusals)."""
        if len(self.known) < MAX_KNOWN and all(args != call for call, _ in self.known):
            self.known.append((copy.deepcopy(args), empty))


def _listed_entry(tool: types.Tool) -> dict[str, Any]:
    return {key: value for key, value in tool.model_dump(
        by_alias=True, exclude_none=True, mode="json").items() if key in _LISTED_KEYS}


def tools_under_test(target: McpTarget, examples: Mapping[str, Sequence[dict[str, Any]]]
                     | None = None) -> list[ToolUnderTest]:
    """The server's tools, each imported as far as the importer can enforce its schemas."""
    found = []
    for index, tool in enumerate(target.tools()):
        listing = _listed_entry(tool)
        where = f"/tools/{index}"
        try:
            definition = tool_definition(listing, target.target, where)
        except SchemaError as exc:  # a listing the importer cannot read at all
            bare = ToolDefinition(tool.name, "mcp", "", {}, None, where, where)
            found.append(ToolUnderTest(tool.name, bare, None, str(exc)))
            continue
        under_test = _imported(definition, target.target)
        under_test.listed = listing
        under_test.task_required = (tool.execution is not None
                                    and tool.execution.task_support == "required")
        under_test.given = [dict(call) for call in (examples or {}).get(tool.name, ())]
        if target.canary and target.canary in json.dumps(listing):
            target.leaks.setdefault(tool.name, "its listing holds the value of the canary")
        found.append(under_test)
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


def _not_called(tool: ToolUnderTest, allow_writes: bool, allowed: Collection[str]) -> str:
    """Why ``tool`` is never called, or ``""``."""
    if tool.task_required:
        return (f"tool {shown(tool.name)!r} requires task augmentation (execution.taskSupport: "
                f"required): it is not called directly")
    if tool.writes and not allow_writes and tool.name not in allowed:
        return (f"tool {shown(tool.name)!r} may write (no readOnlyHint: true): called only when "
                f"writes are allowed (agtool check --allow-writes, or --allow-tool "
                f"{shown(tool.name)} for this one; --agtool-allow-writes or --agtool-allow-tool "
                f"under pytest)")
    return ""


def plan(tools: Sequence[ToolUnderTest], *, allow_writes: bool = False,
         allow_tools: Collection[str] = ()) -> list[CheckItem]:
    """Every item of every tool, in listing order; skipped ones carry their reason."""
    from .strategies import defect_sites, mistake_kinds

    items: list[CheckItem] = []
    for tool in tools:
        if tool.problem:
            items.append(CheckItem(tool.name, "contract",
                                   skip=f"not enforceable by the gate: {tool.problem}"))
        if tool.entry is not None:
            skip = _not_called(tool, allow_writes, allow_tools)
            table = {tool.name: tool.entry}
            items.append(CheckItem(tool.name, "accepts", None, skip))
            items += [CheckItem(tool.name, "refused", site, skip)
                      for site in defect_sites(table, tool.name)]
            items += [CheckItem(tool.name, "mistake", kind, skip)
                      for kind in mistake_kinds(table, tool.name)]
            items.append(CheckItem(tool.name, "secret", None, skip))
        items.append(CheckItem(tool.name, "listing"))
    return items


# --- The properties --------------------------------------------------------------------------


def _show(value: Any) -> str:
    """``value`` as JSON, on one line whatever it holds, and cut if long."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    text = one_line(text)
    return text if len(text) <= 200 else text[:197] + "..."


def _excerpt(text: str, limit: int = 160) -> str:
    """The start of a server's text, quoted as JSON on one line."""
    text = text.strip()
    return one_line(json.dumps(text if len(text) <= limit else text[:limit - 3] + "...",
                               ensure_ascii=False))


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


def _searches(tool: str) -> bool:
    """Whether ``tool`` is named as a search, for which no match is a rightful empty answer
    (a lookup's empty answer to a name that does not exist is not)."""
    return bool(re.search(r"search|list|query|filter", tool, re.IGNORECASE))


def _names_any(text: str, names: Collection[str]) -> str:
    """The first of ``names`` (two characters or more) ``text`` names as a word, or ``""``."""
    for name in names:
        if len(name) >= 2 and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text):
            return name
    return ""


class _Checks:
    """The checks of one tool's items, against one server, counting what they sent."""

    def __init__(self, target: McpTarget, tool: ToolUnderTest) -> None:
        if tool.entry is None:  # pragma: no cover - plan() makes no such item
            raise ValueError(f"tool {tool.name!r} has no contract to check")
        self.target, self.tool = target, tool
        self.name = shown(tool.name)
        self.table = {tool.name: tool.entry}
        self.gate = Gate(self.table)  # only its checks are used: its body never runs
        self.drawn: Counter[str] = Counter()
        self.gone = ""  #: what broke the server, once something did
        #: Examples sent, shrinking's included (a draw not sent is not counted).
        self.sent = 0
        self.pinned = 0  #: refusals pinned on their defect
        self.accepted = 0  #: valid calls accepted
        self.unpinned = ""  #: the first refusal that could not be pinned
        #: kind -> the most telling warning of that kind (its rank, its text)
        self.warnings: dict[str, tuple[int, str]] = {}

    # --- what may be sent ---

    def written_error(self, args: Any) -> str:
        """What ``jsonschema`` finds wrong with ``args`` on the server's inputSchema as
        written, or ``""``."""
        error = _first_error(self.tool.validator("input"), args)
        return "" if error is None else f"{error.json_path}: {error.message}"

    def valid(self, args: Any) -> Any:
        """``args`` on the wire, if the gate and the server's schema both admit it."""
        wire = _wire(args)
        if not isinstance(wire, dict):
            _event("not sent: JSON cannot carry it")
            return None
        if self.gate.validate_args(self.tool.name, wire) != "" or self.written_error(wire):
            _event("not sent: jsonschema reads the schema otherwise (STRICTER_THAN_JSON_SCHEMA)")
            return None
        return wire

    def defective(self, args: Any, reasons: frozenset[str], base: Any
                  ) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
        """``(kind, call, base)`` on the wire if the call holds exactly the planted defect:
        ``contract`` when the server's schema refuses it, ``open`` when only an open object
        admits it (an extra argument); ``None`` when it cannot be sent as drawn."""
        wire, base_wire = _wire(args), self.valid(base)
        if not isinstance(wire, dict) or base_wire is None:
            _event("not sent: JSON cannot carry it, or the call without the defect is invalid")
            return None
        extra = all(reason.startswith("unexpected:") for reason in reasons)
        found = self.gate.validate_args(self.tool.name, wire)
        # An importer that keeps an open object open admits the extra key: still planted.
        if found not in reasons and not (extra and found == ""):
            _event("not sent: the JSON round trip changed the defect")
            return None
        if self.written_error(wire):
            return "contract", wire, base_wire
        if extra:
            return "open", wire, base_wire
        _event("not sent: jsonschema reads the schema otherwise (STRICTER_THAN_JSON_SCHEMA)")
        return None

    # --- sending ---

    def send(self, args: dict[str, Any], what: str, counted: bool = True) -> Answer:
        """One call; ``counted`` when it is an example (not the call sent after one)."""
        from hypothesis.errors import UnsatisfiedAssumption

        # After a death, the item's later examples (shrinking's) are not sent: each would
        # start the server again only to kill it, and the news is the call that did.
        if self.gone:
            raise AssertionError(self.gone)
        if self.tool.long_running:  # not sent: an unsent example, as assume(False) makes it
            raise UnsatisfiedAssumption(self.tool.long_running)
        call = f"{self.name}({_show(args)})"
        self.sent += counted
        try:
            answer = self.target.call(self.tool.name, args)
        except LongRunning as exc:
            self.tool.long_running = (
                f"{what} {call}: {exc}. Tool {self.name!r} is taken for long-running, not "
                f"failed, and its later calls are not sent; give it more time with "
                f"--tool-timeout {self.name}=SECONDS")
            raise UnsatisfiedAssumption(self.tool.long_running) from None
        except ServerGone as exc:
            self.gone = (f"{what} {call} broke the server or the session: {exc}; the item's "
                         f"later examples were not sent")
            raise AssertionError(self.gone) from None
        self.tool.answered += 1
        return answer

    def warn(self, kind: str, text: str, rank: int = 0) -> None:
        """Keep the first warning of ``kind``, unless a later one says more (a higher
        ``rank``: one that names the argument)."""
        if kind not in self.warnings or rank > self.warnings[kind][0]:
            self.warnings[kind] = (rank, text)
        _event(f"warned: {kind}")

    # --- refusals ---

    def refused(self, args: Any, base: Any, reasons: frozenset[str], how: str) -> None:
        """A call with exactly one defect is refused, pinned on it, and the session lives."""
        from hypothesis import assume

        assume(not self.tool.long_running)
        found = self.defective(args, reasons, base)
        assume(found is not None)
        kind, wire, base_wire = found  # type: ignore[misc]  # assume(False) raised on None
        self.drawn[how] += 1
        answer = self.send(wire, "the defective call")
        call, expected = f"{self.name}({_show(wire)})", sorted("args:" + r for r in reasons)
        names = sorted({reason.split(":", 1)[1] for reason in reasons})
        planted = f"planted {' or '.join(expected)} ({how})"
        if not answer.refused:
            self._accepted_defect(kind, call, answer, planted, wire, names)
            return
        _event("refused as a JSON-RPC error" if answer.protocol_error else "refused: isError")
        if answer.reason and answer.reason not in expected:
            raise AssertionError(
                f"tool {self.name!r} refused {call} with {answer.reason!r}; the defect planted "
                f"is {' or '.join(map(repr, expected))}")
        pinned = bool(answer.reason) or bool(_names_any(answer.text, names))
        after = self.send(base_wire, f"after the refused {call}, the same call without the "
                                     f"defect", counted=False)
        if not pinned and not after.refused and not after.error_as_success:
            pinned = True
            self.tool.remember(base_wire, after.empty)
        if pinned:
            self.pinned += 1
            _event("refusal pinned on its defect")
            return
        _event("refusal not pinned")
        if not self.unpinned:
            self.unpinned = (
                f"{call} was refused ({_excerpt(answer.text)}), but the refusal cannot be "
                f"pinned on the {planted}: the same call without it, "
                f"{self.name}({_show(base_wire)}), was refused too "
                f"({_excerpt(after.text)}), and the error names no "
                f"{' or '.join(map(repr, names))}")

    def _accepted_defect(self, kind: str, call: str, answer: Answer, planted: str,
                         wire: dict[str, Any], names: list[str]) -> None:
        if kind == "open":
            self.warn("open object", (
                f"tool {self.name!r} accepted {call}, with {' or '.join(map(repr, names))} its "
                f"inputSchema does not name, and answered {_show(answer.value)}: the schema "
                f"leaves the object open, so a mistaken name runs with defaults and looks like "
                f"a success; set additionalProperties: false"))
            return
        schema = self.written_error(wire)
        if answer.error_as_success:
            raise AssertionError(
                f"tool {self.name!r} answered an error as a success: {call} got isError false "
                f"with {_excerpt(answer.text)}; {planted}; jsonschema on the server's "
                f"inputSchema: {schema}")
        raise AssertionError(
            f"tool {self.name!r} accepted a call its own inputSchema refuses: {call} answered "
            f"{_show(answer.value)}; {planted}; jsonschema on the server's inputSchema: "
            f"{schema}")

    # --- valid calls ---

    def accepts(self, args: Any, base: dict[str, Any] | None = None, varied: str = "") -> None:
        """A valid call, drawn: see ``accept``."""
        from hypothesis import assume

        assume(not self.tool.long_running)
        wire = self.valid(args)
        assume(wire is not None)
        self.accept(wire, base, varied)

    def accept(self, wire: dict[str, Any], base: dict[str, Any] | None = None,
               varied: str = "", source: str = "valid call") -> None:
        """A valid call is answered, within its outputSchema; a refusal, an error text or an
        empty answer where ``base`` found something, warns. ``varied`` is the one argument
        ``wire`` changes of ``base``, a call known to succeed; ``source`` what made the call
        (``valid call``: drawn; ``given call``: ``--examples``; ``hinted call``: the schema)."""
        self.drawn[source] += 1
        answer = self.send(wire, "the valid call")
        call = f"{self.name}({_show(wire)})"
        if answer.refused:
            if source != "hinted call":  # a candidate, not a claim of the schema's
                self.warn("refused valid", self._refused_valid(
                    call, wire, answer, base, varied, source == "given call"),
                    rank=1 if source == "given call" or varied else 0)
            return
        if answer.error_as_success:
            self.warn("error as success", (
                f"tool {self.name!r} answered {call} with what reads as an error, with isError "
                f"false: {_excerpt(answer.text)}; an error should be answered isError: true"))
            return
        self._check_result(call, answer)
        self.accepted += 1
        base_empty = next((empty for known, empty in self.tool.known if known == base), True)
        self.tool.remember(wire, answer.empty)
        _event("accepts: " + ("empty result" if answer.empty else "answered"))
        if (base is not None and varied and answer.empty and not base_empty
                and wire.get(varied) not in ([], "", {}) and not _searches(self.tool.name)):
            self.warn("empty success", (
                f"tool {self.name!r} answered {call} with an empty success, where "
                f"{self.name}({_show(base)}) found something: {varied!r} = "
                f"{_show(wire.get(varied))} matches nothing, which should be refused "
                f"(isError: true), or the schema should exclude the value"))

    def _refused_valid(self, call: str, wire: dict[str, Any], answer: Answer,
                       base: dict[str, Any] | None, varied: str, given: bool) -> str:
        said = _excerpt(answer.reason or answer.text)
        if given:
            return (f"tool {self.name!r} refused {call}, a call given as known-good "
                    f"(--examples): {said}")
        if base is not None and varied:
            properties = self.tool.listing.input_schema.get("properties") or {}
            kind = (properties.get(varied) or {}).get("type")
            tighten = _TIGHTEN.get(kind if isinstance(kind, str) else "", "enum or const")
            return (f"your schema admits {_show(wire.get(varied))} for {varied!r} of tool "
                    f"{self.name!r}; the server refuses it: {call} answered {said}, where "
                    f"{self.name}({_show(base)}) was accepted; tighten the schema of "
                    f"{varied!r} with {tighten}")
        return (f"tool {self.name!r} refused what its schema admits: {call} answered {said}; "
                f"tighten the schema, or give a call that succeeds with --examples FILE")

    def _check_result(self, call: str, answer: Answer) -> None:
        schema = self.tool.listing.output_schema
        if schema is None:
            return
        if answer.structured is None:
            raise AssertionError(f"tool {self.name!r} has an outputSchema but {call} returned "
                                 f"no structuredContent")
        error = _first_error(self.tool.validator("output"), answer.structured)
        if error is not None:
            reason = self.gate.validate_result(self.tool.name, answer.structured)
            raise AssertionError(
                f"{call} returned {_show(answer.structured)}, outside its outputSchema at "
                f"{error.json_path}: {error.message}"
                + (f" (the gate says result:{reason})" if reason else ""))

    def probe(self) -> None:
        """Send the known-good candidates: the calls given, then the schema's hints."""
        from hypothesis.errors import UnsatisfiedAssumption

        from .strategies import simplest_args

        try:
            simplest: dict[str, Any] | None = simplest_args(self.table, self.tool.name)
        except Exception:  # no call keeps the contract: only given calls can be tried
            simplest = None
        given = [(call, True) for call in self.tool.given]
        hinted = [(call, False) for call in hinted_calls(self.tool.listing.input_schema,
                                                        simplest)]
        for call, is_given in given + hinted:
            wire = _wire(call)
            if not isinstance(wire, dict) or self.written_error(wire):
                if is_given:
                    self.warn("given invalid", (
                        f"the call given for tool {self.name!r}, {_show(call)}, is outside its "
                        f"inputSchema: {self.written_error(wire) or 'not a JSON object'}"))
                continue
            if not is_given and self.valid(wire) is None:
                continue
            with contextlib.suppress(UnsatisfiedAssumption):  # a long-running tool
                self.accept(wire, source="given call" if is_given else "hinted call")
        self.probe_edges()

    def probe_edges(self) -> None:
        """Send the first call known to succeed with one argument at an edge its schema
        admits (0 and -1 for a number, ``""``, ``[]``, each enum value): what a careful
        person tries first, so what it finds is found on every run, not by luck."""
        from hypothesis.errors import UnsatisfiedAssumption

        if not self.tool.known:
            return
        base = min(self.tool.known, key=lambda pair: pair[1])[0]  # one that found something
        properties = self.tool.listing.input_schema.get("properties") or {}
        for arg, schema in properties.items():
            for edge in _edges(schema):
                wire = self.valid({**copy.deepcopy(base), arg: edge})
                if wire is None or wire == base:
                    continue
                with contextlib.suppress(UnsatisfiedAssumption):
                    self.accept(wire, base, arg, source="edge call")


#: A name nothing is called: what a lookup of something that does not exist sends.
NO_SUCH_NAME = "agtool-no-such-name"


def _edges(schema: Any) -> list[Any]:
    """The edge values of one property's schema, as written (the caller keeps the valid):
    0 and -1 and the bounds of a number, the empty string and a name nothing has, the empty
    list and a list of that name, both booleans, each enum value."""
    if not isinstance(schema, dict):
        return []
    if isinstance(schema.get("enum"), list):
        return list(schema["enum"])
    kind = schema.get("type")
    if kind in ("integer", "number"):
        return [0, -1, *(schema[key] for key in ("minimum", "maximum") if key in schema)]
    if kind == "string":
        return ["", NO_SUCH_NAME]
    if kind == "array":
        items = schema.get("items")
        return [[], *([[NO_SUCH_NAME]] if isinstance(items, dict)
                                          and items.get("type") == "string" else [])]
    return [True, False] if kind == "boolean" else []


def _event(text: str) -> None:
    """``hypothesis.event``, for ``--hypothesis-show-statistics``; nothing outside a test."""
    from hypothesis import event as record
    from hypothesis.control import currently_in_test_context

    if currently_in_test_context():
        record(text)


def _strategy(item: CheckItem, checks: _Checks) -> tuple[Any, Callable[[Any], None]]:
    """What ``item`` draws, and the check of each draw; bases are the calls known now."""
    from hypothesis import strategies as st

    from .strategies import model_mistakes, one_defect_args, valid_args

    table, name = checks.table, checks.tool.name
    # Calls that found something first: Hypothesis draws the first base the most.
    known = sorted(checks.tool.known, key=lambda pair: pair[1])
    bases = [call for call, _ in known if checks.gate.validate_args(name, call) == ""]
    if item.prop == "refused":
        site = item.case
        strategy = one_defect_args(table, name, site.kind, site.arg, site.path, bases=bases)

        def check(call: Any) -> None:
            checks.refused(call.args, call.base, frozenset({call.reason}),
                           f"{site.kind}: {call.how}")
        return strategy, check
    if item.prop == "mistake":
        def check_mistake(mistake: Any) -> None:
            checks.refused(mistake.args, mistake.base, mistake.reasons,
                           f"mistake: {mistake.kind}")
        return model_mistakes(table, name, item.case, bases=bases), check_mistake
    fresh = valid_args(table, name).map(lambda args: (None, "", args))
    drawn: Any = fresh
    if bases and checks.tool.entry and checks.tool.entry.get("args"):
        drawn = st.one_of(_varied(table, name, bases), fresh)

    def check_valid(drawn: Any) -> None:
        base, varied, args = drawn
        checks.accepts(args, base, varied)
    return drawn, check_valid


def _varied(table: Mapping[str, Any], name: str, bases: list[dict[str, Any]]) -> Any:
    """A call known to succeed with one argument set to another valid value."""
    from hypothesis import strategies as st

    from .strategies._args import contract_of
    from .strategies._specs import valid_value

    specs = contract_of(table, name).args

    @st.composite
    def varied(draw: st.DrawFn) -> tuple[dict[str, Any], str, dict[str, Any]]:
        base = draw(st.sampled_from(bases))
        arg = draw(st.sampled_from(list(specs)))
        return base, arg, {**copy.deepcopy(base), arg: draw(valid_value(specs[arg]))}
    return varied()


def _hypothesis_run(item: CheckItem, checks: _Checks, settings: Any, seed: int) -> None:
    """Run ``item``'s Hypothesis test (failures raise, as Hypothesis reports them)."""
    from hypothesis import HealthCheck, Phase, given
    from hypothesis import seed as with_seed
    from hypothesis import settings as Settings
    from hypothesis.strategies import SearchStrategy

    strategy, check = _strategy(item, checks)
    drawn_from: SearchStrategy[Any] = strategy

    def test(drawn: Any) -> None:
        check(drawn)

    base = settings if settings is not None else Settings()
    suppressed = (*base.suppress_health_check, HealthCheck.too_slow, HealthCheck.filter_too_much,
                  HealthCheck.function_scoped_fixture, HealthCheck.differing_executors)
    # No explain phase: it replays a failure many times over, each a round trip.
    phases = tuple(phase for phase in base.phases if phase is not Phase.explain)
    configured = Settings(base, max_examples=min(base.max_examples, EXAMPLES_PER_ITEM),
                          database=None, deadline=None, suppress_health_check=suppressed,
                          phases=phases)
    wrapped: Any = given(drawn_from)(test)
    run: Callable[[], None] = with_seed(seed)(configured(wrapped))
    run()


def choose_seed(given_seed: int | None, derandomized: bool) -> int:
    """The seed of a run: the one given, the fixed one of a derandomized profile, or a new one."""
    if given_seed is not None:
        return int(given_seed)
    if derandomized:
        return DERANDOMIZED_SEED
    return random.SystemRandom().randrange(2**32)


# --- Running one item --------------------------------------------------------------------------


@dataclass(frozen=True)
class ItemResult:
    """How one item ended (one of ``OUTCOMES``), why, and what it sent."""

    item: CheckItem
    outcome: str
    message: str
    examples: int
    seed: int
    drawn: Mapping[str, int] = field(default_factory=dict)
    duration: float = 0.0
    accepted: int = 0  #: valid calls the server accepted (``accepts``)


def _failure_text(exc: BaseException) -> str:
    head = str(exc) if isinstance(exc, AssertionError) else f"{type(exc).__name__}: {exc}"
    notes = [note for note in getattr(exc, "__notes__", []) if note.strip()]
    return "\n".join([head, *notes])


def _verdict(item: CheckItem, checks: _Checks) -> tuple[str, str]:
    """The outcome and message of an item that raised nothing."""
    if checks.warnings:
        return "warned", "\n".join(text for _, text in checks.warnings.values())
    if checks.tool.long_running and not (checks.pinned or checks.accepted):
        return "inconclusive", checks.tool.long_running
    if item.prop == "accepts":
        if checks.accepted:
            return "passed", ""
        return "inconclusive", "no valid call could be sent"
    if checks.pinned:
        return "passed", ""
    if checks.unpinned:
        return "inconclusive", checks.unpinned
    return "inconclusive", "no call could be sent with exactly the planted defect"


def _run_calls(target: McpTarget, tool: ToolUnderTest, item: CheckItem, settings: Any,
               seed: int) -> tuple[str, str, _Checks]:
    from hypothesis.errors import Unsatisfiable

    checks = _Checks(target, tool)
    if tool.long_running:
        return "inconclusive", tool.long_running, checks
    try:
        if item.prop == "accepts":
            tool.probed = True
            checks.probe()
        _hypothesis_run(item, checks, settings, seed)
    except Unsatisfiable:
        pass  # every draw was left unsent: said by the verdict
    except Exception as exc:
        found = getattr(exc, "exceptions", None) or [exc]
        return "failed", "\n".join(_failure_text(one) for one in found), checks
    outcome, message = _verdict(item, checks)
    return outcome, message, checks


def _secret(target: McpTarget, tool: ToolUnderTest) -> tuple[str, str]:
    if not target.canary:
        return "skipped", ("the server was not started by the harness (a URL, or a server in "
                           "this process): no canary could be planted in its environment")
    if tool.name in target.leaks:
        return "failed", (f"tool {shown(tool.name)!r} leaked a secret planted in the server's "
                          f"environment: {target.leaks[tool.name]}")
    if not tool.answered:
        return "inconclusive", f"no call of tool {shown(tool.name)!r} was answered"
    return "passed", ""


def _listing(target: McpTarget, tool: ToolUnderTest) -> tuple[str, str]:
    name = shown(tool.name)
    try:
        now = {each.name: _listed_entry(each) for each in target.list_now(tool.name)}
    except UpstreamUnavailable as exc:
        return "failed", f"after the calls of tool {name!r}, the server {exc}"
    if tool.name not in now:
        return "failed", (f"tool {name!r} was listed at the start of the run, and is no longer "
                          f"listed after its calls")
    first, later = tool.listed, now[tool.name]
    changed = [key for key in sorted(set(first) | set(later)) if first.get(key) != later.get(key)]
    if changed:
        key = changed[0]
        return "failed", (f"the listing of tool {name!r} changed during the run: its {key} was "
                          f"{_show(first.get(key))}, and after its calls is "
                          f"{_show(later.get(key))}" + (f" (also {', '.join(changed[1:])})"
                                                        if changed[1:] else ""))
    return "passed", ""


def run_item(target: McpTarget, tool: ToolUnderTest, item: CheckItem, settings: Any,
             seed: int) -> ItemResult:
    """Run one item; a failure is a result, not an exception. Its message is scrubbed of
    every value of the caller's environment."""
    if item.skip:
        return ItemResult(item, "skipped", item.skip, 0, seed)
    started = time.perf_counter()
    if item.prop in ("refused", "mistake", "secret") and not tool.probed:
        # The calls known to succeed are looked for first, as a whole run would have.
        run_item(target, tool, CheckItem(tool.name, "accepts"), settings, seed)
    examples, drawn, accepted = 0, {}, 0
    if item.prop == "secret":
        outcome, message = _secret(target, tool)
    elif item.prop == "listing":
        outcome, message = _listing(target, tool)
    else:
        outcome, message, checks = _run_calls(target, tool, item, settings, seed)
        examples, drawn, accepted = checks.sent, dict(checks.drawn), checks.accepted
    # Lines split at "\n" alone: a separator inside server data (U+2028) is escaped.
    message = "\n".join(one_line(line) for line in target.scrubber.text(message).split("\n"))
    return ItemResult(item, outcome, message, examples, seed, drawn,
                      round(time.perf_counter() - started, 6), accepted)


# --- Running every item, outside pytest --------------------------------------------------------


def run_check(target_spec: str, *, allow_writes: bool = False, allow_tools: Collection[str] = (),
              settings: Any = None, seed: int = DERANDOMIZED_SEED, errlog: Any = None,
              transport: Transport | None = None, env: Mapping[str, str] | None = None,
              cwd: str | None = None, timeout: float = CALL_TIMEOUT,
              tool_timeouts: Mapping[str, float] | None = None,
              examples: Mapping[str, Sequence[dict[str, Any]]] | None = None,
              only: Collection[str] = (), canary: str | None = None,
              progress: Callable[[ItemResult], None] | None = None) -> list[ItemResult]:
    """Every item of every tool of the server at ``target_spec`` (or the items named in
    ``only``, ``tool::label``); ``UpstreamUnavailable`` if it does not start or list its tools.
    ``transport`` reaches a server in this process instead (``target_spec`` then only names
    it, and ``canary`` is the secret the test planted, if any)."""
    with McpTarget(target_spec, errlog=errlog, transport=transport, env=env, cwd=cwd,
                   timeout=timeout, tool_timeouts=tool_timeouts, canary=canary) as target:
        tools = {tool.name: tool for tool in tools_under_test(target, examples)}
        results = []
        for item in plan(list(tools.values()), allow_writes=allow_writes,
                         allow_tools=allow_tools):
            if only and item.name not in only:
                continue
            result = run_item(target, tools[item.tool], item, settings, seed)
            if progress is not None:
                progress(result)
            results.append(result)
    return results


def never_accepted(results: Sequence[ItemResult]) -> list[str]:
    """The tools whose ``accepts`` ran and got no call accepted, in order."""
    return [result.item.tool for result in results
            if result.item.prop == "accepts" and result.outcome != "skipped"
            and not result.accepted]
