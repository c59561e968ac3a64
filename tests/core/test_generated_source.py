"""Code the gate generates shows its source in a traceback, as a module's code does."""

from __future__ import annotations

import traceback
from typing import Any

import pytest

from agtool import Gate
from agtool._contract import parse_entry
from agtool._memo import compile_key
from agtool.tools import TOOLS

ARGS = {"sku": "A100", "region": "seoul", "limit": 1}


def _generated_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    return [frame for frame in traceback.extract_tb(exc.__traceback__)
            if frame.filename.startswith("<agtool ")]


def _interrupting_body(sku: str, region: str, limit: int) -> dict[str, Any]:
    raise KeyboardInterrupt


def test_a_traceback_through_a_compiled_read_shows_the_line_that_ran_the_body() -> None:
    """A KeyboardInterrupt out of a body passes through the tool's compiled entry: the
    traceback names that frame and prints its source line, not a bare file name."""
    gate = Gate({"stock_lookup": {**TOOLS["stock_lookup"], "fn": _interrupting_body}})
    with pytest.raises(KeyboardInterrupt) as caught:
        gate.call_tool("stock_lookup", ARGS)
    frames = _generated_frames(caught.value)
    assert [frame.name for frame in frames] == ["entry"]
    assert frames[0].line == "result = fn(**snapshot)"
    printed = "".join(traceback.format_exception(caught.value))
    assert "result = fn(**snapshot)" in printed


def test_a_traceback_through_a_compiled_key_shows_the_key_expression() -> None:
    """The memo key's generated function (the other exec site) shows its line too."""
    contract = parse_entry("stock_lookup", TOOLS["stock_lookup"])
    key_of = compile_key("stock_lookup", "v1", contract.args)
    with pytest.raises(KeyError) as caught:  # a snapshot the check would never let through
        key_of({"sku": "A100"}, None)
    frames = _generated_frames(caught.value)
    assert [frame.name for frame in frames] == ["key_of"]
    assert frames[0].line is not None
    assert frames[0].line.startswith("key = (KEY_NAME, KEY_VERSION, run_id, snapshot['sku']")


def test_two_compiled_functions_keep_their_own_source() -> None:
    """Each build is registered under a name of its own: a later build never shows in an
    earlier one's traceback."""
    contract = parse_entry("stock_lookup", TOOLS["stock_lookup"])
    first = compile_key("stock_lookup", "v1", contract.args)
    second = compile_key("stock_lookup", "v2", {})
    assert first.__code__.co_filename != second.__code__.co_filename
    with pytest.raises(KeyError) as caught:
        first({}, None)
    assert "snapshot['sku']" in "".join(traceback.format_exception(caught.value))
