"""What a gate holds, bounded: its memo by bytes as well as by count, its workers by its life.

The oracles are the interpreter's own: ``tracemalloc`` for the bytes a flood leaves
pinned, ``threading.enumerate()`` for the worker threads still alive. Waiting for a
thread to exit is bounded by a guard, never asserted on as a time.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agtool import DEFAULT_MEMO_BYTES, DEFAULT_SCOPE, CallRecord, Gate, Memo
from agtool._stats import Counts

MB = 1024 * 1024
#: The budget the floods are held to, and the memory they may leave beside it (the
#: entries' own tuples and nodes, the gate's counters): far below one more argument.
BUDGET = 8 * MB
SLACK = MB // 2
#: Calls in a flood: each argument distinct, 32 times what the budget can hold.
FLOOD = 256
#: Seconds a worker thread is waited for before the test gives up on it (a guard).
EXIT_GUARD = 20.0
WRITER = ["read_public", "reversible_write"]


#: An int of 1 MB (orjson cannot write it; Python will not print it).
HUGE = 1 << (8 * MB)


def text_of(number: int) -> str:
    """A 1 MB argument of its own: no two calls share a key."""
    return f"{number:08d}" + "x" * MB


FLOODS: dict[str, tuple[dict[str, Any], Callable[..., Any], Callable[[int], dict[str, Any]]]] = {
    # The key holds the argument itself: what a count-only memo pinned.
    "1MB-str-argument": ({"text": {"type": "str"}},
                         lambda text: {"n": len(text)},
                         lambda number: {"text": text_of(number)}),
    # A list argument is keyed by its JSON; the kept value is small.
    "1MB-list-argument": ({"lines": {"type": "list", "item": {"type": "str"}}},
                          lambda lines: {"n": len(lines)},
                          lambda number: {"lines": [text_of(number)]}),
    # A small argument and a 1 MB value, kept as its JSON bytes.
    "1MB-value": ({"n": {"type": "int"}},
                  lambda n: {"n": n, "echo": text_of(n)},
                  lambda number: {"n": number}),
    # An int of 1 MB, which the key holds as it is: no 8-byte scalar.
    "1MB-int-argument": ({"n": {"type": "int"}},
                         lambda n: {"n": 1},
                         lambda number: {"n": HUGE + number}),
    # An int of 1 MB in a value the contract's copier keeps (and shares): weighed by its size.
    "1MB-int-value": ({"n": {"type": "int"}},
                      lambda n: {"n": HUGE + n},
                      lambda number: {"n": number}),
}


def flood_table(case: str) -> tuple[dict[str, Any], list[int]]:
    args, answer, _ = FLOODS[case]
    runs: list[int] = []

    def body(**kwargs: Any) -> Any:
        runs.append(1)
        return answer(**kwargs)

    returns = {"n": {"type": "int"}}
    if case == "1MB-value":
        returns["echo"] = {"type": "str"}
    return {"echo": {"fn": body, "args": args, "returns": returns}}, runs


@pytest.mark.parametrize("case", list(FLOODS))
def test_a_flood_of_1mb_calls_never_pins_more_than_the_byte_budget(case: str) -> None:
    """Hundreds of distinct 1 MB calls leave no more than ``memo_bytes`` pinned (measured by
    tracemalloc, with the caller's own references dropped), and the newest is still a hit."""
    table, runs = flood_table(case)
    make_args = FLOODS[case][2]
    gate = Gate(table, memo_bytes=BUDGET)
    assert gate.call_tool("echo", make_args(-1))["ok"]  # compiled and warmed outside the count
    gate.clear()
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        for number in range(FLOOD):
            assert gate.call_tool("echo", make_args(number))["ok"]
        gc.collect()
        pinned = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    assert pinned <= BUDGET + SLACK, f"{pinned / MB:.1f} MB pinned for a {BUDGET / MB} MB budget"
    # What the memo keeps, summed from its entries by hand: the text its keys and values hold.
    held = sum(len(part) for key, entry in gate.cache.entries.items()
               for part in (*key, entry[0][0]) if isinstance(part, (str, bytes)))
    assert held <= BUDGET
    assert 0 < gate.cache.bytes <= BUDGET
    remembered = len(gate.cache)
    assert 1 <= remembered < BUDGET // MB
    assert len(runs) == FLOOD + 1
    assert gate.call_tool("echo", make_args(FLOOD - 1))["ok"]  # the newest: remembered
    assert len(runs) == FLOOD + 1
    assert gate.stats("echo").evicted == FLOOD - remembered


def test_a_value_heavier_than_the_whole_budget_is_not_remembered() -> None:
    """One entry over the budget is simply not kept: it runs again, and evicts nothing."""
    table, runs = flood_table("1MB-str-argument")
    gate = Gate(table, memo_bytes=MB // 2)
    small = {"text": "small"}
    gate.call_tool("echo", small)
    for _ in range(2):
        assert gate.call_tool("echo", {"text": text_of(1)}) == {
            "ok": True, "value": {"n": MB + 8}, "error": ""}
    assert len(runs) == 3  # the small call once, the heavy one each time
    assert list(gate.cache) != []
    assert gate.stats("echo").evicted == 0
    gate.call_tool("echo", small)
    assert len(runs) == 3  # still remembered


def test_the_byte_budget_has_a_documented_default_and_refuses_nonsense() -> None:
    gate = Gate(flood_table("1MB-value")[0])
    assert gate.cache.max_bytes == DEFAULT_MEMO_BYTES == 64 * MB
    for bad in (-1, 1.5, "8MB", True, None):
        with pytest.raises(ValueError, match="memo bytes"):
            Gate(flood_table("1MB-value")[0], memo_bytes=bad)  # type: ignore[arg-type]


def test_a_value_that_cannot_be_weighed_is_not_remembered() -> None:
    """A kept copy whose ``__sizeof__`` raises is not remembered, and the call still answers."""
    class Unweighable:
        def __sizeof__(self) -> int:
            raise RuntimeError("no size")

        def __deepcopy__(self, memo: object) -> Unweighable:
            return Unweighable()

    runs: list[int] = []

    def body() -> dict[str, Any]:
        runs.append(1)
        return {"thing": Unweighable()}

    gate = Gate({"odd": {"fn": body, "args": {}, "returns": {}}})  # extra keys: undeclared
    for _ in range(2):
        assert gate.call_tool("odd", {})["ok"]
    assert len(runs) == 2
    assert gate.cache.bytes == 0


# -- Workers: stopped by close(), and by the gate's collection ---------------------------------

def timed_table(body: Callable[..., Any], **extra: Any) -> dict[str, Any]:
    return {"timed": {"fn": body, "args": {}, "returns": {}, "timeout": 30, **extra}}


def workers_alive() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "agtool-body"]


def wait_for_exit(threads: list[threading.Thread]) -> list[threading.Thread]:
    """The threads still alive once each was given until one shared guard's end."""
    deadline = time.monotonic() + EXIT_GUARD
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [thread for thread in threads if thread.is_alive()]


@pytest.fixture
def others() -> set[threading.Thread]:
    """The workers alive before the test (another test's gate may still be held): each test
    counts only the workers its own gates started."""
    gc.collect()
    return set(workers_alive())


def new_workers(others: set[threading.Thread]) -> list[threading.Thread]:
    return [thread for thread in workers_alive() if thread not in others]


@pytest.mark.parametrize("twin", ["call_tool", "acall_tool"])
def test_200_dropped_gates_let_their_workers_exit(twin: str,
                                                 others: set[threading.Thread]) -> None:
    """200 gates that each ran a timed sync body, dropped and collected: no worker is left."""
    def make_and_drop() -> None:
        gate = Gate(timed_table(dict))
        if twin == "call_tool":
            assert gate.call_tool("timed", {})["ok"]
        else:
            assert asyncio.run(gate.acall_tool("timed", {}))["ok"]

    for _ in range(200):
        make_and_drop()
    started = new_workers(others)
    gc.collect()
    assert wait_for_exit(started) == []
    assert new_workers(others) == []


def test_a_dropped_gates_busy_worker_exits_when_its_body_returns(
        others: set[threading.Thread]) -> None:
    """A worker still running an overrun body when its gate is dropped finishes it first."""
    release, finished = threading.Event(), threading.Event()

    def stuck() -> dict[str, Any]:
        release.wait(EXIT_GUARD)
        finished.set()
        return {}

    gate = Gate(timed_table(stuck, timeout=0.01))
    assert gate.call_tool("timed", {})["error"] == "timeout"
    worker = new_workers(others)
    del gate
    gc.collect()
    assert [thread.is_alive() for thread in worker] == [True]  # its body is still running
    release.set()
    assert wait_for_exit(worker) == []
    assert finished.is_set()


def test_close_stops_the_workers_and_refuses_every_later_call(
        others: set[threading.Thread]) -> None:
    """close() lets every worker exit; it is idempotent; a later call on any entry point, of
    any tool, is the ``gate:closed`` refusal, recorded once, and runs nothing."""
    runs: list[str] = []
    records: list[CallRecord] = []
    table = {**timed_table(lambda: runs.append("timed") or {}),
             "plain": {"fn": lambda: runs.append("plain") or {}, "args": {}, "returns": {}},
             "pay": {"fn": lambda: runs.append("pay") or {}, "args": {}, "returns": {},
                     "effect": "write", "risk": "reversible_write"}}
    gate = Gate(table, scope=WRITER, records=records.append)
    assert gate.call_tool("timed", {})["ok"]
    assert gate.call_tool("plain", {})["ok"]
    started = new_workers(others)
    assert len(started) == 1
    gate.close()
    gate.close()
    assert wait_for_exit(started) == []
    runs.clear()
    records.clear()

    async def async_twins() -> list[Any]:
        return [await gate.acall_tool(name, {}, run_id="r", step_id="s")
                for name in table] + [await gate.acall_for_model("plain", {})]

    answers = [gate.call_tool(name, {}, run_id="r", step_id="s") for name in (*table, "nope")]
    assert answers == [{"ok": False, "value": None, "error": "gate:closed"}] * 4
    assert asyncio.run(async_twins())[:3] == answers[:3]
    model = gate.call_for_model("plain", {})
    assert model["ok"] is False
    assert model["error"]["details"] == {"reason": "gate:closed"}
    assert model["error"]["retryable"] is False
    assert runs == []
    assert new_workers(others) == []
    assert [record.reason for record in records] == ["gate:closed"] * 9
    gate.close()


def test_leaving_a_with_block_closes_the_gate(others: set[threading.Thread]) -> None:
    with Gate(timed_table(dict)) as gate:
        assert gate.call_tool("timed", {})["ok"]
        started = new_workers(others)
    assert wait_for_exit(started) == []
    assert gate.call_tool("timed", {})["error"] == "gate:closed"


def test_a_write_running_on_a_worker_at_close_still_stores_its_outcome(
        tmp_path: Path, others: set[threading.Thread]) -> None:
    """close() does not close the store under a write still running past its timeout: the
    write settles, and a gate opened on that store replays it instead of running it again."""
    release = threading.Event()
    paid: list[int] = []

    def pay() -> dict[str, Any]:
        release.wait(EXIT_GUARD)
        paid.append(1)
        return {"paid": len(paid)}

    store = tmp_path / "writes.db"
    table = timed_table(pay, timeout=0.01, effect="write", risk="reversible_write")
    gate = Gate(table, scope=WRITER, store=store)
    assert gate.call_tool("timed", {}, run_id="r", step_id="s")["error"] == "timeout"
    worker = new_workers(others)
    gate.close()
    release.set()
    assert wait_for_exit(worker) == []
    again = Gate(table, scope=WRITER, store=store)
    assert again.call_tool("timed", {}, run_id="r", step_id="s") == {
        "ok": True, "value": {"paid": 1}, "error": ""}
    assert paid == [1]
    again.close()


# -- The byte total under threads ---------------------------------------------------------------

def books_balance(memo: Memo) -> tuple[int, int]:
    """``(total, sum of the weights held)``, read together under the memo's lock."""
    with memo.books:
        return memo.bytes, sum(entry[3] for entry in memo.entries.values())


def test_threads_hammering_one_memo_keep_its_total_the_sum_of_what_it_holds() -> None:
    """Threads putting the same few keys at once (through the compiled read and through
    ``Memo.put``), clearing, forgetting, expiring and hitting, the interpreter switching
    threads as often as it can: the total always equals the weights of what is held, and
    stays within the budget."""
    now = [0.0]
    table = {"echo": {"fn": lambda text: {"n": len(text)}, "args": {"text": {"type": "str"}},
                      "returns": {"n": {"type": "int"}}}}
    gate = Gate(table, memo_bytes=2_000, clock=lambda: now[0], memo_ttl=5.0)
    memo = gate.cache
    counts = Counts()
    seen: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def hammer(worker: int) -> None:
        try:
            start.wait()
            for step in range(4_000):
                text = "x" * (step % 7 * 40)  # few keys, each put by every thread
                gate.call_tool("echo", {"text": text}, run_id=f"run-{step % 3}")
                memo.put(("put", step % 5), (b"v" * (step % 11 * 30), bytes), 5.0, counts)
                if worker == 0 and step % 97 == 0:
                    gate.clear()
                if worker == 1 and step % 89 == 0:
                    memo.forget(lambda key: key[0] == "put")
                if worker == 2 and step % 53 == 0:
                    now[0] += 6.0  # everything held expires: dropped when next looked at
                    len(memo)
                if step % 31 == 0:
                    seen.append(books_balance(memo))
        except BaseException as exc:  # reported below: a thread cannot fail the test itself
            errors.append(exc)

    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=hammer, args=(worker,)) for worker in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switching)
    assert errors == []
    seen.append(books_balance(memo))
    assert len(seen) > 100
    assert [pair for pair in seen if pair[0] != pair[1] or pair[0] > 2_000] == []
    assert gate.stats("echo").evicted + counts.evicted > 0  # the budget was pressed on


def oracle_weight(value: object) -> int:
    """The measure written out plainly: 8 bytes for a value, plus a string's length, a huge
    int's size, and the weight of each value a list or dict holds (its keys are the
    contract's names)."""
    if type(value) is str:
        return 8 + len(value)
    if type(value) is int and not -(1 << 63) <= value < 1 << 63:
        return 8 + sys.getsizeof(value)
    if type(value) is list:
        return 8 + sum(map(oracle_weight, value))
    if type(value) is dict:
        return 8 + sum(map(oracle_weight, value.values()))
    return 8


def oracle_key_weight(key: tuple[Any, ...]) -> int:
    return sum(len(part) if type(part) in (str, bytes) else
               sys.getsizeof(part) if type(part) is int and abs(part) >= 1 << 63 else 8
               for part in key)


WEIGHED: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    # name: (returns, the value the body answers, args)
    "optional-absent": ({"a": {"type": "str", "required": False}, "b": {"type": "int"}},
                        {"b": 3}, {"q": "x"}),
    "optional-null": ({"a": {"type": "str", "required": False}, "b": {"type": "int"}},
                      {"a": None, "b": 3}, {"q": "xy"}),
    "optional-present": ({"a": {"type": "str", "required": False}, "b": {"type": "int"}},
                         {"a": "hello", "b": HUGE}, {"q": ""}),
    "list-of-str": ({"tags": {"type": "list", "item": {"type": "str"}}},
                    {"tags": ["", "ab", "c" * 300]}, {"q": "é" * 5}),
    "list-of-int": ({"ids": {"type": "list", "item": {"type": "int"}}},
                    {"ids": [1, -HUGE, 3]}, {"q": "x"}),
    "bounded-ints": ({"ids": {"type": "list", "item": {"type": "int", "min": 0, "max": 9}},
                      "ok": {"type": "bool"}, "f": {"type": "float"}},
                     {"ids": [1, 2, 3], "ok": True, "f": 1.5}, {"q": "x"}),
    "nested": ({"rows": {"type": "list", "item": {
                    "name": {"type": "str"}, "note": {"type": "str", "required": False},
                    "tags": {"type": "list", "item": {"type": "str"}}}},
                "meta": {"type": "dict", "item": {"by": {"type": "str"}}}},
               {"rows": [{"name": "a", "tags": ["x", "yz"]},
                         {"name": "bcd", "note": "n" * 40, "tags": []}],
                "meta": {"by": "me"}}, {"q": "x"}),
}


@pytest.mark.parametrize("case", list(WEIGHED))
def test_a_compiled_read_weighs_what_it_keeps_as_the_plain_measure_does(case: str) -> None:
    """The weight the compiled read sums from the contract (the key's parts, the copy made
    by the contract's copier) is the measure written out plainly, over the kept copy: an
    optional key absent or null, lists of strs and of huge ints, nested rows and dicts."""
    returns, value, args = WEIGHED[case]
    table = {"t": {"fn": lambda q: value, "args": {"q": {"type": "str"}}, "returns": returns}}
    gate, general = Gate(table), Gate(table)
    assert gate.call_tool("t", args, run_id="run-7")["ok"]
    [(key, entry)] = gate.cache.entries.items()
    assert entry[0][1].__name__ == "copy_result"  # kept by the contract's copier
    assert entry[3] == gate.cache.bytes == oracle_key_weight(key) + oracle_weight(entry[0][0])
    # The general steps (a call with a scope takes them) weigh it alike.
    assert general.call_tool("t", args, run_id="run-7", scope=DEFAULT_SCOPE)["ok"]
    assert general.cache.bytes == gate.cache.bytes


def test_small_container_arguments_pin_no_orjson_buffer() -> None:
    """A key's orjson part is kept in a buffer of its own size: orjson's own holds 4 KB even
    for five bytes, so a thousand small list arguments would pin 4 MB their weight (a few
    bytes each) does not count. Measured with tracemalloc, as the floods are."""
    table, _ = flood_table("1MB-list-argument")
    gate = Gate(table)
    assert gate.call_tool("echo", {"lines": ["warm"]})["ok"]
    gate.clear()
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        for number in range(1_000):
            assert gate.call_tool("echo", {"lines": [str(number)]})["ok"]
        gc.collect()
        pinned = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    assert len(gate.cache) == 1_000
    assert pinned < 1_000 * 1_024, f"{pinned / 1_000:.0f} bytes pinned per small call"
