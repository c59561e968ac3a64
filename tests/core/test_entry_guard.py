"""A tool's compiled entry hands a call on as soon as it may not take the compiled read."""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Iterator

import pytest

from agtool import Gate
from agtool.tools import TOOLS

ARGS = {"sku": "A100", "region": "seoul", "limit": 1}


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def calls_log() -> Iterator[tuple[logging.Logger, _Kept]]:
    log = logging.getLogger("agtool.calls")
    level, kept = log.level, _Kept()
    log.addHandler(kept)
    try:
        yield log, kept
    finally:
        log.removeHandler(kept)
        log.setLevel(level)


def test_turning_the_calls_log_on_records_the_very_next_compiled_read(
        calls_log: tuple[logging.Logger, _Kept]) -> None:
    """The entry reads the logger's cached answer; a level changed after calls were made
    (and the answer cached) is seen on the next call, and again when it is turned off."""
    log, kept = calls_log
    log.setLevel(logging.WARNING)
    gate = Gate(TOOLS)
    for _ in range(3):
        gate.call_tool("stock_lookup", ARGS)
    assert log.isEnabledFor(logging.INFO) is False  # cached now
    log.setLevel(logging.INFO)
    gate.call_tool("stock_lookup", ARGS)
    gate.call_for_model("stock_lookup", ARGS)
    assert len(kept.records) == 2
    log.setLevel(logging.WARNING)
    gate.call_tool("stock_lookup", ARGS)
    assert len(kept.records) == 2


def test_a_disabled_calls_log_records_nothing(calls_log: tuple[logging.Logger, _Kept]) -> None:
    """``logging.disable`` after the answer was cached: no record, and the call answered."""
    log, kept = calls_log
    log.setLevel(logging.INFO)
    gate = Gate(TOOLS)
    gate.call_tool("stock_lookup", ARGS)
    assert len(kept.records) == 1
    logging.disable(logging.INFO)
    try:
        assert gate.call_tool("stock_lookup", ARGS)["ok"]
    finally:
        logging.disable(logging.NOTSET)
    assert len(kept.records) == 1


def test_a_sink_set_after_the_gate_was_made_gets_the_next_call() -> None:
    """``gate.records`` is read by every entry on every call, not fixed when it compiled."""
    gate = Gate(TOOLS)
    gate.call_tool("stock_lookup", ARGS)
    seen: list[object] = []
    gate.records = seen.append
    gate.call_tool("stock_lookup", ARGS)
    assert len(seen) == 1
    gate.records = None
    gate.call_tool("stock_lookup", ARGS)
    assert len(seen) == 1


def test_an_entry_swapped_in_the_table_runs_on_its_next_call() -> None:
    """The compiled entry checks its table entry by identity: a new fn runs at once, and
    what the old one remembered is not answered."""
    table = {"stock_lookup": dict(TOOLS["stock_lookup"])}
    gate = Gate(table)
    first = gate.call_tool("stock_lookup", ARGS)
    table["stock_lookup"]["fn"] = lambda sku, region, limit: {
        "sku": sku, "rows": [{"store": "swapped", "count": 1}]}
    second = gate.call_tool("stock_lookup", ARGS)
    assert first["value"]["rows"][0]["store"] != "swapped"
    assert second["value"]["rows"][0]["store"] == "swapped"



async def _interrupting(sku: str, region: str, limit: int) -> dict[str, object]:
    raise KeyboardInterrupt


def _interrupting_sync(sku: str, region: str, limit: int) -> dict[str, object]:
    raise KeyboardInterrupt


def _called(gate: Gate, point: str) -> None:
    answer = getattr(gate, point)("stock_lookup", ARGS)
    if point.startswith("a"):
        asyncio.run(answer)


@pytest.mark.parametrize("point", ["call_tool", "call_for_model", "acall_tool",
                                   "acall_for_model"])
def test_every_entry_point_takes_the_compiled_read_of_a_plain_call(point: str) -> None:
    """All four entry points, ``acall_for_model`` included, answer a plain read by its
    compiled steps alone: the interrupt out of the body passes through the compiled
    read's frames and through none of the general steps'."""
    body = _interrupting if point.startswith("a") else _interrupting_sync
    gate = Gate({"stock_lookup": {**TOOLS["stock_lookup"], "fn": body}})
    with pytest.raises(KeyboardInterrupt) as caught:
        _called(gate, point)
    frames = [frame.filename for frame in traceback.extract_tb(caught.value.__traceback__)]
    assert any(name.startswith(("<agtool entry", "<agtool fast")) for name in frames), frames
    assert not any(name.endswith("_steps.py") for name in frames), frames
