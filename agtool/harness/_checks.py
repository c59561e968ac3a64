"""The harness's checks: what must never happen at the gate, as plain functions.

Each check drives a gate built by ``instrument`` (whose tool bodies are
``Body`` objects that count their runs), and raises ``AssertionError`` with a
message saying what went wrong, on which call. Nothing here imports
Hypothesis: the tests, the pytest plugin and the report feed the checks with
generated calls, and anyone can call them with calls written by hand.

The counts a check relies on come from the ``Body`` wrappers, not from the
gate; ``gate.stats`` is checked against them, so a gate that miscounts fails
too.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
import reprlib
from collections.abc import Callable, Mapping
from itertools import count
from typing import Any

from .._answers import is_retryable
from .._contract import RISKS, Spec, ToolContract, check_table, expected_raises
from .._gate import Gate
from .._outcome import Envelope
from .._reasons import (
    ARG_CHECKS,
    ARG_REASONS,
    RESULT_CHECKS,
    WRITE_UNKNOWN,
    Reason,
    named,
    parse_reason,
    shown,
)
from .._records import redact_value
from .._stats import ToolStats

__all__ = [
    "ENVELOPE_KEYS",
    "LAST",
    "REAL",
    "Body",
    "LastCall",
    "body_of",
    "check_bad_result",
    "check_envelope",
    "check_hostile",
    "check_interrupted",
    "check_memo",
    "check_refused",
    "check_replaced",
    "check_returns",
    "contents",
    "echo_of",
    "instrument",
    "last_call",
    "raised_at",
    "same_value",
    "show",
    "writes",
]

ENVELOPE_KEYS = frozenset({"ok", "value", "error"})
Table = Mapping[str, Mapping[str, Any]]
#: The run id of every harness call; each call is its own step unless a check says otherwise.
HARNESS_RUN = "agtool-harness"
_steps = count(1)


class _Real:
    def __repr__(self) -> str:
        return "REAL"


#: ``Body.value`` when the body calls the real function.
REAL: Any = _Real()

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 80
_repr.maxlong = 60


def show(value: object) -> str:
    """A short repr for messages, for any object (even one whose repr raises)."""
    try:
        return _repr.repr(value)
    except Exception:
        return f"<{type(value).__name__} with a repr that raises>"


class Body:
    """A tool body that counts its runs and keeps the arguments of each.

    It calls the real function, or, once ``value`` is set, returns a deep copy
    of that instead (a stub: for tools with side effects, and to choose what
    comes back).
    """

    def __init__(self, name: str, fn: Callable[..., Any] | None = None) -> None:
        self.name = name
        self.fn = fn
        self.value: Any = REAL if fn is not None else None
        self.runs = 0
        self.seen: list[dict[str, Any]] = []
        self.last: Any = None  #: what the latest run returned
        self.raised: BaseException | None = None  #: what the latest run raised
        #: Raised by every run instead of answering, while set (an interrupt, for a check).
        self.raises: BaseException | None = None

    def __call__(self, /, **args: Any) -> Any:
        self.runs += 1
        self.seen.append(args)
        self.raised = None
        try:
            if self.raises is not None:
                raise self.raises
            if self.value is REAL:
                assert self.fn is not None
                self.last = self.fn(**args)
            else:
                self.last = copy.deepcopy(self.value)
        except BaseException as exc:
            self.raised = exc  # the gate answers raised:<Name>; the harness wants the object
            raise
        return self.last

    @property
    def stubbed(self) -> bool:
        """Whether the body returns ``value`` rather than calling the real function."""
        return self.value is not REAL

    def __repr__(self) -> str:
        return f"Body({self.name!r}, runs={self.runs})"


def instrument(table: Table, names: list[str] | None = None, *, stub: bool = False) -> Gate:
    """A fresh ``Gate`` over a copy of ``table`` whose tool bodies are ``Body`` wrappers.

    ``names`` keeps only those tools (one-tool gates are cheaper to build);
    ``stub`` makes every body a stub returning ``None`` until its ``value`` is
    set. Write tools are always stubbed: the harness never acts on the world.
    The gate may use every risk level (authority has its own tests). The
    caller's table is validated (``ContractError``) and not changed.
    """
    contracts = check_table(table)
    chosen = list(contracts) if names is None else names
    copied = {name: {**table[name], "fn": Body(name, None if stub or writes(contracts[name])
                                                  else contracts[name].fn)}
              for name in chosen}
    return Gate(copied, scope=RISKS)


def writes(contract: ToolContract) -> bool:
    """Whether the harness must stub this tool: it writes to the world."""
    return contract.effect == "write"


def body_of(gate: Gate, name: str) -> Body:
    """The ``Body`` of ``name`` in a gate built by ``instrument``."""
    fn = gate.table[name]["fn"]
    if not isinstance(fn, Body):
        raise TypeError(f"tool {name!r} of this gate is not instrumented: use instrument()")
    return fn


class _Runs:
    """Body runs and gate counters of one tool, before a step, to compare after it."""

    def __init__(self, gate: Gate, name: str) -> None:
        self.gate, self.name = gate, name
        self.body = body_of(gate, name)
        self.runs = self.body.runs
        self.stats = gate.stats(name)

    def since(self, what: str) -> tuple[int, ToolStats]:
        """Body runs since the snapshot, checked against the gate's own count."""
        runs = self.body.runs - self.runs
        stats = self.gate.stats(self.name)
        counted = stats.runs - self.stats.runs
        assert counted == runs, (
            f"{what}: the body of {self.name!r} ran {runs} time(s) but gate.stats says {counted}")
        return runs, stats


def _delta(before: ToolStats, after: ToolStats) -> ToolStats:
    return ToolStats(*(getattr(after, field.name) - getattr(before, field.name)
                       for field in dataclasses.fields(ToolStats)))


@dataclasses.dataclass
class LastCall:
    """The latest call a check made, for a failure report: the call, and what it came to."""

    name: Any = None
    args: Any = None
    envelope: Any = None
    raised: BaseException | None = None  #: what ``call_tool`` itself raised
    body_raised: BaseException | None = None  #: what the body raised, if it did


#: Set by every call a check makes: one process runs one check at a time (xdist uses processes).
LAST = LastCall()


def last_call() -> LastCall:
    """The latest call a check made (a failure report reads it)."""
    return LAST


def _record(name: object, args: object, envelope: object = None,
            raised: BaseException | None = None, gate: Gate | None = None) -> None:
    body = None
    if gate is not None and isinstance(name, str) and _has_tool(gate, name):
        fn = gate.table[name].get("fn") if isinstance(gate.table[name], dict) else None
        body = fn if isinstance(fn, Body) else None
    LAST.name, LAST.args, LAST.envelope, LAST.raised = name, args, envelope, raised
    LAST.body_raised = body.raised if body is not None else None


def _call(gate: Gate, name: object, args: object,
          echo: Mapping[str, Any] | None = None, step_id: str | None = None,
          **given: Any) -> Envelope:
    """``call_tool`` as a trusted caller: every scope, an approval of these args, a run id.

    Each call is its own step unless ``step_id`` is given, so a write runs
    unless the same step repeats it. ``given`` replaces the trusted caller's
    ``scope`` or ``approvals`` (a hostile caller's).
    """
    # Approved as the trusted caller would, from what the args hold: ``approve`` is the
    # application's, not the model's, and a hostile dict is the model's doing.
    # Only where one is needed: approving digests the args, and hostile ones are huge.
    approvals = []
    if isinstance(name, str) and isinstance(args, dict):
        contract = gate.contract(name)
        if contract is not None and contract.needs_approval:
            approvals = [gate.approve(name, contents(args))]
    kwargs: dict[str, Any] = {"approvals": approvals, **given}
    _record(name, args)
    try:
        envelope = gate.call_tool(name, args, echo, run_id=HARNESS_RUN,
                                  step_id=step_id or f"step-{next(_steps)}", **kwargs)
    except Exception as exc:
        _record(name, args, raised=exc, gate=gate)
        raise AssertionError(f"call_tool({show(name)}, {show(args)}) raised "
                             f"{type(exc).__name__}: {show(exc)} at {raised_at(exc)}; "
                             "the gate must never raise") from exc
    _record(name, args, envelope, gate=gate)
    _check_shape(envelope, f"call_tool({show(name)}, {show(args)})")
    return envelope


def raised_at(exc: BaseException) -> str:
    """``file:line in function`` of the innermost frame ``exc`` passed, outside the harness."""
    where = "an unknown place"
    trace = exc.__traceback__
    while trace is not None:
        code = trace.tb_frame.f_code
        if code.co_filename != __file__:
            where = f"{code.co_filename}:{trace.tb_lineno} in {code.co_name}"
        trace = trace.tb_next
    return where


def _check_shape(envelope: object, what: str) -> None:
    assert type(envelope) is dict, f"{what} answered {show(envelope)}, not a dict"
    assert set(envelope) == ENVELOPE_KEYS, (
        f"{what} answered keys {sorted(map(str, envelope))}, expected {sorted(ENVELOPE_KEYS)}")
    assert type(envelope["ok"]) is bool, f"{what}: ok is {show(envelope['ok'])}, not a bool"
    assert type(envelope["error"]) is str, f"{what}: error is {show(envelope['error'])}"
    if envelope["ok"]:
        assert envelope["error"] == "", f"{what}: ok, yet error is {envelope['error']!r}"
    else:
        assert envelope["value"] is None, f"{what}: failed, yet value is {show(envelope['value'])}"
        assert envelope["error"], f"{what}: failed with an empty error"


_UNCOPIED: Any = object()


def _copy(value: Any) -> Any:
    try:
        return copy.deepcopy(value)
    except Exception:
        return _UNCOPIED  # cannot be copied: what is compared with it is not checked


def _unchanged(before: Any, after: Any, what: str) -> None:
    if before is not _UNCOPIED:
        assert same_value(before, after), (
            f"{what} changed the caller's arguments: {show(before)} became {show(after)}")


def same_value(left: Any, right: Any) -> bool:
    """Equal and of the same types all the way down: ``1``, ``1.0`` and ``True`` all differ.

    Floats are compared by ``repr``, so ``-0.0`` differs from ``0.0`` and NaN
    equals NaN; dicts ignore key order. Other objects compare with ``==``.
    """
    if type(left) is not type(right):
        return False
    if type(left) is float:
        return repr(left) == repr(right) or (math.isnan(left) and math.isnan(right))
    if type(left) in (list, tuple):
        return len(left) == len(right) and all(map(same_value, left, right))
    if type(left) is dict:
        return left.keys() == right.keys() and all(same_value(left[key], right[key])
                                                   for key in left)
    try:
        return bool(left == right)
    except Exception:
        return left is right


def echo_of(gate: Gate, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """The echo mapping of a caller that copied faithfully: each echo argument's own value."""
    contract = gate.contract(name)
    specs = contract.args if contract is not None else {}
    return {arg: args[arg] for arg, spec in specs.items() if spec.echo and arg in args}


# --- property 1: refused arguments ---------------------------------------------------------------


def check_refused(gate: Gate, name: str, args: Any, expected_reason: str,
                  echo: Mapping[str, Any] | None = None) -> None:
    """The call is refused with exactly ``expected_reason`` and the body runs zero times.

    ``expected_reason`` is what ``validate_args`` answers (``min:limit``);
    ``call_tool`` must answer ``args:`` + it, count the call as blocked, and
    leave the caller's arguments as they were. ``echo`` is passed on to both.
    """
    what = f"{name}({show(args)})"
    kept = _copy(contents(args))
    runs = _Runs(gate, name)
    reason = gate.validate_args(name, args, echo)
    assert reason == expected_reason, (
        f"validate_args on {what} answered {reason!r}; the defect planted is {expected_reason!r}")
    envelope = _call(gate, name, args, echo)
    assert envelope == {"ok": False, "value": None, "error": "args:" + expected_reason}, (
        f"call_tool on {what} answered {show(envelope)}; expected error "
        f"{'args:' + expected_reason!r}")
    ran, stats = runs.since(what)
    assert ran == 0, f"the body of {name!r} ran {ran} time(s) on refused arguments {what}"
    assert _delta(runs.stats, stats) == ToolStats(blocked=1), (
        f"{what}: counters moved by {_delta(runs.stats, stats)}, expected one blocked call")
    _unchanged(kept, contents(args), "call_tool")


def contents(args: Any) -> Any:
    """What a dict (of any subclass) holds, read from its storage: a plain dict of its items.

    A subclass's own ``keys`` or ``__iter__`` may lie or raise; ``dict.items`` reads
    what is really there. Anything else is returned as it is.
    """
    return dict(dict.items(args)) if isinstance(args, dict) else args


# --- property 2: the memo ------------------------------------------------------------------------


def _scribble(value: Any) -> None:
    """What a careless caller does to a value it was handed (a kept result is a dict)."""
    if isinstance(value, dict):
        value["__scribbled__"] = True


def check_memo(gate: Gate, name: str, args: dict[str, Any], reordered_args: dict[str, Any],
               other_args: dict[str, Any]) -> Envelope:
    """A valid call runs the body once; the same call again, keys in any order, runs it zero times.

    The repeat returns a value equal (same types throughout) to the first,
    even after the caller changed what it was handed. A call the gate refused
    on its result (or whose body raised) is not remembered: its repeat runs
    the body again. ``other_args`` then runs the body again unless it is the
    same call. The memo is cleared first. Returns the first envelope.

    For a write tool the promise is the idempotency key's instead: see
    ``_check_once_per_key``.
    """
    gate.clear()
    contract = gate.contract(name)
    if contract is not None and writes(contract):
        return _check_once_per_key(gate, name, args, reordered_args, other_args)
    body = body_of(gate, name)
    what = f"{name}({show(args)})"
    assert gate.validate_args(name, args, echo_of(gate, name, args)) == "", (
        f"{what} is not a valid call")
    runs = _Runs(gate, name)
    first = _call(gate, name, args, echo_of(gate, name, args))
    ran, _ = runs.since(what)
    assert ran == 1, f"the first call {what} ran the body {ran} time(s), expected once"
    remembered = first["ok"]
    expected = _copy(first["value"]) if remembered else None
    if remembered and body.stubbed:
        _scribble(first["value"])  # the caller owns what it was handed; a stub's value is ours
    for repeat in (reordered_args, args):
        runs = _Runs(gate, name)
        again = _call(gate, name, repeat, echo_of(gate, name, repeat))
        ran, stats = runs.since(f"the repeat {name}({show(repeat)})")
        if remembered:
            assert ran == 0, (f"the repeat {name}({show(repeat)}) of a successful call ran the "
                              f"body {ran} time(s), expected none")
            assert _delta(runs.stats, stats) == ToolStats(hits=1), (
                f"the repeat {name}({show(repeat)}) was not counted as one memo hit")
            assert again["ok"], f"the repeat {name}({show(repeat)}) failed: {again['error']!r}"
            if expected is not _UNCOPIED:
                assert same_value(again["value"], expected), (
                    f"the repeat {name}({show(repeat)}) answered {show(again['value'])}, "
                    f"the first call {show(expected)}")
            _scribble(again["value"])
        else:
            assert ran == 1, (f"{what} failed with {first['error']!r}, yet its repeat ran the "
                              f"body {ran} time(s): a failure was remembered")
    runs = _Runs(gate, name)
    _call(gate, name, other_args, echo_of(gate, name, other_args))
    ran, _ = runs.since(f"{name}({show(other_args)})")
    expected_runs = 0 if remembered and _same_call(gate, name, other_args, args) else 1
    assert ran == expected_runs, (
        f"{name}({show(other_args)}) after {what} ran the body {ran} time(s), "
        f"expected {expected_runs}")
    return first


def _same_call(gate: Gate, name: str, left: dict[str, Any], right: dict[str, Any]) -> bool:
    """Whether two valid arg sets are one call as the gate reads them: a null for an
    optional arg is no arg, so ``{"x": None}`` and ``{}`` share a memo key."""
    keys = [gate.cache_key(name, args, HARNESS_RUN, echo_of(gate, name, args))
            for args in (left, right)]
    if None in keys:
        return same_value(left, right)
    return keys[0] == keys[1]


def _check_once_per_key(gate: Gate, name: str, args: dict[str, Any],
                        reordered_args: dict[str, Any], other_args: dict[str, Any]) -> Envelope:
    """A write runs once per idempotency key and is never memoized.

    Repeats of the same step, keys in any order, answer the first outcome
    without a body run, with the fields the return contract marks sensitive
    redacted (the store never keeps them in clear); after a retryable failure
    a repeat runs the body once more (the upstream never acted on it) or
    answers ``write:unknown`` (it may have), never more;
    ``other_args`` in the same step is a new write if its business key
    differs, the same outcome if it is the same call, else ``write:conflict``.
    """
    step = f"memo-{next(_steps)}"
    what = f"{name}({show(args)}) in step {step}"
    runs = _Runs(gate, name)
    first = _call(gate, name, args, echo_of(gate, name, args), step)
    ran, _ = runs.since(what)
    assert ran == 1, f"the first write {what} ran the body {ran} time(s), expected once"
    kept = first["ok"] or not is_retryable(first["error"])
    contract = gate.contract(name)
    replay = (dict(first, value=redact_value(contract, first["value"]))
              if first["ok"] and contract is not None else first)
    for repeat in (reordered_args, args):
        runs = _Runs(gate, name)
        again = _call(gate, name, repeat, echo_of(gate, name, repeat), step)
        ran, stats = runs.since(f"the repeat {name}({show(repeat)})")
        if kept:
            assert ran == 0, (f"the repeat {name}({show(repeat)}) of the write {what} ran the "
                              f"body {ran} time(s): a write must run once per idempotency key")
            assert _delta(runs.stats, stats) == ToolStats(replayed=1), (
                f"the repeat {name}({show(repeat)}) was not counted as one replay")
            assert same_value(again, replay), (
                f"the repeat {name}({show(repeat)}) answered {show(again)}, the first write "
                f"{show(first)}")
        else:
            assert ran == 1 or (ran == 0 and again["error"] == WRITE_UNKNOWN), (
                f"{what} failed with the retryable {first['error']!r}, and its retry ran the "
                f"body {ran} time(s) answering {show(again)}: it must run once (nothing was "
                f"done) or answer {WRITE_UNKNOWN}")
            break  # the key's state is the retry's now
    runs = _Runs(gate, name)
    other = _call(gate, name, other_args, echo_of(gate, name, other_args), step)
    ran, _ = runs.since(f"{name}({show(other_args)}) in step {step}")
    same_key = gate.idempotency_key(name, other_args, HARNESS_RUN, step) == \
        gate.idempotency_key(name, args, HARNESS_RUN, step)
    if not same_key:
        assert ran == 1, (f"{name}({show(other_args)}) in step {step} is a new write, yet it "
                          f"ran the body {ran} time(s)")
    elif not kept:  # what the key holds now is the retry's doing, checked above
        assert ran <= 1, (f"{name}({show(other_args)}) in step {step} ran the body {ran} "
                          f"times for one key")
    else:
        expected = replay if _same_call(gate, name, other_args, args) else {
            "ok": False, "value": None, "error": "write:conflict"}
        assert ran == 0, (f"{name}({show(other_args)}) reuses the idempotency key of {what} "
                          f"but ran the body {ran} time(s)")
        assert same_value(other, expected), (
            f"{name}({show(other_args)}) reuses the idempotency key of {what}: answered "
            f"{show(other)}, expected {show(expected)}")
    assert not gate.cache, f"a write of {name!r} was memoized"
    return first


# --- property 3: bad results ---------------------------------------------------------------------


def check_bad_result(gate: Gate, name: str, args: dict[str, Any], bad_value: Any,
                     expected_reason: str) -> None:
    """A body returning ``bad_value`` is refused with ``result:<reason>``; nothing is remembered.

    ``expected_reason`` is what ``validate_result`` answers (``range``). The
    body is stubbed to return ``bad_value``; the call is made twice and runs
    the body both times.
    """
    gate.clear()
    body = body_of(gate, name)
    body.value = bad_value
    reason = gate.validate_result(name, bad_value)
    assert reason == expected_reason, (
        f"validate_result({name!r}, {show(bad_value)}) answered {reason!r}; the defect planted "
        f"is {expected_reason!r}")
    for attempt in ("first", "repeated"):
        runs = _Runs(gate, name)
        envelope = _call(gate, name, args, echo_of(gate, name, args))
        ran, stats = runs.since(f"the {attempt} call")
        assert envelope == {"ok": False, "value": None, "error": "result:" + expected_reason}, (
            f"the {attempt} call {name}({show(args)}) returning {show(bad_value)} was answered "
            f"{show(envelope)}; expected error {'result:' + expected_reason!r}")
        assert ran == 1, (f"the {attempt} call {name}({show(args)}) ran the body {ran} time(s), "
                          "expected once: a refused result must not be remembered")
        assert _delta(runs.stats, stats) == ToolStats(runs=1, bad_results=1), (
            f"the {attempt} call: counters moved by {_delta(runs.stats, stats)}")
    # Keyed as the harness's calls are: in its run, with the echo values they were given.
    key = gate.cache_key(name, args, HARNESS_RUN, echo_of(gate, name, args))
    assert key is None or key not in gate.cache, f"a refused result of {name!r} is in the memo"


# --- property 4: the envelope --------------------------------------------------------------------


def check_envelope(gate: Gate, name: Any, args: Any,
                   echo: Mapping[str, Any] | None = None) -> Envelope:
    """``call_tool`` answers, never raises, and its answer is honest.

    Exactly ``ok``, ``value``, ``error``; on success the arguments and the
    value keep the contract; on failure ``error`` is a known reason naming a
    real defect, and a call refused on its arguments ran no body.
    """
    what = f"call_tool({show(name)}, {show(args)})"
    known = isinstance(name, str) and _has_tool(gate, name)
    runs = _Runs(gate, name) if known else None
    envelope = _call(gate, name, args, echo)
    ran = runs.since(what)[0] if runs is not None else 0
    stage, check, arg = parse_reason(envelope["error"])
    if envelope["ok"]:
        assert gate.validate_args(name, args, echo) == "", f"{what} succeeded on refused arguments"
        assert gate.validate_result(name, envelope["value"]) == "", (
            f"{what} succeeded with a value its return contract refuses: "
            f"{show(envelope['value'])}")
        assert ran <= 1, f"{what} ran the body {ran} times"
    elif stage == "args":
        assert ran == 0, f"the body ran {ran} time(s) on {what}, refused with {envelope['error']}"
        _check_arg_reason(gate, name, args, echo, parse_reason(envelope["error"]), known, what)
        reason = gate.validate_args(name, args, echo)
        assert reason == envelope["error"][len("args:"):], (
            f"{what} said {envelope['error']!r} but validate_args says {reason!r}")
    elif stage == "result":
        assert check in RESULT_CHECKS, f"{what}: unknown result reason {check!r}"
        assert not arg, f"{what}: a result reason names {arg!r}"
        assert ran == 1, f"{what} refused a result after {ran} body runs"
    else:
        unknown = f"{what} answered {envelope['error']!r}, which is no reason the gate gives"
        assert stage in ("raised", "upstream", "timeout"), unknown
        assert stage == "timeout" or check.isidentifier() or check.isdigit(), unknown
        assert not arg, unknown
        assert ran == 1, f"{what} says the body failed after {ran} body runs"
    return envelope


def _has_tool(gate: Gate, name: str) -> bool:
    try:
        return name in gate.table
    except Exception:
        return False


def _check_arg_reason(gate: Gate, name: Any, args: Any, echo: Mapping[str, Any] | None,
                      reason: Reason, known: bool, what: str) -> None:
    check, arg = reason.check, reason.arg
    if check in ARG_REASONS:
        assert not arg, f"{what}: {check!r} names an argument {arg!r}"
        assert (check == "unknown_tool") == (not known), (
            f"{what} answered {check!r} for a name the table {'has' if known else 'lacks'}")
        return
    assert check in ARG_CHECKS, f"{what}: {check!r} is no check the gate makes"
    contract = gate.contract(name)
    assert contract is not None, f"{what} named an argument defect of no contract"
    assert isinstance(args, dict), f"{what} named an argument defect in a {type(args).__name__}"
    # The reason must name a real defect: an argument that is there, or missing, as it says.
    # dict.keys and dict.get, not args' own methods: a dict subclass may make those raise.
    # Reasons echo names as ``shown`` makes them (escaped, bounded): compare them so.
    given = {shown(key) for key in dict.keys(args) if type(key) is str}
    # The reason names the argument as shown: find the declared one it stands for.
    declared = named(contract.args, arg)
    spec = None if declared is None else contract.args[declared]
    # Inside a list of objects a key can be missing or unexpected too; the reason names
    # the top-level argument that holds it.
    inside = spec is not None and arg in given and _holds_objects(spec)
    if check == "unexpected":
        assert arg in given, f"{what}: the unexpected {arg!r} is not in the call"
        assert spec is None or inside, f"{what}: {arg!r} is declared and holds no objects"
        return
    assert spec is not None, f"{what}: {check}:{arg} names no declared argument"
    if check == "missing":
        assert arg not in given or inside, f"{what}: {arg!r} is there, so not missing"
    elif check == "echo":
        assert spec.echo, f"{what}: {arg!r} is no echo argument"
        copied = arg in given and echo is not None and arg in echo and (
            echo[arg] == dict.get(args, arg))
        assert not copied, f"{what}: {arg!r} is the value given, so no echo defect"
    else:
        assert arg in given, f"{what}: {check}:{arg} names an argument not in the call"


def _holds_objects(spec: Spec) -> bool:
    """Whether values of ``spec`` contain dicts whose keys the contract names."""
    item = spec.item
    return isinstance(item, dict) or (isinstance(item, Spec) and _holds_objects(item))


# --- the body keeps its own return contract -------------------------------------------------------


def check_returns(gate: Gate, name: str, args: dict[str, Any]) -> Envelope:
    """On valid arguments the real body can be called, answers, and keeps the return contract.

    The function's signature must accept every valid argument set (a
    contract naming an argument the function lacks raises ``TypeError`` on
    every call), and the value it returns must not be refused as ``shape``,
    ``too_big`` or ``range``. ``empty`` is allowed (finding nothing is an
    answer the gate refuses by design). A body that raises fails, with the
    exception and where it was raised, unless the exception is one a
    contract expects: a transport failure or a timeout (which the gate
    answers ``upstream:*`` and ``timeout``), or one of the entry's ``raises``.
    """
    gate.clear()
    body = body_of(gate, name)
    what = f"{name}({show(args)})"
    if body.fn is not None:
        try:
            signature = inspect.signature(body.fn)
        except (TypeError, ValueError):
            signature = None  # a builtin without a signature: nothing to compare
        if signature is not None:
            try:
                signature.bind(**args)
            except TypeError as exc:
                raise AssertionError(f"the function of {name!r} cannot take the valid arguments "
                                     f"{show(args)}: {exc}") from exc
    envelope = _call(gate, name, args, echo_of(gate, name, args))
    stage, check, _ = parse_reason(envelope["error"])
    assert stage != "result" or check == "empty", (
        f"the body of {name!r} returned a value its return contract refuses ({envelope['error']})"
        f" for the valid call {what}: it returned {show(body.last)}")
    expected = expected_raises(gate.table[name])
    raised = body.raised
    if stage == "raised" and not (raised is not None and isinstance(raised, expected)):
        shown_exc = "an exception" if raised is None else show(raised)
        where = "" if raised is None else f" at {raised_at(raised)}"
        raise AssertionError(
            f"the body of {name!r} raised {shown_exc}{where}, on the valid call {what}; a body "
            "must answer every call its contract accepts (name the exceptions it may raise on one "
            "in the entry's \"raises\")")
    return envelope


# --- hostile callers ------------------------------------------------------------------------------


def check_hostile(gate: Gate, twin: Gate, name: Any, args: Any, expected: str | None,
                  plain: Any = None, echo: Mapping[str, Any] | None = None,
                  **given: Any) -> Envelope:
    """A hostile call gets exactly the answer it must: ``expected``, or a plain twin's.

    ``expected`` is the error the call must get (``args:not_object``); when it
    is ``None`` the call must be answered as ``plain`` (what a plain dict
    holding the same items is) is answered by ``twin``, a gate built as
    ``gate`` was, with the same body runs. ``echo`` and ``given`` (the hostile
    caller's ``scope`` or ``approvals``) are passed to both. Whatever the answer, it is
    honest (``check_envelope``'s checks) when it comes from a plain call.
    """
    what = f"call_tool({show(name)}, {show(args)})"
    known = isinstance(name, str) and _has_tool(gate, name)
    runs = _Runs(gate, name) if known else None
    envelope = _call(gate, name, args, echo, **given)
    ran = runs.since(what)[0] if runs is not None else 0
    if expected is not None:
        assert same_value(envelope, {"ok": False, "value": None, "error": expected}), (
            f"{what} answered {show(envelope)}; it must be refused with {expected!r}")
        assert ran == 0, f"the body ran {ran} time(s) on {what}, refused with {expected!r}"
        return envelope
    twin_runs = _Runs(twin, name) if known else None
    answer = _call(twin, name, plain, echo, **given)
    twin_ran = twin_runs.since(f"the plain twin of {what}")[0] if twin_runs is not None else 0
    assert same_value(envelope, answer), (
        f"{what} answered {show(envelope)}, but the same items in a plain dict get "
        f"{show(answer)}: the gate must read what the arguments hold, not what their "
        "methods say")
    assert ran == twin_ran, (
        f"{what} ran the body {ran} time(s), the plain call {twin_ran} time(s)")
    if known and ran:
        received = body_of(gate, name).seen[-1]
        assert type(received) is dict, f"{what}: the body received a {type(received).__name__}"
        assert same_value(received, body_of(twin, name).seen[-1]), (
            f"{what}: the body received {show(received)}, not the plain items checked")
    return envelope


def check_interrupted(gate: Gate, name: str, args: dict[str, Any], interrupt: BaseException,
                      value: Any) -> None:
    """A body raising ``interrupt`` (a ``BaseException``) propagates it, and guesses nothing.

    ``call_tool`` raises that very object. The same call again, in the same
    step, with a body that now answers ``value``: an interrupted read was not
    remembered, so its body runs once and answers; an interrupted write may
    have made its effect before the interruption, so its key is left unknown
    and the retry answers ``write:unknown`` without running the body again.
    """
    gate.clear()
    body = body_of(gate, name)
    kind = type(interrupt).__name__
    what = f"{name}({show(args)})"
    step = f"interrupted-{next(_steps)}"
    echo = echo_of(gate, name, args)
    body.raises = interrupt
    caught: BaseException | None = None
    try:
        envelope = _call(gate, name, args, echo, step)
    except BaseException as exc:  # the very thing checked
        caught = exc
    finally:
        body.raises = None
    if caught is None:
        raise AssertionError(f"{what}: the body raised {kind}, yet call_tool answered "
                             f"{show(envelope)}; a {kind} must propagate, never be answered")
    assert caught is interrupt, (
        f"{what}: the body raised {kind}, but call_tool raised {type(caught).__name__}: "
        f"{show(caught)}; a {kind} must propagate as it is")
    body.value = value
    runs = _Runs(gate, name)
    again = _call(gate, name, args, echo, step)
    ran, _ = runs.since(f"the retry of {what}")
    contract = gate.contract(name)
    if contract is not None and writes(contract):
        guessed = (f"the retry of {what} after a {kind} ran the body {ran} time(s) and answered "
                   f"{show(again)}: a write interrupted mid-body may have made its effect, so "
                   f"its retry must answer {WRITE_UNKNOWN} and never run it a second time")
        assert ran == 0, guessed
        assert again["error"] == WRITE_UNKNOWN, guessed
        return
    assert ran == 1, (
        f"the retry of {what} after a {kind} ran the body {ran} time(s), expected once: an "
        "interrupted read must leave no memo entry behind")
    assert again["ok"] or parse_reason(again["error"]).stage == "result", (
        f"the retry of {what} after a {kind} answered {show(again)}")


def check_replaced(gate: Gate, name: str, args: dict[str, Any], values: list[Any], *,
                   threads: int = 2, calls: int = 60) -> None:
    """Calls racing replacements of the tool's entry never raise and answer honestly.

    One thread swaps ``name``'s entry for fresh ones (a new entry, a deletion and
    re-addition, a new ``fn`` in place) whose bodies answer one of ``values``
    (valid results, each a distinct dict); ``threads`` others call ``name`` with
    ``args``. Every answer has the envelope's shape; a success holds one of
    ``values``; a failure is the tool missing for a moment or a reason a plain
    call of one of those bodies can get.
    """
    import threading

    table: Any = gate.table  # replaced in place, as an application may
    entry = dict(table[name])
    approvals = [gate.approve(name, args)]
    echo = echo_of(gate, name, args)
    done = threading.Event()
    escaped: list[str] = []
    answers: list[Any] = []

    def fresh_body(index: int) -> Body:
        body = Body(name)
        body.value = values[index % len(values)]
        return body

    def replace() -> None:
        turn = 0
        try:
            while not done.is_set():
                turn += 1
                if turn % 3 == 0:
                    table[name] = {**entry, "fn": fresh_body(turn)}
                elif turn % 3 == 1:
                    del table[name]
                    table[name] = {**entry, "fn": fresh_body(turn)}
                else:
                    table[name]["fn"] = fresh_body(turn)
        except BaseException as exc:  # reported, not swallowed
            escaped.append(f"the replacer raised {type(exc).__name__}: {show(exc)}")

    def call() -> None:
        for n in range(calls):
            try:
                answers.append(gate.call_tool(name, args, echo, run_id=HARNESS_RUN,
                                              step_id=f"race-{next(_steps)}-{n}",
                                              approvals=approvals))
            except BaseException as exc:  # the very thing checked
                escaped.append(f"call_tool({name!r}, {show(args)}) raised "
                               f"{type(exc).__name__}: {show(exc)} at {raised_at(exc)} while "
                               "the table was being replaced; the gate must never raise")
                return

    replacer = threading.Thread(target=replace)
    callers = [threading.Thread(target=call) for _ in range(threads)]
    replacer.start()
    for thread in callers:
        thread.start()
    for thread in callers:
        thread.join()
    done.set()
    replacer.join()
    table[name] = entry
    assert not escaped, escaped[0]
    for envelope in answers:
        _check_shape(envelope, f"call_tool({name!r}, {show(args)}) during replacement")
        if envelope["ok"]:
            assert any(same_value(envelope["value"], value) for value in values), (
                f"call_tool({name!r}, {show(args)}) during replacement answered "
                f"{show(envelope['value'])}, which none of the tool's bodies returned")
        else:
            stage = parse_reason(envelope["error"]).stage
            assert envelope["error"] == "args:unknown_tool" or stage in ("result", "write"), (
                f"call_tool({name!r}, {show(args)}) during replacement answered "
                f"{envelope['error']!r}, which no call of these bodies can get")
