"""agtool._shadow: a gate whose bodies are a framework's own tools, bound one call at a time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agtool import Gate
from agtool._shadow import Escape, bound, shadow

TABLE: dict[str, Any] = {"echo": {"fn": lambda text: {"text": text},
                                  "args": {"text": {"type": "str"}},
                                  "returns": {"text": {"type": "str"}}}}


def test_a_shadow_runs_the_bound_tool_with_checked_args_only() -> None:
    """The bound tool runs for its own name with the checked args; the table's fn never."""
    gate = shadow(Gate(TABLE))
    ran: list[dict[str, Any]] = []

    async def tool(args: dict[str, Any]) -> Any:
        ran.append(args)
        return {"text": args["text"].upper()}

    async def calls() -> list[Any]:
        with bound("echo", tool):
            return [await gate.acall_tool("echo", {"text": "hi"}),
                    await gate.acall_tool("echo", {"text": 5})]

    good, bad = asyncio.run(calls())
    assert good == {"ok": True, "value": {"text": "HI"}, "error": ""}
    assert bad["error"] == "args:type:text"
    assert ran == [{"text": "hi"}]
    assert len(gate.table) == 1
    assert list(gate.table) == ["echo"]


def test_outside_a_bound_call_the_body_is_a_failure_not_a_run() -> None:
    """Called with no tool bound (or another tool's), the stand-in raises, which the gate
    answers as a failure; a table entry that is not a dict is refused as it would be."""
    table = {**TABLE}
    gate = shadow(Gate(table))
    assert asyncio.run(gate.acall_tool("echo", {"text": "hi"}))["error"] == (
        "raised:RuntimeError")
    table["broken"] = "not an entry"  # added to the caller's table: the shadow sees it
    assert gate.call_tool("broken", {})["error"] == "args:bad_contract"


def test_a_framework_signal_from_the_tool_is_raised_as_it_was() -> None:
    """A tool's control-flow exception reaches the framework unchanged, through the gate."""
    gate = shadow(Gate(TABLE))
    signal = LookupError("the framework's own")

    async def tool(args: dict[str, Any]) -> Any:
        raise Escape(signal)

    async def call() -> Any:
        with bound("echo", tool):
            return await gate.acall_tool("echo", {"text": "hi"})

    with pytest.raises(LookupError) as raised:
        asyncio.run(call())
    assert raised.value is signal
