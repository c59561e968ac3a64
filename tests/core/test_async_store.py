"""On the async path a write's store calls run on a worker thread, never on the event loop.

A store whose ``claim`` (or ``finish``) blocks until the test lets it go: while it
blocks, another call on the same event loop is answered; a caller cancelled while
its claim runs leaves no key held, so its retry runs the write.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from agtool import Gate, SqliteStore

#: Seconds a blocked store call may wait before the test gives up on it (a safety valve
#: for the failing case, in which the loop itself is blocked; never what is asserted).
VALVE = 30


class BlockingStore(SqliteStore):
    """A SQLite store whose ``claim`` and ``finish`` wait, while ``blocking`` is set, for
    ``go``; ``entered`` is set when one has started waiting, ``left`` when it stopped."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.blocking = {"claim"}
        self.entered = threading.Event()
        self.go = threading.Event()
        self.left = threading.Event()

    def _wait(self, step: str) -> None:
        if step in self.blocking:
            self.entered.set()
            self.go.wait(VALVE)
            self.left.set()

    def claim(self, *args: Any, **kwargs: Any) -> Any:
        self._wait("claim")
        return super().claim(*args, **kwargs)

    def finish(self, *args: Any, **kwargs: Any) -> Any:
        self._wait("finish")
        return super().finish(*args, **kwargs)


def _gate(store: BlockingStore, ran: list[str]) -> Gate:
    async def save(text: str) -> dict[str, Any]:
        ran.append(text)
        return {"saved": text}

    async def look(q: str) -> dict[str, Any]:
        return {"seen": q}

    table = {
        "save": {"fn": save, "args": {"text": {"type": "str"}},
                 "returns": {"saved": {"type": "str"}}, "effect": "write",
                 "risk": "reversible_write"},
        "look": {"fn": look, "args": {"q": {"type": "str"}}, "returns": {"seen": {"type": "str"}}},
    }
    return Gate(table, store=store, scope={"read_public", "reversible_write"})


async def _read_while_blocked(gate: Gate, store: BlockingStore) -> tuple[bool, dict[str, Any]]:
    """Start the write, wait until its store call blocks, read; whether the store was still
    blocked when the read came back, and the read's answer."""
    write = asyncio.ensure_future(gate.acall_tool("save", {"text": "x"}, run_id="r",
                                                  step_id="1"))
    await asyncio.to_thread(store.entered.wait, VALVE)
    valve = threading.Timer(VALVE, store.go.set)  # the failing case: the loop is stuck
    valve.start()
    read = await gate.acall_tool("look", {"q": "a"})
    still_blocked = not store.left.is_set()
    store.go.set()
    valve.cancel()
    assert (await write)["ok"]
    return still_blocked, read


def test_a_read_is_answered_while_a_writes_claim_blocks() -> None:
    """The claim waits on a worker thread: the read on the same loop is answered meanwhile."""
    store, ran = BlockingStore(), []
    still_blocked, read = asyncio.run(_read_while_blocked(_gate(store, ran), store))
    assert still_blocked
    assert read == {"ok": True, "value": {"seen": "a"}, "error": ""}
    assert ran == ["x"]


def test_a_read_is_answered_while_a_writes_outcome_is_being_stored() -> None:
    """Storing the outcome (finish) waits on a worker thread too."""
    store, ran = BlockingStore(), []
    store.blocking = {"finish"}
    still_blocked, read = asyncio.run(_read_while_blocked(_gate(store, ran), store))
    assert still_blocked
    assert read["ok"]
    assert ran == ["x"]


async def _retried_after_cancel(gate: Gate, store: BlockingStore) -> dict[str, Any]:
    """A write cancelled while its store call blocks, that call let go, the same step again."""
    first = asyncio.ensure_future(gate.acall_tool("save", {"text": "x"}, run_id="r",
                                                  step_id="1"))
    await asyncio.to_thread(store.entered.wait, VALVE)
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    assert first.cancelled()
    store.blocking = set()
    store.go.set()  # the blocked call lands now, for a caller that is gone
    return await gate.acall_tool("save", {"text": "x"}, run_id="r", step_id="1")


def test_a_caller_cancelled_during_its_claim_leaves_no_key_held() -> None:
    """Cancelled while the claim runs: the key it claimed is freed, and a retry of the same
    step runs the write (once), rather than wait on a claim nobody will finish."""
    store, ran = BlockingStore(), []
    retry = asyncio.run(_retried_after_cancel(_gate(store, ran), store))
    assert retry == {"ok": True, "value": {"saved": "x"}, "error": ""}
    assert ran == ["x"]


def test_a_caller_cancelled_while_its_outcome_is_stored_still_has_it_stored() -> None:
    """Cancelled while finish runs: the outcome is stored all the same, so a retry of the
    same step is answered it (replayed), and the write is never run a second time."""
    store, ran = BlockingStore(), []
    store.blocking = {"finish"}
    retry = asyncio.run(_retried_after_cancel(_gate(store, ran), store))
    assert retry["ok"]
    assert retry["value"] == {"saved": "x"}
    assert ran == ["x"]
