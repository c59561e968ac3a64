"""The gate: reasons, type traps, the envelope, the memo, table changes and evil inputs.

Expected reasons are built from the defect each case plants (``f"{check}:{arg}"``);
expected counts come from counting tool bodies, never from the gate's own output.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import enum
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _bodies import CountingBody
from _shapes import assert_envelope

import agtool.tools as tools
from agtool import (
    ARG_CHECKS,
    ARG_REASONS,
    RESULT_CHECKS,
    STAGES,
    Gate,
    Reason,
    ToolStats,
    UpstreamError,
    parse_reason,
)
from agtool._compile import compile_copy, compile_result_check
from agtool._contract import is_value_of, parse_entry
from agtool._memo import MAX_DEPTH, freeze, thaw


class Counter(CountingBody):
    """A counting body that, unless told otherwise, answers its arguments under ``echo``."""

    def default(self, kwargs: dict[str, Any]) -> Any:
        return {"echo": dict(kwargs)}


def gate_for(fn: Callable[..., Any], args: dict[str, Any] | None = None,
             returns: dict[str, Any] | None = None, name: str = "t") -> Gate:
    """A gate over one tool; returns default to any dict with extra keys allowed."""
    return Gate({name: {"fn": fn, "args": args or {}, "returns": returns or {}}})


# -- Argument reasons ----------------------------------------------------------------------------

PROBE_ARGS: dict[str, Any] = {
    "code": {"type": "str", "pattern": r"[A-Z]\d{3}"},
    "region": {"type": "str", "allowed": ["north", "south"]},
    "limit": {"type": "int", "min": 1, "max": 5},
    "tags": {"type": "list", "required": False, "min_len": 1, "max_len": 3,
             "item": {"type": "str"}},
    "note": {"type": "str", "required": False, "min_len": 2, "max_len": 8},
    "ratio": {"type": "float", "required": False, "min": 0, "max": 1},
    "flag": {"type": "bool", "required": False},
    "opts": {"type": "dict", "required": False},
    "rows": {"type": "list", "required": False,
             "item": {"store": {"type": "str"}, "count": {"type": "int", "min": 0}}},
    "day": {"type": "str", "required": False, "format": "date"},
    "share": {"type": "float", "required": False, "min": 0, "min_exclusive": True},
}
PROBE_VALID: dict[str, Any] = {"code": "A100", "region": "north", "limit": 2}
_DROP = object()


def probe_gate(fn: Callable[..., Any] | None = None) -> Gate:
    return gate_for(fn or Counter(), PROBE_ARGS, name="probe")


def with_(arg: str, value: object) -> dict[str, Any]:
    """PROBE_VALID with ``arg`` set to ``value`` (or removed, for ``_DROP``)."""
    args = dict(PROBE_VALID)
    if value is _DROP:
        del args[arg]
    else:
        args[arg] = value
    return args


def with_odd_key(key: object) -> dict[object, Any]:
    """PROBE_VALID plus one key that is not a str."""
    args: dict[object, Any] = {}
    args.update(PROBE_VALID)
    args[key] = "x"
    return args


# (check, arg, planted value): the expected reason is f"{check}:{arg}".
ARG_DEFECTS = [
    pytest.param("missing", "code", _DROP, id="missing-required"),
    pytest.param("unexpected", "sku_id", "A100", id="unexpected-renamed-arg"),
    pytest.param("type", "limit", "2", id="type-str-for-int"),
    pytest.param("allowed", "region", "mars", id="allowed-invented-enum"),
    pytest.param("min", "limit", 0, id="min-int"),
    pytest.param("max", "limit", 6, id="max-int"),
    pytest.param("min", "ratio", -0.5, id="min-float"),
    pytest.param("max", "ratio", 1.5, id="max-float"),
    pytest.param("min_len", "tags", [], id="min-len-list"),
    pytest.param("min_len", "note", "x", id="min-len-str"),
    pytest.param("max_len", "tags", ["a", "b", "c", "d"], id="max-len-list"),
    pytest.param("max_len", "note", "x" * 9, id="max-len-str"),
    pytest.param("pattern", "code", "A1000", id="pattern-is-a-full-match"),
    pytest.param("pattern", "code", "xA100", id="pattern-anchored-at-start"),
    pytest.param("pattern", "code", "A100\n", id="pattern-no-trailing-newline"),
    pytest.param("type", "tags", ["a", 1], id="item-type-reported-on-arg"),
    pytest.param("type", "rows", ["row"], id="item-not-a-dict-reported-on-arg"),
    pytest.param("missing", "rows", [{"store": "x"}], id="item-missing-key-reported-on-arg"),
    pytest.param("unexpected", "rows", [{"store": "x", "count": 1, "extra": 2}],
                 id="item-unexpected-key-reported-on-arg"),
    pytest.param("min", "rows", [{"store": "x", "count": -1}], id="item-min-reported-on-arg"),
    pytest.param("type", "rows", [{"store": "x", "count": True}],
                 id="item-bool-for-int-reported-on-arg"),
    pytest.param("type", "opts", [("k", "v")], id="type-pairs-for-dict"),
    pytest.param("type", "tags", ("a",), id="type-tuple-for-list"),
    pytest.param("format", "day", "2026-02-30", id="format-date-no-calendar-has"),
    pytest.param("min", "share", 0, id="min-exclusive-refuses-the-bound"),
]


@pytest.mark.parametrize(("check", "arg", "value"), ARG_DEFECTS)
def test_arg_defect_gives_its_reason(check: str, arg: str, value: object) -> None:
    """Each planted argument defect is reported as ``<check>:<arg>`` naming that argument."""
    gate = probe_gate()
    assert gate.validate_args("probe", with_(arg, value)) == f"{check}:{arg}"


# Echo arguments: the model must hand back, verbatim, a value it was given.
ECHO_ARGS: dict[str, Any] = {
    "rid": {"type": "str", "echo": True, "pattern": r"r\d+"},
    "note": {"type": "str", "echo": True, "required": False},
    "q": {"type": "str"},
}
ECHO_GIVEN = {"rid": "r1", "note": "n"}
ECHO_VALID = {"rid": "r1", "note": "n", "q": "stock"}

# (check, arg, args, echo): the expected reason is f"{check}:{arg}".
ECHO_DEFECTS = [
    pytest.param("echo", "rid", {**ECHO_VALID, "rid": "r2"}, ECHO_GIVEN, id="echo-differs"),
    pytest.param("echo", "rid", {"note": "n", "q": "stock"}, ECHO_GIVEN,
                 id="echo-missing-is-echo-not-missing"),
    pytest.param("echo", "note", {"rid": "r1", "q": "stock"}, ECHO_GIVEN,
                 id="optional-echo-missing"),
    pytest.param("echo", "rid", ECHO_VALID, None, id="echo-values-not-given"),
    pytest.param("echo", "rid", ECHO_VALID, {"note": "n"}, id="echo-value-not-given"),
    pytest.param("echo", "rid", ECHO_VALID, {**ECHO_GIVEN, "rid": None},
                 id="given-none-matches-nothing"),
    pytest.param("type", "rid", {**ECHO_VALID, "rid": 1}, {**ECHO_GIVEN, "rid": 1},
                 id="echo-is-type-checked-first"),
    pytest.param("pattern", "rid", {**ECHO_VALID, "rid": "x"}, {**ECHO_GIVEN, "rid": "x"},
                 id="echo-keeps-its-bounds"),
]


@pytest.mark.parametrize(("check", "arg", "args", "echo"), ECHO_DEFECTS)
def test_echo_defect_gives_its_reason(check: str, arg: str, args: dict[str, Any],
                                      echo: dict[str, Any] | None) -> None:
    """An echo argument absent, different from what was given, or unchecked is refused."""
    body = Counter()
    gate = gate_for(body, ECHO_ARGS)
    assert gate.validate_args("t", args, echo) == f"{check}:{arg}"
    assert gate.call_tool("t", args, echo)["error"] == f"args:{check}:{arg}"
    assert body.count == 0


def test_echo_handed_back_verbatim_passes() -> None:
    """Echo arguments equal to the given values pass and the body runs with them."""
    body = Counter()
    gate = gate_for(body, ECHO_ARGS)
    assert gate.validate_args("t", ECHO_VALID, ECHO_GIVEN) == ""
    assert gate.call_tool("t", ECHO_VALID, ECHO_GIVEN)["ok"]
    assert body.calls == [ECHO_VALID]


class _EchoGetRaises(dict):  # type: ignore[type-arg]
    def get(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("get")


@pytest.mark.parametrize("echo", [
    pytest.param(["r1"], id="list"),
    pytest.param("r1", id="str"),
    pytest.param(_EchoGetRaises(ECHO_GIVEN), id="get-raises"),
])
def test_malformed_echo_values_never_raise(echo: Any) -> None:
    """Echo values that are not a readable mapping refuse the call without raising."""
    body = Counter()
    gate = gate_for(body, ECHO_ARGS)
    assert gate.validate_args("t", ECHO_VALID, echo) != ""
    assert_envelope(gate.call_tool("t", ECHO_VALID, echo))
    assert body.count == 0


def test_arg_defect_table_covers_every_arg_check() -> None:
    """Every check in ARG_CHECKS has at least one planted defect above.

    (``schema`` comes only from an imported JSON Schema's keywords beyond the specs:
    tests/jsonschema/test_schema_check.py plants those.)"""
    planted = {param.values[0] for param in [*ARG_DEFECTS, *ECHO_DEFECTS]}
    assert planted == set(ARG_CHECKS) - {"schema"}


@pytest.mark.parametrize(("check", "arg", "value"), ARG_DEFECTS)
def test_refused_args_never_run_the_body(check: str, arg: str, value: object) -> None:
    """call_tool answers ``args:<reason>`` for refused arguments, and the body never runs."""
    body = Counter()
    gate = probe_gate(body)
    envelope = gate.call_tool("probe", with_(arg, value))
    assert envelope == {"ok": False, "value": None, "error": f"args:{check}:{arg}"}
    assert body.count == 0
    assert gate.stats("probe") == ToolStats(blocked=1)


@pytest.mark.parametrize("args", [
    pytest.param(PROBE_VALID, id="required-only"),
    pytest.param({**PROBE_VALID, "tags": ["a", "b", "c"], "note": "ok", "ratio": 1, "flag": False,
                  "opts": {"any": [1, None]}, "rows": [{"store": "x", "count": 0}]},
                 id="every-optional-at-a-bound"),
    pytest.param({**PROBE_VALID, "limit": 1, "ratio": 0.0, "note": "x" * 8}, id="lower-bounds"),
])
def test_valid_args_pass(args: dict[str, Any]) -> None:
    """Arguments within every bound give the empty reason and run the body with them."""
    body = Counter()
    gate = probe_gate(body)
    assert gate.validate_args("probe", args) == ""
    assert gate.call_tool("probe", args)["ok"]
    assert body.calls == [args]


@pytest.mark.parametrize(("name", "args", "reason"), [
    pytest.param("nope", PROBE_VALID, "unknown_tool", id="unknown-name"),
    pytest.param("", PROBE_VALID, "unknown_tool", id="empty-name"),
    pytest.param(None, PROBE_VALID, "unknown_tool", id="name-none"),
    pytest.param(["probe"], PROBE_VALID, "unknown_tool", id="unhashable-name"),
    pytest.param("probe", None, "not_object", id="args-none"),
    pytest.param("probe", [("code", "A100")], "not_object", id="args-list-of-pairs"),
    pytest.param("probe", '{"code": "A100"}', "not_object", id="args-json-text"),
    pytest.param("probe", with_odd_key(1), "not_object", id="args-int-key"),
    pytest.param("probe", with_odd_key(("code",)), "not_object", id="args-tuple-key"),
])
def test_call_level_reason(name: Any, args: Any, reason: str) -> None:
    """A bad name or a non-object answers a call-level reason, never an arg reason."""
    body = Counter()
    gate = probe_gate(body)
    assert reason in ARG_REASONS
    assert gate.validate_args(name, args) == reason
    assert gate.call_tool(name, args) == {"ok": False, "value": None, "error": f"args:{reason}"}
    assert body.count == 0


def test_unknown_tool_also_answers_validate_result() -> None:
    """validate_result on a name not in the table answers unknown_tool."""
    assert probe_gate().validate_result("nope", {}) == "unknown_tool"


def test_bad_contract_reason() -> None:
    """A tool whose entry went bad answers bad_contract from every entry point."""
    table = {"t": {"fn": Counter(), "args": {}, "returns": {}}}
    gate = Gate(table)
    table["t"]["args"] = {"x": {"type": "int", "min": 3, "max": 1}}
    assert gate.validate_args("t", {}) == "bad_contract"
    assert gate.call_tool("t", {})["error"] == "args:bad_contract"


def test_unexpected_names_the_invented_argument() -> None:
    """Among known arguments, the one not in the contract is the one named."""
    gate = probe_gate()
    args = {"sku_id": "A100", **PROBE_VALID}
    assert gate.validate_args("probe", args) == "unexpected:sku_id"


@pytest.mark.parametrize("invented", [["sku_id", "store_id"], ["store_id", "sku_id"]],
                         ids=["sku-first", "store-first"])
def test_first_of_several_invented_arguments_is_named(invented: list[str]) -> None:
    """Of several invented arguments, the first in the caller's order is the one named."""
    args = {**PROBE_VALID, **dict.fromkeys(invented, "A100")}
    assert probe_gate().validate_args("probe", args) == f"unexpected:{invented[0]}"


def test_empty_args_name_the_first_required_argument() -> None:
    """An empty argument object is refused as missing the contract's first required argument."""
    body = Counter()
    gate = probe_gate(body)
    first = next(name for name, spec in PROBE_ARGS.items() if spec.get("required", True))
    assert gate.validate_args("probe", {}) == f"missing:{first}"
    assert gate.call_tool("probe", {})["error"] == f"args:missing:{first}"
    assert body.count == 0


# -- Type traps ----------------------------------------------------------------------------------

TYPE_TRAPS = [
    # (contract type, value, accepted)
    pytest.param("int", 2, True, id="int-int"),
    pytest.param("int", -(10**100), True, id="int-huge"),
    pytest.param("int", True, False, id="int-bool-true"),
    pytest.param("int", False, False, id="int-bool-false"),
    pytest.param("int", "2", False, id="int-numeric-str"),
    pytest.param("int", 1.0, False, id="int-integral-float"),
    pytest.param("int", None, False, id="int-none"),
    pytest.param("float", 1.5, True, id="float-float"),
    pytest.param("float", 1, True, id="float-accepts-int"),
    pytest.param("float", 10**100, True, id="float-accepts-huge-int"),
    pytest.param("float", True, False, id="float-bool"),
    pytest.param("float", math.nan, False, id="float-nan"),
    pytest.param("float", math.inf, False, id="float-inf"),
    pytest.param("float", -math.inf, False, id="float-minus-inf"),
    pytest.param("float", "1.5", False, id="float-numeric-str"),
    pytest.param("str", "x", True, id="str-str"),
    pytest.param("str", "", True, id="str-empty"),
    pytest.param("str", 5, False, id="str-int"),
    pytest.param("str", b"x", False, id="str-bytes"),
    pytest.param("bool", True, True, id="bool-bool"),
    pytest.param("bool", 1, False, id="bool-int"),
    pytest.param("bool", "true", False, id="bool-str"),
    pytest.param("list", [], True, id="list-list"),
    pytest.param("list", (), False, id="list-tuple"),
    pytest.param("list", "ab", False, id="list-str"),
    pytest.param("dict", {}, True, id="dict-dict"),
    pytest.param("dict", [], False, id="dict-list"),
]


@pytest.mark.parametrize(("type_name", "value", "accepted"), TYPE_TRAPS)
def test_type_traps_through_the_gate(type_name: str, value: object, accepted: bool) -> None:
    """Exact types: bool is no number, "2" no int, 1.0 no int, an int is a float, NaN is not."""
    gate = gate_for(Counter(), {"x": {"type": type_name}})
    assert gate.validate_args("t", {"x": value}) == ("" if accepted else "type:x")


@pytest.mark.parametrize(("type_name", "value", "accepted"), TYPE_TRAPS)
def test_type_traps_in_is_value_of(type_name: str, value: object, accepted: bool) -> None:
    """The contract's own type test agrees with the gate on every trap."""
    assert is_value_of(type_name, value) is accepted


@pytest.mark.parametrize(("type_name", "value", "accepted"), TYPE_TRAPS)
def test_type_traps_in_results(type_name: str, value: object, accepted: bool) -> None:
    """A returned key is held to the same exact types, reported as shape."""
    gate = gate_for(Counter(), returns={"x": {"type": type_name, "min_len": 0}
                                        if type_name == "list" else {"type": type_name}})
    assert gate.validate_result("t", {"x": value}) == ("" if accepted else "shape")


def test_allowed_floats_accept_the_equal_int() -> None:
    """An int equal to an allowed float is allowed; a bool equal to it is not."""
    gate = gate_for(Counter(), {"x": {"type": "float", "allowed": [1.0, 2.5]}})
    assert gate.validate_args("t", {"x": 1}) == ""
    assert gate.validate_args("t", {"x": True}) == "type:x"
    assert gate.validate_args("t", {"x": 2}) == "allowed:x"


def test_allowed_bools() -> None:
    """A bool spec with allowed [True] refuses False as not allowed."""
    gate = gate_for(Counter(), {"x": {"type": "bool", "allowed": [True]}})
    assert gate.validate_args("t", {"x": True}) == ""
    assert gate.validate_args("t", {"x": False}) == "allowed:x"


# -- Result reasons ------------------------------------------------------------------------------

PROBE_RETURNS: dict[str, Any] = {
    "sku": {"type": "str", "pattern": r"[A-Z]\d{3}"},
    "rows": {"type": "list", "max_len": 3,
             "item": {"store": {"type": "str"}, "count": {"type": "int", "min": 0, "max": 99}}},
    "grade": {"type": "str", "required": False, "allowed": ["a", "b"]},
    "score": {"type": "float", "required": False, "min": 0, "max": 1},
    "pair": {"type": "list", "required": False, "min_len": 2},
    "title": {"type": "str", "required": False, "min_len": 1},
    "notes": {"type": "list", "required": False, "min_len": 0},
    "labels": {"type": "list", "required": False,
               "item": {"type": "list", "item": {"type": "str"}}},
}
ROW = {"store": "Gangnam", "count": 3}
RESULT_VALID: dict[str, Any] = {"sku": "A100", "rows": [ROW]}


def result_with(key: str, value: object) -> dict[str, Any]:
    result = dict(RESULT_VALID)
    if value is _DROP:
        del result[key]
    else:
        result[key] = value
    return result


RESULT_DEFECTS = [
    pytest.param("shape", [RESULT_VALID], id="shape-not-a-dict"),
    pytest.param("shape", None, id="shape-none"),
    pytest.param("shape", result_with("rows", _DROP), id="shape-missing-key"),
    pytest.param("shape", result_with("sku", 100), id="shape-wrong-type"),
    pytest.param("shape", result_with("sku", "a100"), id="shape-pattern"),
    pytest.param("shape", result_with("rows", [ROW, "row"]), id="shape-item-not-a-dict"),
    pytest.param("shape", result_with("rows", [{"store": "x", "count": "3"}]),
                 id="shape-item-key-wrong-type"),
    pytest.param("shape", result_with("rows", [{"count": 3}]), id="shape-item-missing-key"),
    pytest.param("empty", result_with("rows", []), id="empty-top-level-list"),
    pytest.param("empty", result_with("pair", []), id="empty-explicit-min-len-list"),
    pytest.param("empty", result_with("title", ""), id="empty-explicit-min-len-str"),
    pytest.param("too_big", result_with("rows", [ROW] * 4), id="too-big-max-len"),
    pytest.param("range", result_with("rows", [{"store": "x", "count": -1}]), id="range-min"),
    pytest.param("range", result_with("rows", [{"store": "x", "count": 100}]), id="range-max"),
    pytest.param("range", result_with("grade", "c"), id="range-allowed"),
    pytest.param("range", result_with("score", 1.5), id="range-float-max"),
    pytest.param("range", result_with("pair", ["only"]), id="range-min-len-above-one"),
    pytest.param("empty", result_with("labels", []), id="empty-optional-top-level-list"),
]


@pytest.mark.parametrize(("reason", "result"), RESULT_DEFECTS)
def test_result_defect_gives_its_reason(reason: str, result: object) -> None:
    """Each planted result defect is reported as the one result check it breaks."""
    gate = gate_for(Counter(), returns=PROBE_RETURNS)
    assert gate.validate_result("t", result) == reason


def test_result_defect_table_covers_every_result_check() -> None:
    """Every check in RESULT_CHECKS has at least one planted defect above."""
    assert {param.values[0] for param in RESULT_DEFECTS} == set(RESULT_CHECKS)


@pytest.mark.parametrize(("reason", "result"), RESULT_DEFECTS)
def test_refused_result_through_call_tool(reason: str, result: object) -> None:
    """call_tool answers ``result:<reason>`` for a refused value and does not remember it."""
    body = Counter(lambda kwargs: copy.deepcopy(result))
    gate = gate_for(body, returns=PROBE_RETURNS)
    for _ in range(2):
        assert gate.call_tool("t", {}) == {"ok": False, "value": None,
                                           "error": f"result:{reason}"}
    assert body.count == 2
    assert gate.stats("t") == ToolStats(runs=2, bad_results=2)


@pytest.mark.parametrize("result", [
    pytest.param(RESULT_VALID, id="minimal"),
    pytest.param({**RESULT_VALID, "extra": object()}, id="extra-top-level-key"),
    pytest.param(result_with("rows", [{**ROW, "floor": 2}]), id="extra-key-in-item"),
    pytest.param(result_with("rows", [ROW] * 3), id="at-max-len"),
    pytest.param(result_with("notes", []), id="empty-list-with-min-len-zero"),
    pytest.param(result_with("labels", [[]]), id="empty-nested-list-is-not-empty"),
    pytest.param({**RESULT_VALID, "grade": "a", "score": 0, "pair": [1, 2], "title": "t"},
                 id="every-optional-present"),
])
def test_valid_result_passes(result: dict[str, Any]) -> None:
    """A value within its return contract, extra keys included, gives the empty reason."""
    gate = gate_for(Counter(), returns=PROBE_RETURNS)
    assert gate.validate_result("t", result) == ""


class WatchedRows(list):  # type: ignore[type-arg]
    """A list that records any attempt to look at its items."""

    touched = 0

    def __iter__(self) -> Iterator[Any]:
        type(self).touched += 1
        raise AssertionError("the rows were walked")

    def __getitem__(self, index: Any) -> Any:
        type(self).touched += 1
        raise AssertionError("the rows were indexed")


def test_too_big_is_decided_before_any_item_is_inspected() -> None:
    """A million-row result is refused as too_big without one of its rows being looked at."""
    WatchedRows.touched = 0
    rows = WatchedRows([ROW] * 1_000_000)
    body = Counter(lambda kwargs: {"sku": "A100", "rows": rows})
    gate = gate_for(body, returns=PROBE_RETURNS)
    assert gate.validate_result("t", {"sku": "A100", "rows": rows}) == "too_big"
    assert gate.call_tool("t", {})["error"] == "result:too_big"
    assert WatchedRows.touched == 0


def test_lists_inside_items_may_be_empty() -> None:
    """Only a top-level returned list must hold items; a list inside an item may be empty."""
    gate = gate_for(Counter(), returns={"rows": {"type": "list",
                                                 "item": {"tags": {"type": "list"}}}})
    assert gate.validate_result("t", {"rows": [{"tags": []}]}) == ""
    assert gate.validate_result("t", {"rows": []}) == "empty"


def test_too_big_wins_over_defective_items() -> None:
    """An oversized list of bad rows is too_big, not shape: size is decided first."""
    gate = gate_for(Counter(), returns=PROBE_RETURNS)
    assert gate.validate_result("t", result_with("rows", ["bad"] * 4)) == "too_big"


# -- The envelope and raised bodies --------------------------------------------------------------

class QuotaExceededError(Exception):
    pass


def _raise(exc: BaseException) -> Callable[..., Any]:
    def body(**kwargs: Any) -> Any:
        raise exc
    return body


@pytest.mark.parametrize("exc", [
    pytest.param(QuotaExceededError("no"), id="custom"),
    pytest.param(KeyError("sku"), id="key-error"),
    pytest.param(RecursionError(), id="recursion-error"),
    pytest.param(StopIteration(), id="stop-iteration"),
])
def test_raising_body_answers_raised_with_class_name(exc: Exception) -> None:
    """A body that raises answers ``raised:<ExceptionClassName>``, counted, not remembered."""
    gate = gate_for(_raise(exc))
    for _ in range(2):
        assert gate.call_tool("t", {}) == {"ok": False, "value": None,
                                           "error": f"raised:{type(exc).__name__}"}
    assert gate.stats("t") == ToolStats(runs=2, raised=2)


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(3), GeneratorExit()],
                         ids=["keyboard-interrupt", "system-exit", "generator-exit"])
def test_base_exceptions_propagate(exc: BaseException) -> None:
    """Only Exception subclasses are caught: an interrupt or exit leaves the gate."""
    gate = gate_for(_raise(exc))
    with pytest.raises(type(exc)):
        gate.call_tool("t", {})


def test_raising_body_is_logged_at_debug_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A raising body logs the tool's name and the exception class, with exc_info, at DEBUG."""
    exc = QuotaExceededError("no")
    gate = gate_for(_raise(exc), name="lookup")
    caplog.set_level(logging.DEBUG, logger="agtool")
    gate.call_tool("lookup", {})
    [record] = [record for record in caplog.records if record.name == "agtool"]
    assert record.levelno == logging.DEBUG
    assert record.getMessage() == f"tool {'lookup'!r} raised {type(exc).__name__}"
    assert record.exc_info is not None
    assert record.exc_info[1] is exc


def _envelopes() -> Iterator[tuple[str, object]]:
    body = Counter(lambda kwargs: {"sku": kwargs["code"], "rows": [ROW]})
    table = {"probe": {"fn": body, "args": PROBE_ARGS, "returns": PROBE_RETURNS},
             "boom": {"fn": _raise(ValueError()), "args": {}, "returns": {}},
             "empty": {"fn": lambda: {"sku": "A100", "rows": []}, "args": {},
                       "returns": PROBE_RETURNS},
             "broken": {"fn": body, "args": {}, "returns": {}},
             "private": {"fn": body, "args": {}, "returns": {}, "risk": "read_sensitive"},
             "write": {"fn": body, "args": {}, "returns": {}, "effect": "write"},
             "slow": {"fn": lambda: time.sleep(0.5), "args": {}, "returns": {}, "timeout": 0.01},
             "gateway": {"fn": _raise(UpstreamError(502, "<html>Bad Gateway</html>")),
                         "args": {}, "returns": {}},
             "awaited": {"fn": _async_body, "args": {}, "returns": {}}}
    gate = Gate(table)
    table["broken"]["args"] = {"x": {"type": "nope"}}
    yield "miss", gate.call_tool("probe", PROBE_VALID)
    yield "hit", gate.call_tool("probe", PROBE_VALID)
    yield "blocked", gate.call_tool("probe", with_("region", "mars"))
    yield "unknown", gate.call_tool("nope", {})
    yield "not-object", gate.call_tool("probe", "x")
    yield "bad-contract", gate.call_tool("broken", {})
    yield "raised", gate.call_tool("boom", {})
    yield "result", gate.call_tool("empty", {})
    yield "denied", gate.call_tool("private", {})
    yield "no-key", gate.call_tool("write", {}, scope={"reversible_write"})
    yield "timeout", gate.call_tool("slow", {})
    yield "upstream", gate.call_tool("gateway", {})

    async def inside_a_loop() -> object:
        return gate.call_tool("awaited", {})

    yield "async", asyncio.run(inside_a_loop())
    gate.close()
    yield "closed", gate.call_tool("probe", PROBE_VALID)


async def _async_body() -> dict[str, Any]:
    return {}


def test_every_path_answers_the_three_key_envelope() -> None:
    """Every path, from success to a timed-out or denied call, shares one shape."""
    seen = dict(_envelopes())
    for envelope in seen.values():
        assert_envelope(envelope)
    errors = {path: envelope["error"] for path, envelope in seen.items()}  # type: ignore[index]
    assert errors == {"miss": "", "hit": "", "blocked": "args:allowed:region",
                      "unknown": "args:unknown_tool", "not-object": "args:not_object",
                      "bad-contract": "args:bad_contract", "raised": "raised:ValueError",
                      "result": "result:empty", "denied": "auth:scope:read_sensitive",
                      "no-key": "write:no_key", "timeout": "timeout",
                      "upstream": "upstream:502", "async": "async:loop_running",
                      "closed": "gate:closed"}
    assert {parse_reason(error).stage for error in errors.values()} - {""} == set(STAGES)


def test_success_envelope_carries_the_value() -> None:
    """A success answers ok True, the body's value and an empty error."""
    body = Counter(lambda kwargs: {"n": kwargs["x"] * 2})
    gate = gate_for(body, {"x": {"type": "int"}}, {"n": {"type": "int"}})
    assert gate.call_tool("t", {"x": 21}) == {"ok": True, "value": {"n": 42}, "error": ""}


@pytest.mark.parametrize(("error", "parts"), [
    pytest.param("args:min:limit", ("args", "min", "limit"), id="arg-reason"),
    pytest.param("args:unknown_tool", ("args", "unknown_tool", ""), id="call-reason"),
    pytest.param("raised:KeyError", ("raised", "KeyError", ""), id="raised"),
    pytest.param("result:too_big", ("result", "too_big", ""), id="result"),
    pytest.param("", ("", "", ""), id="success"),
    pytest.param("args:missing:a:b", ("args", "missing", "a:b"), id="colon-in-arg-name"),
])
def test_parse_reason_splits_stage_check_and_arg(error: str, parts: tuple[str, str, str]) -> None:
    """parse_reason splits on the first two colons only."""
    assert parse_reason(error) == Reason(*parts)


def test_reason_vocabulary_is_the_spec() -> None:
    """The vocabulary holds exactly the reasons the dialect names, plus echo, format and
    schema (an imported schema's rule beyond the specs)."""
    assert set(ARG_CHECKS) == {"missing", "unexpected", "type", "allowed", "min", "max",
                               "min_len", "max_len", "pattern", "format", "echo", "schema"}
    assert set(ARG_REASONS) == {"unknown_tool", "not_object", "bad_contract"}
    assert set(RESULT_CHECKS) == {"shape", "empty", "too_big", "range"}
    assert set(STAGES) == {"args", "result", "raised", "auth", "write", "timeout", "upstream",
                           "async", "gate"}


# -- The memo ------------------------------------------------------------------------------------

def memo_gate(body: Counter, arg_specs: dict[str, Any] | None = None) -> Gate:
    return gate_for(body, arg_specs or {"x": {"type": "float"}, "opts": {"type": "dict",
                                                                        "required": False}})


def test_success_is_remembered_and_the_body_runs_once() -> None:
    """A repeated successful call is answered from the memo without running the body."""
    body = Counter()
    gate = memo_gate(body)
    first = gate.call_tool("t", {"x": 1.5})
    second = gate.call_tool("t", {"x": 1.5})
    assert first == second == {"ok": True, "value": {"echo": {"x": 1.5}}, "error": ""}
    assert body.count == 1
    assert gate.stats("t") == ToolStats(runs=1, hits=1)


def test_counters_follow_each_outcome() -> None:
    """runs, hits, blocked, bad_results and raised each count their own outcome."""
    outcomes = iter([{"n": 1}, {"n": "bad"}, None])

    def body(**kwargs: Any) -> Any:
        value = next(outcomes)
        if value is None:
            raise LookupError
        return value

    gate = gate_for(body, {"x": {"type": "int"}}, {"n": {"type": "int"}})
    plan = [{"x": 1}, {"x": 1}, {"x": "1"}, {"x": 2}, {"x": 3}, {"y": 1}]
    errors = [gate.call_tool("t", args)["error"] for args in plan]
    assert errors == ["", "", "args:type:x", "result:shape", "raised:LookupError",
                      "args:unexpected:y"]
    assert gate.stats("t") == ToolStats(runs=3, hits=1, blocked=2, bad_results=1, raised=1)


def test_every_hit_is_counted() -> None:
    """Each call answered from the memo adds one to hits; only the first call runs the body."""
    body = Counter()
    gate = memo_gate(body)
    calls = 4
    for _ in range(calls):
        assert gate.call_tool("t", {"x": 1})["ok"]
    assert gate.stats("t") == ToolStats(runs=body.count, hits=calls - body.count)
    assert body.count == 1


def test_stats_of_a_tool_never_called_are_zero() -> None:
    """A tool never called, or a name not in the table, has all-zero counters."""
    gate = memo_gate(Counter())
    assert gate.stats("t") == ToolStats()
    assert gate.stats("nope") == ToolStats(0, 0, 0, 0, 0)


def test_reset_stats_zeroes_every_counter() -> None:
    """reset_stats sets every counter of every tool back to zero, and counting resumes."""
    body = Counter()
    gate = memo_gate(body)
    gate.call_tool("t", {"x": 1})
    gate.call_tool("t", {"x": 1})
    gate.call_tool("t", {"x": "1"})
    gate.reset_stats()
    assert gate.stats("t") == ToolStats()
    gate.call_tool("t", {"x": 1})
    assert gate.stats("t") == ToolStats(hits=1)


def test_failures_are_not_remembered() -> None:
    """A raise or a refused result is not remembered: the next equal call runs the body."""
    results: list[Any] = [ValueError(), {"n": "bad"}, {"n": 7}]

    def body(**kwargs: Any) -> Any:
        value = results.pop(0)
        if isinstance(value, Exception):
            raise value
        return value

    gate = gate_for(body, {"x": {"type": "int"}}, {"n": {"type": "int"}})
    errors = [gate.call_tool("t", {"x": 1})["error"] for _ in range(4)]
    assert errors == ["raised:ValueError", "result:shape", "", ""]
    assert gate.stats("t") == ToolStats(runs=3, hits=1, bad_results=1, raised=1)


def test_refused_args_do_not_consult_the_memo() -> None:
    """A remembered success never answers arguments that break the contract."""
    body = Counter()
    gate = memo_gate(body, {"x": {"type": "int"}})
    assert gate.call_tool("t", {"x": 1})["ok"]
    assert gate.call_tool("t", {"x": True})["error"] == "args:type:x"
    assert gate.stats("t") == ToolStats(runs=1, blocked=1)


@pytest.mark.parametrize(("specs", "first", "second"), [
    pytest.param({"a": {"type": "int"}, "b": {"type": "str"}}, {"a": 1, "b": "x"},
                 {"b": "x", "a": 1}, id="scalars"),
    pytest.param({"x": {"type": "float"}, "opts": {"type": "dict"}},
                 {"x": 1.5, "opts": {"a": 1, "b": [2, {"c": 3, "d": 4}]}},
                 {"opts": {"b": [2, {"d": 4, "c": 3}], "a": 1}, "x": 1.5}, id="nested"),
])
def test_key_order_does_not_matter(specs: dict[str, Any], first: dict[str, Any],
                                   second: dict[str, Any]) -> None:
    """Equal args in any key order, nested dicts included, share one memo entry."""
    body = Counter()
    gate = memo_gate(body, specs)
    gate.call_tool("t", first)
    gate.call_tool("t", second)
    assert body.count == 1
    assert gate.cache_key("t", first) == gate.cache_key("t", second)


def test_one_int_float_and_bool_are_three_keys() -> None:
    """1, 1.0 and True are remembered apart, nested in a dict argument and at the top level."""
    body = Counter()
    gate = memo_gate(body, {"x": {"type": "float", "required": False},
                            "opts": {"type": "dict", "required": False}})
    nested = [{"opts": {"n": value}} for value in (1, 1.0, True)]
    top = [{"x": value} for value in (1, 1.0)]
    for args in nested + top + nested + top:
        assert gate.call_tool("t", args)["ok"]
    assert body.count == len(nested) + len(top)
    keys = {gate.cache_key("t", {"x": value}) for value in (1, 1.0, True)}
    assert len(keys) == 3


def test_two_tools_never_share_a_key() -> None:
    """Two tools called with equal args each run their own body."""
    first, second = Counter(), Counter()
    spec = {"x": {"type": "int"}}
    gate = Gate({"a": {"fn": first, "args": spec, "returns": {}},
                 "b": {"fn": second, "args": spec, "returns": {}}})
    gate.call_tool("a", {"x": 1})
    gate.call_tool("b", {"x": 1})
    assert (first.count, second.count) == (1, 1)
    assert gate.cache_key("a", {"x": 1}) != gate.cache_key("b", {"x": 1})


@pytest.mark.parametrize(("specs", "args"), [
    pytest.param({"n": {"type": "int"}}, {"n": 10**30}, id="int-beyond-64-bits"),
    pytest.param({"s": {"type": "str"}}, {"s": "\ud800"}, id="lone-surrogate"),
    pytest.param({"n": {"type": "float"}}, {"n": -0.0}, id="negative-zero"),
    pytest.param({"o": {"type": "dict"}}, {"o": {"n": math.nan}}, id="nested-nan"),
    pytest.param({"o": {"type": "dict"}}, {"o": {"t": (1, 2)}}, id="nested-tuple"),
    pytest.param({"o": {"type": "dict"}}, {"o": {1: "one"}}, id="nested-int-key"),
])
def test_exactly_keyable_args_beyond_json_are_remembered(specs: dict[str, Any],
                                                         args: dict[str, Any]) -> None:
    """Args orjson cannot write exactly are keyed by a typed walk and still remembered."""
    body = Counter()
    gate = memo_gate(body, specs)
    gate.call_tool("t", args)
    gate.call_tool("t", copy.deepcopy(args))
    assert body.count == 1


def test_walked_keys_keep_types_apart() -> None:
    """The typed walk tells 1 from True from 1.0, a list from a tuple, and -0.0 from 0.0."""
    pairs = [({"n": 1}, {"n": True}), ({"n": 1}, {"n": 1.0}), ({"n": [1]}, {"n": (1,)}),
             ({"n": -0.0}, {"n": 0.0}), ({1: "a"}, {"1": "a"}), ({"n": math.nan}, {"n": None})]
    body = Counter()
    gate = memo_gate(body, {"i": {"type": "int"}, "opts": {"type": "dict"}})
    for index, pair in enumerate(pairs):
        for opts in pair:
            # 10**30 keeps every call off orjson's fast path and on the typed walk.
            gate.call_tool("t", {"i": 10**30 + index, "opts": opts})
    assert body.count == 2 * len(pairs)


class _Unkeyable:
    pass


class _Str(str):
    pass


def _self_referential() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["me"] = loop
    return loop


def _deep_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


class _ListSubclass(list):  # type: ignore[type-arg]
    pass


@pytest.mark.parametrize("opts", [
    pytest.param({"o": _Unkeyable()}, id="object"),
    pytest.param({"s": {1, 2}}, id="set"),
    pytest.param({"l": [1, _Unkeyable()]}, id="object-in-list"),
    pytest.param({"d": {"k": _Unkeyable()}}, id="object-in-dict"),
    pytest.param({_Unkeyable(): 1}, id="object-as-key"),
    pytest.param({"l": _ListSubclass([1])}, id="list-subclass"),
    pytest.param(_self_referential(), id="self-referential"),
    pytest.param({"deep": _deep_list(100)}, id="deeper-than-max-depth"),
])
def test_args_that_cannot_be_keyed_are_not_remembered(opts: dict[Any, Any]) -> None:
    """Args with no exact key still run, every time, and are never answered from the memo."""
    body = Counter(lambda kwargs: {"n": 1})
    gate = memo_gate(body, {"opts": {"type": "dict"}})
    for _ in range(2):
        assert gate.call_tool("t", {"opts": opts}) == {"ok": True, "value": {"n": 1},
                                                       "error": ""}
    assert body.count == 2
    assert gate.cache_key("t", {"opts": opts}) is None


def _nest(depth: int, wrap: Callable[[Any], Any]) -> Any:
    """``wrap`` applied ``depth`` times around the scalar 0."""
    value: Any = 0
    for _ in range(depth):
        value = wrap(value)
    return value


# Args whose deepest scalar sits ``depth`` levels below the args dict itself.
DEPTH_SHAPES = [
    pytest.param(lambda depth: {"a": _nest(depth - 1, lambda v: [v])}, id="lists"),
    pytest.param(lambda depth: {"a": _nest(depth - 1, lambda v: {"k": v})}, id="dicts"),
    pytest.param(lambda depth: {"a": {_nest(depth - 2, lambda v: (v,)): "x"}},
                 id="tuple-as-a-key"),
]


@pytest.mark.parametrize("args_at", DEPTH_SHAPES)
def test_args_are_keyed_down_to_max_depth_and_no_deeper(args_at: Callable[[int], Any]) -> None:
    """A scalar MAX_DEPTH levels down (in lists, dicts or a key) is keyed; one level more is not."""
    gate = memo_gate(Counter())
    assert gate.cache_key("t", args_at(MAX_DEPTH)) is not None
    assert gate.cache_key("t", args_at(MAX_DEPTH + 1)) is None


NON_FINITE: list[float | None] = [math.nan, math.inf, -math.inf, None]


@pytest.mark.parametrize("index", [0, 1, 2], ids=["nan", "inf", "-inf"])
def test_cache_key_tells_non_finite_floats_apart(index: int) -> None:
    """A non-finite float is keyed exactly: apart from the other non-finite floats and None."""
    gate = memo_gate(Counter())
    key = gate.cache_key("t", {"x": NON_FINITE[index]})
    assert key is not None
    assert key == gate.cache_key("t", {"x": float(str(NON_FINITE[index]))})
    others = {gate.cache_key("t", {"x": other})
              for position, other in enumerate(NON_FINITE) if position != index}
    assert key not in others


def test_missing_sentinel_reads_as_missing() -> None:
    """The sentinel compiled checks use for an absent key reads as MISSING when debugged."""
    from agtool._compile import _MISSING

    assert repr(_MISSING) == "MISSING"


def test_cache_key_of_a_non_dict_is_none() -> None:
    """Arguments that are not a dict have no memo key."""
    assert memo_gate(Counter()).cache_key("t", [("x", 1)]) is None


def test_hit_value_is_isolated_from_the_caller() -> None:
    """Mutating a value handed out from the memo does not change the next hit."""
    body = Counter(lambda kwargs: {"rows": [{"n": 1}], "meta": {"k": "v"}})
    gate = memo_gate(body)
    gate.call_tool("t", {"x": 1})
    hit = gate.call_tool("t", {"x": 1})["value"]
    hit["rows"][0]["n"] = 999
    hit["rows"].append("junk")
    hit["meta"].clear()
    assert gate.call_tool("t", {"x": 1})["value"] == {"rows": [{"n": 1}], "meta": {"k": "v"}}
    assert body.count == 1


def test_miss_value_mutation_does_not_reach_the_memo() -> None:
    """Mutating the value the first (miss) call returned does not change later hits."""
    body = Counter(lambda kwargs: {"rows": [{"n": 1}]})
    gate = memo_gate(body)
    miss = gate.call_tool("t", {"x": 1})["value"]
    miss["rows"][0]["n"] = 999
    assert gate.call_tool("t", {"x": 1})["value"] == {"rows": [{"n": 1}]}
    assert body.count == 1


@pytest.mark.parametrize("extra", [
    pytest.param((1, [2]), id="tuple"),
    pytest.param(10**30, id="int-beyond-64-bits"),
    pytest.param(math.nan, id="nan"),
    pytest.param({1: [2]}, id="int-key"),
])
def test_values_json_cannot_hold_are_remembered_as_isolated_copies(extra: object) -> None:
    """A value orjson cannot round-trip is remembered by copy, types kept and isolated."""
    produced: list[dict[str, Any]] = []

    def make(kwargs: dict[str, Any]) -> dict[str, Any]:
        produced.append({"extra": extra, "box": [0]})
        return produced[-1]

    body = Counter(make)
    gate = memo_gate(body)
    gate.call_tool("t", {"x": 1})
    produced[0]["box"].append("from the miss")
    hit = gate.call_tool("t", {"x": 1})["value"]
    assert body.count == 1
    assert hit["box"] == [0]
    assert type(hit["extra"]) is type(extra)
    hit["box"].append("from a hit")
    assert gate.call_tool("t", {"x": 1})["value"]["box"] == [0]


TYPED_RETURNS: dict[str, Any] = {
    "rows": {"type": "list", "item": {"n": {"type": "int"}, "tag": {"type": "str",
                                                                   "required": False}}},
    "note": {"type": "str", "required": False},
}


@pytest.mark.parametrize("value", [
    pytest.param({"rows": [{"n": 1}]}, id="only-declared-keys"),
    pytest.param({"rows": [{"n": 1, "tag": "a"}], "note": "x"}, id="optional-keys-present"),
])
def test_fully_typed_value_is_remembered_as_an_isolated_copy(value: dict[str, Any]) -> None:
    """A value its contract types entirely is remembered without loss and handed out fresh."""
    produced: list[dict[str, Any]] = []

    def make(kwargs: dict[str, Any]) -> dict[str, Any]:
        produced.append(copy.deepcopy(value))
        return produced[-1]

    gate = gate_for(Counter(make), {"x": {"type": "int"}}, TYPED_RETURNS)
    gate.call_tool("t", {"x": 1})
    produced[0]["rows"][0]["n"] = 999
    hit = gate.call_tool("t", {"x": 1})["value"]
    assert hit == value
    hit["rows"].clear()
    assert gate.call_tool("t", {"x": 1})["value"] == value
    assert gate.stats("t").runs == 1


@pytest.mark.parametrize("extra", [
    pytest.param((1, 2), id="tuple"),
    pytest.param(math.nan, id="nan"),
    pytest.param(frozenset({1}), id="frozenset"),
    pytest.param(_Str("x"), id="str-subclass"),
    pytest.param(collections.OrderedDict(a=1), id="dict-subclass"),
])
@pytest.mark.parametrize("where", ["top-level", "in-an-item"])
def test_undeclared_parts_of_a_typed_value_keep_their_types(extra: object, where: str) -> None:
    """An extra key the contract does not declare is remembered with its own type, not as JSON."""
    value: dict[str, Any] = {"rows": [{"n": 1}]}
    if where == "top-level":
        value["extra"] = extra
    else:
        value["rows"][0]["extra"] = extra
    gate = gate_for(Counter(lambda kwargs: value), {"x": {"type": "int"}}, TYPED_RETURNS)
    assert gate.validate_result("t", value) == ""
    gate.call_tool("t", {"x": 1})
    hit = gate.call_tool("t", {"x": 1})["value"]
    held = hit["extra"] if where == "top-level" else hit["rows"][0]["extra"]
    assert type(held) is type(extra)
    assert gate.stats("t").runs == 1


OPEN_RETURNS: dict[str, Any] = {
    "opts": {"type": "dict", "required": False},
    "bag": {"type": "list", "required": False},
}


@pytest.mark.parametrize("inside", [(1, 2), math.nan], ids=["tuple", "nan"])
@pytest.mark.parametrize("key", ["opts", "bag"], ids=["in-a-dict-field", "in-an-item-less-list"])
def test_untyped_insides_of_declared_fields_keep_their_types(key: str, inside: object) -> None:
    """What a dict field or an item-less list field holds is not typed, so a hit keeps its types."""
    # One field per contract: either one alone must make the whole value undeclared.
    gate = gate_for(Counter(lambda kwargs: {key: {"in": inside} if key == "opts" else [inside]}),
                    {"x": {"type": "int"}}, {key: OPEN_RETURNS[key]})
    assert gate.call_tool("t", {"x": 1})["ok"]
    hit = gate.call_tool("t", {"x": 1})["value"][key]
    held = hit["in"] if key == "opts" else hit[0]
    assert type(held) is type(inside)
    assert gate.stats("t").runs == 1


class _Dict(dict):  # type: ignore[type-arg]
    pass


def test_result_of_a_dict_subclass_keeps_its_type_on_a_hit() -> None:
    """A fully typed result returned as a dict subclass comes back from the memo as that class."""
    gate = gate_for(Counter(lambda kwargs: _Dict(rows=[{"n": 1}])), {"x": {"type": "int"}},
                    TYPED_RETURNS)
    gate.call_tool("t", {"x": 1})
    hit = gate.call_tool("t", {"x": 1})["value"]
    assert type(hit) is _Dict
    assert hit == {"rows": [{"n": 1}]}
    assert gate.stats("t").runs == 1


@pytest.mark.parametrize("value", [
    pytest.param({"rows": [{"n": 1}]}, id="optional-keys-absent"),
    pytest.param({"rows": [{"n": 1, "tag": "a"}, {"n": 2}], "note": "x"},
                 id="optional-keys-present"),
])
def test_fully_typed_value_answers_the_empty_reason(value: dict[str, Any]) -> None:
    """A value its contract types entirely checks as "", not undeclared: the memo skips a read."""
    contract = gate_for(Counter(), returns=TYPED_RETURNS).contract("t")
    assert contract is not None
    assert compile_result_check(contract.returns)(value) == ""


def test_freeze_keeps_json_as_bytes_and_verifies_by_default() -> None:
    """Plain JSON is remembered as orjson bytes; by default anything else is verified and copied."""
    plain = {"rows": [{"n": 1, "tag": "a"}], "ratio": 0.5, "ok": True, "none": None}
    for verify in (True, False):
        frozen = freeze(plain, verify=verify)
        assert frozen is not None
        assert type(frozen[0]) is bytes
        assert thaw(frozen) == plain
    lossy = {"n": math.nan, "t": (1, 2)}
    kept = thaw(freeze(lossy))  # type: ignore[arg-type]
    assert math.isnan(kept["n"])
    assert type(kept["t"]) is tuple


def test_exact_value_is_kept_and_handed_out_as_fresh_copies_of_every_container() -> None:
    """The copier compiled from a closed return contract copies each list and dict, at depth."""
    copy = compile_copy(parse_entry("t", {"fn": Counter(), "args": {}, "returns": {
        "rows": {"type": "list", "item": {"n": {"type": "int"}}},
        "grid": {"type": "list", "required": False,
                 "item": {"type": "list", "item": {"type": "int"}}}}}).returns)
    assert copy is not None
    value = {"rows": [{"n": 1}, {"n": 2}], "grid": [[1, 2], [3]]}
    frozen = freeze(value, False, copy)
    assert frozen is not None
    first, second = thaw(frozen), thaw(frozen)
    assert first == second == value
    for one in (first, second):
        one["rows"][0]["n"] = 99
        one["grid"][0].append(7)
        one["rows"].append({"n": 5})
    assert thaw(frozen) == value  # what callers did to their copies stays with them
    assert thaw(frozen) is not thaw(frozen)
    open_contract = parse_entry("t", {"fn": Counter(), "args": {},
                                      "returns": {"where": {"type": "dict"}}})
    assert compile_copy(open_contract.returns) is None  # untyped parts: copied the slow way


def test_self_referential_value_is_remembered_with_its_cycle() -> None:
    """A value that contains itself is remembered as a copy that still contains itself."""
    original = _self_referential()
    body = Counter(lambda kwargs: original)
    gate = memo_gate(body)
    gate.call_tool("t", {"x": 1})
    hit = gate.call_tool("t", {"x": 1})["value"]
    assert body.count == 1
    assert hit["me"] is hit
    assert hit is not original


@pytest.mark.parametrize("extra", [
    pytest.param(threading.Lock(), id="lock"),
    pytest.param(_deep_list(5000), id="too-deep-to-copy"),
])
def test_values_that_cannot_be_copied_are_not_remembered(extra: object) -> None:
    """A success that cannot be copied is answered but not remembered: the body runs again."""
    body = Counter(lambda kwargs: {"extra": extra})
    gate = memo_gate(body)
    assert gate.call_tool("t", {"x": 1})["ok"]
    assert gate.call_tool("t", {"x": 1})["ok"]
    assert body.count == 2


def test_falsy_success_is_remembered() -> None:
    """An empty dict is a success like any other and answered from the memo."""
    body = Counter(lambda kwargs: {})
    gate = memo_gate(body)
    assert gate.call_tool("t", {"x": 1}) == {"ok": True, "value": {}, "error": ""}
    assert gate.call_tool("t", {"x": 1}) == {"ok": True, "value": {}, "error": ""}
    assert body.count == 1


def test_clear_forgets_every_remembered_value() -> None:
    """clear() empties the memo, so the next equal call runs the body again."""
    body = Counter()
    gate = memo_gate(body)
    gate.call_tool("t", {"x": 1})
    gate.clear()
    gate.call_tool("t", {"x": 1})
    assert body.count == 2


# -- Changes to the table ------------------------------------------------------------------------

def test_swapped_fn_takes_effect_and_forgets_the_old_memo() -> None:
    """A swapped fn runs on the next call, and what the old fn returned is forgotten."""
    old = Counter(lambda kwargs: {"from": "old"})
    new = Counter(lambda kwargs: {"from": "new"})
    table = {"t": {"fn": old, "args": {"x": {"type": "int"}}, "returns": {}}}
    gate = Gate(table)
    assert gate.call_tool("t", {"x": 1})["value"] == {"from": "old"}
    table["t"]["fn"] = new
    assert gate.call_tool("t", {"x": 1})["value"] == {"from": "new"}
    table["t"]["fn"] = old
    assert gate.call_tool("t", {"x": 1})["value"] == {"from": "old"}
    assert (old.count, new.count) == (2, 1)


def test_counters_follow_a_tool_through_a_swapped_entry() -> None:
    """Calls after an entry is swapped are counted under the same tool name as those before."""
    old, new = Counter(), Counter()
    table = {"t": {"fn": old, "args": {"x": {"type": "int"}}, "returns": {}}}
    gate = Gate(table)
    gate.call_tool("t", {"x": 1})
    table["t"]["fn"] = new
    calls = 3
    for _ in range(calls):
        gate.call_tool("t", {"x": 1})
    runs = old.count + new.count
    assert gate.stats("t") == ToolStats(runs=runs, hits=1 + calls - runs)
    assert new.count == 1


def test_replaced_entry_takes_effect() -> None:
    """A whole entry replaced in the table is used, contract and fn, on the next call."""
    body = Counter()
    table: dict[str, Any] = {"t": {"fn": body, "args": {"x": {"type": "int"}}, "returns": {}}}
    gate = Gate(table)
    assert gate.call_tool("t", {"x": 5})["ok"]
    table["t"] = {"fn": body, "args": {"x": {"type": "int", "max": 3}}, "returns": {}}
    assert gate.call_tool("t", {"x": 5})["error"] == "args:max:x"
    assert body.count == 1


def test_replaced_returns_takes_effect() -> None:
    """A stricter return contract swapped in refuses the next result, memo forgotten."""
    body = Counter(lambda kwargs: {"rows": []})
    table: dict[str, Any] = {"t": {"fn": body, "args": {}, "returns": {
        "rows": {"type": "list", "min_len": 0}}}}
    gate = Gate(table)
    assert gate.call_tool("t", {})["ok"]
    table["t"]["returns"] = {"rows": {"type": "list"}}
    assert gate.call_tool("t", {})["error"] == "result:empty"
    assert body.count == 2


def test_added_tool_is_callable_on_the_next_call() -> None:
    """A tool added to the table after the gate was built is validated and called."""
    table: dict[str, Any] = {}
    gate = Gate(table)
    assert gate.call_tool("late", {"x": 1})["error"] == "args:unknown_tool"
    body = Counter()
    table["late"] = {"fn": body, "args": {"x": {"type": "int"}}, "returns": {}}
    assert gate.call_tool("late", {"x": 1}) == {"ok": True, "value": {"echo": {"x": 1}},
                                                "error": ""}
    assert gate.validate_args("late", {"x": "1"}) == "type:x"
    assert gate.contract("late") is not None
    assert body.count == 1


def test_removed_tool_is_unknown() -> None:
    """A tool deleted from the table answers unknown_tool and its body no longer runs."""
    body = Counter()
    table: dict[str, Any] = {"t": {"fn": body, "args": {}, "returns": {}}}
    gate = Gate(table)
    gate.call_tool("t", {})
    del table["t"]
    assert gate.call_tool("t", {})["error"] == "args:unknown_tool"
    assert body.count == 1


def test_in_place_deep_change_is_seen_after_refresh() -> None:
    """A bound changed inside a spec takes effect after refresh(), which also clears the memo."""
    body = Counter()
    table: dict[str, Any] = {"t": {"fn": body, "args": {"x": {"type": "int", "max": 9}},
                                   "returns": {}}}
    gate = Gate(table)
    assert gate.call_tool("t", {"x": 5})["ok"]
    table["t"]["args"]["x"]["max"] = 3
    gate.refresh()
    assert gate.call_tool("t", {"x": 5})["error"] == "args:max:x"
    assert gate.call_tool("t", {"x": 2})["ok"]
    assert body.count == 2


def test_contract_answers_the_validated_contract() -> None:
    """contract(name) is the parsed contract of a valid entry and None for an unknown name."""
    body = Counter()
    gate = gate_for(body, {"x": {"type": "int", "max": 3}})
    contract = gate.contract("t")
    assert contract is not None
    assert (contract.name, contract.fn, contract.args["x"].max) == ("t", body, 3)
    assert gate.contract("nope") is None


# -- Never mutates, never raises -----------------------------------------------------------------

@pytest.mark.parametrize("args", [
    pytest.param(PROBE_VALID, id="valid"),
    pytest.param({**PROBE_VALID, "tags": ["a"], "rows": [{"store": "x", "count": 1}],
                  "opts": {"k": [1, {"z": 2}]}}, id="valid-nested"),
    pytest.param({**PROBE_VALID, "rows": [{"store": "x", "count": -1}]}, id="refused-nested"),
    pytest.param({"region": "mars", "limit": True, "sku_id": "A100"}, id="refused"),
    pytest.param(with_odd_key(3), id="non-str-key"),
])
def test_gate_never_mutates_the_callers_args(args: dict[Any, Any]) -> None:
    """validate_args and call_tool leave the caller's dict and everything in it unchanged."""
    body = Counter(lambda kwargs: {"sku": kwargs["code"], "rows": [dict(ROW)]})
    gate = Gate({"probe": {"fn": body, "args": PROBE_ARGS, "returns": PROBE_RETURNS}})
    before = copy.deepcopy(args)
    inner = {key: id(value) for key, value in args.items()}
    gate.validate_args("probe", args)
    gate.call_tool("probe", args)
    gate.call_tool("probe", args)
    assert args == before
    assert list(args) == list(before)
    assert {key: id(value) for key, value in args.items()} == inner


class _RaisingGet(dict):  # type: ignore[type-arg]
    def get(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("get")


class _RaisingIter(dict):  # type: ignore[type-arg]
    def __iter__(self) -> Iterator[Any]:
        raise RuntimeError("iter")


class _RaisingHash(str):
    def __hash__(self) -> int:
        raise RuntimeError("hash")


class _RaisingEq:
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __hash__(self) -> int:
        return 1


EVIL_ARGS = [
    pytest.param({1: "A100", 2.5: "x"}, "not_object", id="non-str-keys-only"),
    pytest.param({None: 1}, "not_object", id="none-key"),
    pytest.param({_RaisingEq(): 1}, "not_object", id="key-whose-eq-raises"),
    pytest.param(with_("limit", math.nan), "type:limit", id="nan-limit"),
    pytest.param(with_("limit", 10**100), "max:limit", id="huge-int"),
    pytest.param(with_("limit", -(10**100)), "min:limit", id="huge-negative-int"),
    pytest.param(with_("ratio", 10**400), "max:ratio", id="int-beyond-float-range"),
    pytest.param(with_("tags", _deep_list(10_000)), "type:tags", id="list-10000-deep"),
    pytest.param(with_("opts", _deep_list(10_000)), "type:opts", id="list-10000-deep-as-dict"),
    pytest.param(_self_referential(), "unexpected:me", id="self-referential-dict"),
    pytest.param(with_("code", "\ud800"), "pattern:code", id="lone-surrogate"),
    pytest.param(with_("code", "A100" * 100_000), "pattern:code", id="huge-str"),
]


@pytest.mark.parametrize(("args", "reason"), EVIL_ARGS)
def test_evil_args_never_raise(args: Any, reason: str) -> None:
    """Hostile arguments answer a reason naming the defect, from every entry point."""
    body = Counter()
    gate = probe_gate(body)
    assert gate.validate_args("probe", args) == reason
    envelope = gate.call_tool("probe", args)
    assert_envelope(envelope)
    assert envelope["error"] == f"args:{reason}"
    assert body.count == 0


@pytest.mark.parametrize("args", [
    pytest.param(_RaisingGet(PROBE_VALID), id="dict-subclass-get-raises"),
    pytest.param(_RaisingIter(PROBE_VALID), id="dict-subclass-iter-raises"),
])
def test_a_dict_whose_methods_raise_is_read_from_its_storage(args: dict[str, Any]) -> None:
    """The gate reads a dict subclass through dict's own storage: its raising methods never run."""
    body = Counter()
    gate = probe_gate(body)
    assert gate.validate_args("probe", args) == ""
    assert gate.call_tool("probe", args)["ok"] is True
    assert body.calls == [dict(dict.items(args))]
    assert all(type(call) is dict for call in body.calls)


def test_deep_list_inside_a_dict_arg_runs_but_is_not_remembered() -> None:
    """A 10000-deep list inside a dict argument is valid, runs, and is not remembered."""
    body = Counter(lambda kwargs: {"n": 1})
    gate = probe_gate(body)
    args = with_("opts", {"deep": _deep_list(10_000)})
    assert gate.call_tool("probe", args)["ok"]
    assert gate.call_tool("probe", args)["ok"]
    assert body.count == 2


@pytest.mark.parametrize("name", [
    pytest.param(["probe"], id="list"),
    pytest.param({"probe": 1}, id="dict"),
    pytest.param(math.nan, id="nan"),
    pytest.param(b"probe", id="bytes"),
    pytest.param(_RaisingHash("probe"), id="str-whose-hash-raises"),
])
def test_evil_names_never_raise(name: Any) -> None:
    """A name that is unhashable, not a str, or hostile answers unknown_tool everywhere."""
    gate = probe_gate()
    assert gate.validate_args(name, PROBE_VALID) == "unknown_tool"
    assert gate.validate_result(name, RESULT_VALID) == "unknown_tool"
    assert gate.call_tool(name, PROBE_VALID)["error"] == "args:unknown_tool"


class _ResultGetRaises(dict):  # type: ignore[type-arg]
    def get(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("get")


class _LenRaises(list):  # type: ignore[type-arg]
    def __len__(self) -> int:
        raise RuntimeError("len")


@pytest.mark.parametrize("value", [
    pytest.param(_ResultGetRaises(RESULT_VALID), id="dict-subclass-get-raises"),
    pytest.param(result_with("rows", _LenRaises([ROW])), id="rows-len-raises"),
    pytest.param(_self_referential(), id="self-referential"),
    pytest.param(result_with("rows", _deep_list(10_000)), id="rows-10000-deep"),
    pytest.param(result_with("sku", math.nan), id="nan"),
    pytest.param(10**100, id="huge-int"),
])
def test_evil_results_answer_shape(value: object) -> None:
    """A returned value that cannot be read as the contract says is shape, never a raise."""
    body = Counter(lambda kwargs: value)
    gate = gate_for(body, returns=PROBE_RETURNS)
    assert gate.validate_result("t", value) == "shape"
    assert gate.call_tool("t", {}) == {"ok": False, "value": None, "error": "result:shape"}


def test_tool_table_whose_lookup_raises_answers_unknown_tool() -> None:
    """A table mapping whose lookup raises for a name has no such tool."""

    class Fussy(dict):  # type: ignore[type-arg]
        def get(self, key: Any, default: Any = None) -> Any:
            if key == "fussy":
                raise RuntimeError("lookup")
            return super().get(key, default)

    body = Counter()
    gate = Gate(Fussy({"t": {"fn": body, "args": {}, "returns": {}}}))
    assert gate.call_tool("fussy", {})["error"] == "args:unknown_tool"
    assert gate.call_tool("t", {})["ok"]


# -- Inputs that once broke the gate ---------------------------------------------------------

class _ValuesRaise(dict):  # type: ignore[type-arg]
    def values(self) -> Any:
        raise RuntimeError("values")


def test_call_tool_never_raises_on_args_whose_values_method_raises() -> None:
    """Valid args in a dict subclass whose values() raises still get an envelope."""
    body = Counter()
    gate = probe_gate(body)
    args = _ValuesRaise(PROBE_VALID)
    assert gate.validate_args("probe", args) == ""
    assert_envelope(gate.call_tool("probe", args))


def test_call_tool_never_raises_when_the_result_cannot_be_compared() -> None:
    """A success holding a value whose == raises is answered, not raised, from call_tool."""
    import dataclasses

    @dataclasses.dataclass(eq=False)
    class Payload:
        n: int = 1

        def __eq__(self, other: object) -> bool:
            raise RuntimeError("eq")

    body = Counter(lambda kwargs: {"payload": Payload()})
    gate = memo_gate(body)
    envelope = gate.call_tool("t", {"x": 1})
    assert_envelope(envelope)
    assert envelope["ok"]


class _LooksLikeStr:
    """Not a str, but hashes and compares equal to one."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __hash__(self) -> int:
        return hash(self.text)

    def __eq__(self, other: object) -> bool:
        return other == self.text


def test_non_str_key_equal_to_an_arg_name_is_not_object() -> None:
    """A key that only compares equal to an argument name is not a str key: not_object."""
    body = Counter()
    gate = probe_gate(body)
    args = {_LooksLikeStr("code"): "A100", "region": "north", "limit": 2}
    assert gate.validate_args("probe", args) == "not_object"
    assert gate.call_tool("probe", args)["error"] == "args:not_object"
    assert body.count == 0


# -- The reference module ------------------------------------------------------------------------

def test_stock_has_every_region_for_at_least_three_skus() -> None:
    """STOCK holds at least three skus, each with rows for exactly the REGIONS."""
    assert len(tools.STOCK) >= 3
    for regions in tools.STOCK.values():
        assert sorted(regions) == sorted(tools.REGIONS)


def test_stock_rows_keep_the_return_contract_item() -> None:
    """Every stocked row is a store name with a non-negative int count."""
    for regions in tools.STOCK.values():
        for rows in regions.values():
            for row in rows:
                assert set(row) == {"store", "count"}
                assert type(row["store"]) is str
                assert type(row["count"]) is int
                assert row["count"] >= 0


def _pairs(predicate: Callable[[int], bool]) -> list[tuple[str, str]]:
    return [(sku, region) for sku, regions in tools.STOCK.items()
            for region, rows in regions.items() if predicate(len(rows))]


def test_stock_has_an_empty_pair_and_an_oversized_pair() -> None:
    """Some (sku, region) has no rows and some has more rows than MAX_ROWS."""
    assert _pairs(lambda n: n == 0)
    assert _pairs(lambda n: n > tools.MAX_ROWS)


@pytest.mark.parametrize("body", [tools.stock_lookup, tools.legacy_stock],
                         ids=["stock_lookup", "legacy_stock"])
def test_unknown_sku_has_no_rows(body: Callable[..., dict[str, Any]]) -> None:
    """An unknown sku is answered with no rows, in every region."""
    unknown = "".join(tools.STOCK) + "?"
    for region in tools.REGIONS:
        assert body(sku=unknown, region=region, limit=tools.MAX_ROWS) == {"sku": unknown,
                                                                          "rows": []}


@pytest.mark.parametrize("body", [tools.stock_lookup, tools.legacy_stock],
                         ids=["stock_lookup", "legacy_stock"])
def test_both_bodies_count_calls(body: Callable[..., dict[str, Any]]) -> None:
    """Each body adds one to CALLS every time it runs."""
    sku, region = _pairs(lambda n: n > 0)[0]
    before = tools.CALLS
    for _ in range(3):
        body(sku=sku, region=region, limit=1)
    assert before + 3 == tools.CALLS


def test_stock_lookup_honours_limit_and_legacy_ignores_it() -> None:
    """stock_lookup returns at most limit rows; legacy_stock returns every row."""
    sku, region = _pairs(lambda n: n > tools.MAX_ROWS)[0]
    rows = tools.STOCK[sku][region]
    assert tools.stock_lookup(sku, region, 1)["rows"] == rows[:1]
    assert tools.legacy_stock(sku, region, 1)["rows"] == rows


def test_reference_gate_refuses_oversized_and_empty_results() -> None:
    """Through the reference table, legacy rows beyond MAX_ROWS are too_big and no rows empty."""
    gate = Gate(tools.TOOLS)
    big_sku, big_region = _pairs(lambda n: n > tools.MAX_ROWS)[0]
    empty_sku, empty_region = _pairs(lambda n: n == 0)[0]
    big = {"sku": big_sku, "region": big_region, "limit": tools.MAX_ROWS}
    empty = {"sku": empty_sku, "region": empty_region, "limit": 1}
    assert gate.call_tool("legacy_stock", big)["error"] == "result:too_big"
    assert gate.call_tool("stock_lookup", big)["ok"]
    assert gate.call_tool("stock_lookup", empty)["error"] == "result:empty"
    assert gate.call_tool("stock_lookup", {**big, "limit": tools.MAX_ROWS + 1})["error"] == (
        "args:max:limit")
    assert gate.call_tool("stock_lookup", {**big, "region": "mars"})["error"] == (
        "args:allowed:region")


def test_reference_gate_remembers_and_skips_the_body() -> None:
    """A repeated reference call is a memo hit and leaves CALLS unchanged."""
    gate = Gate(tools.TOOLS)
    sku, region = _pairs(lambda n: n > 0)[0]
    args = {"sku": sku, "region": region, "limit": 1}
    before = tools.CALLS
    first = gate.call_tool("stock_lookup", args)
    second = gate.call_tool("stock_lookup", args)
    assert first == second
    assert before + 1 == tools.CALLS


def test_reference_module_names_are_the_gate_bound_to_tools() -> None:
    """The module-level helpers and memo belong to GATE, and GATE is built over TOOLS."""
    assert tools.GATE.table is tools.TOOLS
    assert tools.CACHE is tools.GATE.cache
    for name in ("validate_args", "validate_result", "call_tool", "cache_key"):
        bound = getattr(tools, name)
        assert bound.__self__ is tools.GATE
        assert bound.__func__ is getattr(Gate, name)
    assert tools.TOOLS["stock_lookup"]["fn"] is tools.stock_lookup
    assert tools.TOOLS["legacy_stock"]["fn"] is tools.legacy_stock


class _Level(enum.IntEnum):
    LOW = 1


class _AlwaysTrue(list):  # type: ignore[type-arg]
    def __bool__(self) -> bool:
        return True


def test_an_enum_in_an_undeclared_part_keeps_its_type_on_a_hit() -> None:
    """An IntEnum equals its int, but a memo hit still hands back the enum, not the int."""
    gate = gate_for(Counter(lambda kwargs: {"rows": [{"n": 1}], "level": _Level.LOW}),
                    {"x": {"type": "int"}}, TYPED_RETURNS)
    gate.call_tool("t", {"x": 1})
    hit = gate.call_tool("t", {"x": 1})
    assert type(hit["value"]["level"]) is _Level
    assert gate.stats("t").hits == 1


def test_an_empty_list_that_claims_to_be_true_is_still_empty() -> None:
    """Emptiness is read from the length, so a list subclass's own truth cannot hide it."""
    gate = gate_for(Counter(), {"x": {"type": "int"}}, TYPED_RETURNS)
    assert gate.validate_result("t", {"rows": _AlwaysTrue()}) == "empty"


def test_a_tuple_nested_past_max_depth_keeps_its_type_on_a_hit() -> None:
    """A value too deep to vet as JSON is copied, not serialised, so a deep tuple stays one."""
    from agtool._memo import MAX_DEPTH

    deep: Any = (1, 2)
    for _ in range(MAX_DEPTH + 20):
        deep = [deep]
    gate = gate_for(Counter(lambda kwargs: {"rows": [{"n": 1}], "deep": deep}),
                    {"x": {"type": "int"}}, TYPED_RETURNS)
    gate.call_tool("t", {"x": 1})
    held = gate.call_tool("t", {"x": 1})["value"]["deep"]
    for _ in range(MAX_DEPTH + 20):
        held = held[0]
    assert type(held) is tuple
    assert gate.stats("t").hits == 1


@pytest.mark.parametrize(("kwargs", "message"), [
    pytest.param({"scope": "read_public"}, "collection of risk level names", id="scope-str"),
    pytest.param({"scope": {"read_public": True}}, "collection of risk level names",
                 id="scope-dict"),
    pytest.param({"scope": [1]}, "collection of risk level names", id="scope-not-names"),
    pytest.param({"scope": {"read_public", "root"}}, r"unknown risk levels \['root'\]",
                 id="scope-unknown-level"),
    pytest.param({"memo_ttl": -1}, "memo_ttl must be a non-negative number", id="ttl-negative"),
    pytest.param({"memo_ttl": float("nan")}, "memo_ttl must be", id="ttl-nan"),
    pytest.param({"memo_ttl": "300"}, "memo_ttl must be", id="ttl-str"),
    pytest.param({"memo_size": -1}, "memo size must be a non-negative int", id="size-negative"),
    pytest.param({"memo_size": True}, "memo size must be", id="size-bool"),
])
def test_a_gate_made_with_a_bad_setting_says_which(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Gate(tools.TOOLS, **kwargs)


def test_a_gate_shows_its_scope_table_and_pending_wait() -> None:
    gate = Gate(tools.TOOLS, scope=["read_public", "read_sensitive"])
    assert gate.scope == frozenset({"read_public", "read_sensitive"})
    assert gate.table is tools.TOOLS
    gate.pending_wait = 0.25
    assert gate.pending_wait == 0.25
