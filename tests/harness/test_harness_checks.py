"""The harness's own checks, called by hand: each catches the bug it exists for, and only that.

Each test builds a gate over a small table with ``instrument`` and calls a check
with a call written out; a bug is planted in a body or in a ``Gate`` subclass.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import agtool
import agtool.harness._checks as harness
from agtool import ContractError, UpstreamError
from agtool.harness._checks import (
    check_hostile,
    check_interrupted,
    check_replaced,
    check_returns,
    instrument,
)
from agtool.harness.strategies import HOSTILE_CLASSES, INTERRUPTS, hostile_examples
from agtool.harness.strategies._oracle import defect_count


class StatusError(Exception):
    """An HTTP error as ``requests`` raises it: the status on the exception."""

    status_code = 503


def table_raising(exc: Exception | None, **entry: Any) -> dict[str, Any]:
    def lookup(status: str) -> dict[str, Any]:
        if exc is not None and status == "pending":
            raise exc
        return {"count": 1}

    return {"lookup": {"fn": lookup, "args": {"status": {
        "type": "str", "allowed": ["open", "pending"]}}, "returns": {"count": {"type": "int"}},
        **entry}}


def test_a_body_raising_on_a_valid_call_fails_returns_naming_exception_and_place() -> None:
    """A KeyError on a valid status: returns fails with the call, the exception and file:line."""
    table = table_raising(KeyError("pending"))
    with pytest.raises(AssertionError) as caught:
        check_returns(instrument(table), "lookup", {"status": "pending"})
    message = str(caught.value)
    assert "raised KeyError('pending')" in message
    assert "lookup({'status': 'pending'})" in message
    assert f"{__file__}:" in message
    assert "in lookup" in message
    check_returns(instrument(table), "lookup", {"status": "open"})  # the other value answers


@pytest.mark.parametrize("exc", [
    pytest.param(UpstreamError(502, "bad gateway"), id="UpstreamError"),
    pytest.param(ConnectionError("reset"), id="ConnectionError"),
    pytest.param(StatusError("unavailable"), id="http-status"),
    pytest.param(TimeoutError("slow"), id="TimeoutError"),
])
def test_transport_failures_and_timeouts_pass_returns(exc: Exception) -> None:
    """What the gate answers upstream:* or timeout is an expected failure, not a crash."""
    envelope = check_returns(instrument(table_raising(exc)), "lookup", {"status": "pending"})
    assert envelope["ok"] is False
    assert envelope["error"].split(":")[0] in ("upstream", "timeout")


@pytest.mark.parametrize("raises", [(LookupError,), [KeyError, ValueError], KeyError])
def test_an_exception_the_contract_names_passes_returns(raises: Any) -> None:
    """``raises`` names what a body may raise on a valid call: a subclass of it passes."""
    table = table_raising(KeyError("pending"), raises=raises)
    envelope = check_returns(instrument(table), "lookup", {"status": "pending"})
    assert envelope["error"] == "raised:KeyError"
    with pytest.raises(AssertionError, match="raised ValueError"):
        check_returns(instrument(table_raising(ValueError("x"), raises=(LookupError,))),
                      "lookup", {"status": "pending"})


@pytest.mark.parametrize(("raises", "field"), [
    ("KeyError", "raises"),
    ({KeyError}, "raises"),
    ([KeyError, 3], "raises[1]"),
    ((KeyboardInterrupt,), "raises[0]"),
    ((object,), "raises[0]"),
])
def test_a_malformed_raises_is_a_contract_error_naming_tool_and_field(raises: Any,
                                                                     field: str) -> None:
    """A ``raises`` that is not Exception classes fails at registration, naming the field."""
    with pytest.raises(ContractError, match=rf"tool 'lookup', field '{field.replace('[', '.')}"):
        agtool.check_table(table_raising(None, raises=raises))


# --- hostile input -------------------------------------------------------------------------------

WRITE_TABLE = {
    "order": {"fn": lambda order, qty: {"order": order}, "effect": "write",
              "key_args": ["order"], "risk": "irreversible",
              "args": {"order": {"type": "str"}, "qty": {"type": "int", "min": 1, "max": 9},
                       "note": {"type": "str", "required": False}},
              "returns": {"order": {"type": "str"}}},
    "look": {"fn": lambda ids: {"n": len(ids)}, "args": {
        "ids": {"type": "list", "max_len": 3, "item": {"type": "int"}},
        "ratio": {"type": "float", "required": False}},
        "returns": {"n": {"type": "int"}}},
}


def hostile_check(gate: agtool.Gate, twin: agtool.Gate, call: Any) -> None:
    check_hostile(gate, twin, call.name, call.args, call.expected, call.plain, call.echo,
                  **call.given)


@pytest.mark.parametrize("tool", sorted(WRITE_TABLE))
def test_every_hostile_class_passes_on_the_real_gate(tool: str) -> None:
    """One call of every class, each with its oracle, and the real gate answers each right."""
    calls = hostile_examples(WRITE_TABLE, tool)
    assert [call.kind for call in calls] == list(HOSTILE_CLASSES)
    for call in calls:
        gate, twin = instrument(WRITE_TABLE, [tool]), instrument(WRITE_TABLE, [tool])
        for one in (gate, twin):
            harness.body_of(one, tool).value = {"order": "A"} if tool == "order" else {"n": 0}
        hostile_check(gate, twin, call)


class ReadsThroughMethods(agtool.Gate):
    """A gate that copies the args through their own ``__iter__`` and ``__getitem__``."""

    def call_tool(self, name: Any, args: Any, *rest: Any, **kwargs: Any) -> Any:
        if isinstance(args, dict):
            try:
                args = {key: args[key] for key in args}
            except Exception:  # as a careless gate would
                args = {}
        return super().call_tool(name, args, *rest, **kwargs)


def test_a_gate_reading_args_through_their_methods_fails_a_hostile_class(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A dict whose ``__iter__`` hides a key makes such a gate answer other than the plain
    dict would: caught."""
    monkeypatch.setattr(harness, "Gate", ReadsThroughMethods)
    [call] = [call for call in hostile_examples(WRITE_TABLE, "look")
              if call.kind == "args: dict whose iter-hides-one"]
    gate, twin = instrument(WRITE_TABLE, ["look"]), instrument(WRITE_TABLE, ["look"])
    with pytest.raises(AssertionError, match="must read what the arguments hold"):
        hostile_check(gate, twin, call)


# --- interrupts and a racing table ---------------------------------------------------------------


class SwallowsInterrupts(agtool.Gate):
    """A gate answering an interrupt as a failure: the bug check_interrupted exists for."""

    def call_tool(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().call_tool(*args, **kwargs)
        except BaseException:  # the planted bug
            return {"ok": False, "value": None, "error": "raised:KeyboardInterrupt"}


@pytest.mark.parametrize("kind", INTERRUPTS)
@pytest.mark.parametrize("tool", sorted(WRITE_TABLE))
def test_interrupts_propagate_and_leave_nothing_behind(kind: type[BaseException],
                                                       tool: str) -> None:
    """Each BaseException propagates; a read's retry runs the body (nothing remembered), a
    write's answers ``write:unknown`` without running it (its effect may have been made)."""
    value = {"order": "A"} if tool == "order" else {"n": 0}
    args = {"order": "A", "qty": 1} if tool == "order" else {"ids": [1]}
    check_interrupted(instrument(WRITE_TABLE, [tool], stub=True), tool, args, kind("x"), value)


def test_a_gate_swallowing_an_interrupt_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupt answered as a value is caught, naming the interrupt."""
    monkeypatch.setattr(harness, "Gate", SwallowsInterrupts)
    with pytest.raises(AssertionError, match="must propagate"):
        check_interrupted(instrument(WRITE_TABLE, ["look"], stub=True), "look", {"ids": [1]},
                          asyncio.CancelledError(), {"n": 0})


class FreesInterruptedWrites(agtool.SqliteStore):
    """A store that frees a key the gate marks unknown: the old double-write bug, planted."""

    def mark_unknown(self, key: str, owner: str) -> bool:
        return self.release(key, owner)


def test_a_write_run_again_after_an_interrupt_fails() -> None:
    """A write whose key is freed by an interrupt is run a second time by its retry: caught."""
    gate = instrument(WRITE_TABLE, ["order"], stub=True)
    gate._store = FreesInterruptedWrites()  # before the gate makes its own
    with pytest.raises(AssertionError, match="never run it a second time"):
        check_interrupted(gate, "order", {"order": "A", "qty": 1}, KeyboardInterrupt("x"),
                          {"order": "A"})


def test_calls_racing_table_replacement_answer_from_the_bodies() -> None:
    """Replacing the entry while calls run: every answer is an envelope of one of its bodies."""
    check_replaced(instrument(WRITE_TABLE, ["look"], stub=True), "look", {"ids": [1]},
                   [{"n": 1}, {"n": 2}])


# --- the independent validator -------------------------------------------------------------------


@pytest.mark.parametrize(("args", "count"), [
    ({"ids": [1]}, 0),
    ({"ids": [1], "ratio": float("nan")}, 1),
    ({"ids": [1.0]}, 1),
    ({"ids": [1, 2, 3, 4]}, 1),
    ({"ids": "x", "ratio": True}, 2),
    ({}, 1),
    ({"ids": [], "extra": 1, "more": 2}, 2),
])
def test_the_validator_counts_one_defect_per_wrong_value(args: dict[str, Any],
                                                         count: int) -> None:
    """jsonschema, read as the gate reads ints and floats, counts each wrong value once."""
    assert defect_count(agtool.to_json_schema(WRITE_TABLE, "look"), args) == count
