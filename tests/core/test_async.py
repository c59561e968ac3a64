"""The gate's async twins: ``acall_tool`` and ``acall_for_model``, and async tool bodies.

Each test runs its own event loop with ``asyncio.run`` (no async plugin), counts body
runs inside the bodies, and builds expected values from the stock table itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import os
import threading
import warnings
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

import agtool.tools as tools
from agtool import Gate
from agtool import _hop as hop
from agtool._hop import MAX_WORKERS

VALID: dict[str, Any] = {"sku": "A100", "region": "seoul", "limit": 2}


def rows_of(sku: str, region: str, limit: int | None = None) -> list[dict[str, Any]]:
    return tools.STOCK[sku][region][:limit]


def refused(reason: str) -> dict[str, Any]:
    return {"ok": False, "value": None, "error": reason}


def no_request_id(answer: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in answer.items() if key != "request_id"}


def stock_entry(fn: Callable[..., Any], **extra: Any) -> dict[str, Any]:
    """The stock example's ``stock_lookup`` contract with another body."""
    return {**tools.TOOLS["stock_lookup"], "fn": fn, **extra}


def never_awaited(caught: list[warnings.WarningMessage]) -> list[str]:
    """The 'coroutine ... was never awaited' warnings among ``caught``."""
    return [str(w.message) for w in caught
            if issubclass(w.category, RuntimeWarning) and "never awaited" in str(w.message)]


class AsyncStock:
    """An ``async def`` stock body that counts its runs; ``legacy`` ignores the limit."""

    def __init__(self, legacy: bool = False) -> None:
        self.calls: list[dict[str, Any]] = []
        self.legacy = legacy

    def make(self) -> Callable[..., Coroutine[Any, Any, dict[str, Any]]]:
        async def lookup(sku: str, region: str, limit: int) -> dict[str, Any]:
            self.calls.append({"sku": sku, "region": region, "limit": limit})
            await asyncio.sleep(0)  # a real suspension, so a body that is not awaited shows
            return {"sku": sku, "rows": rows_of(sku, region, None if self.legacy else limit)}

        return lookup


# -- An async body through acall_tool ------------------------------------------------------------

def test_async_body_is_awaited_checked_and_remembered() -> None:
    """acall_tool awaits an async body, answers its value, and the second call is a memo hit."""
    body = AsyncStock()
    gate = Gate({"stock_lookup": stock_entry(body.make())})

    async def main() -> list[Any]:
        return [await gate.acall_tool("stock_lookup", VALID),
                await gate.acall_tool("stock_lookup", dict(VALID))]

    first, second = asyncio.run(main())
    expected = {"ok": True, "value": {"sku": "A100", "rows": rows_of("A100", "seoul", 2)},
                "error": ""}
    assert first == expected
    assert second == expected
    assert len(body.calls) == 1
    stats = gate.stats("stock_lookup")
    assert (stats.runs, stats.hits) == (1, 1)


@pytest.mark.parametrize(("legacy", "args", "reason"), [
    pytest.param(True, VALID, "result:too_big", id="legacy-ignores-limit"),
    pytest.param(False, {"sku": "B200", "region": "busan", "limit": 2}, "result:empty",
                 id="no-rows"),
])
def test_async_body_result_is_checked(legacy: bool, args: dict[str, Any], reason: str) -> None:
    """An async body's value is checked against the return contract, and a refused one not kept."""
    body = AsyncStock(legacy=legacy)
    gate = Gate({"stock_lookup": stock_entry(body.make())})

    async def main() -> list[Any]:
        return [await gate.acall_tool("stock_lookup", args) for _ in range(2)]

    assert asyncio.run(main()) == [refused(reason)] * 2
    assert len(body.calls) == 2
    stats = gate.stats("stock_lookup")
    assert (stats.runs, stats.bad_results) == (2, 2)


# -- Parity with the sync twins ------------------------------------------------------------------

#: A run of calls on the stock table: valid, each single defect, unknown tool, not a dict.
PARITY_CALLS: list[tuple[object, object]] = [
    ("stock_lookup", VALID),
    ("stock_lookup", {"region": "seoul", "limit": 2}),
    ("stock_lookup", {**VALID, "sku_id": "A100"}),
    ("stock_lookup", {**VALID, "limit": "2"}),
    ("stock_lookup", {**VALID, "limit": True}),
    ("stock_lookup", {**VALID, "region": "mars"}),
    ("stock_lookup", {**VALID, "limit": 0}),
    ("stock_lookup", {**VALID, "limit": 3}),
    ("stock_lookup", {"sku": "B200", "region": "busan", "limit": 1}),
    ("legacy_stock", VALID),
    ("legacy_stock", {"sku": "A100", "region": "jeju", "limit": 1}),
    ("stock_lookupp", VALID),
    (42, VALID),
    ("stock_lookup", ["A100", "seoul", 2]),
    ("stock_lookup", None),
    ("stock_lookup", VALID),  # a memo hit on both
]


@pytest.mark.parametrize(("sync", "async_"), [
    pytest.param("call_tool", "acall_tool", id="envelope"),
    pytest.param("call_for_model", "acall_for_model", id="model"),
])
def test_async_twins_answer_as_the_sync_ones(sync: str, async_: str) -> None:
    """On the stock table, each async twin answers every call as its sync twin, with equal stats."""
    sync_gate, async_gate = Gate(tools.TOOLS), Gate(tools.TOOLS)
    expected = [getattr(sync_gate, sync)(name, args) for name, args in PARITY_CALLS]

    async def main() -> list[Any]:
        return [await getattr(async_gate, async_)(name, args) for name, args in PARITY_CALLS]

    answers = asyncio.run(main())
    if sync == "call_for_model":
        expected = [no_request_id(answer) for answer in expected]
        answers = [no_request_id(answer) for answer in answers]
    assert answers == expected
    assert sum(1 for answer in answers if answer["ok"]) == 3  # valid, legacy jeju, the hit
    for name in tools.TOOLS:
        assert async_gate.stats(name) == sync_gate.stats(name)
    assert sync_gate.stats("stock_lookup").hits == 1


# -- Timeouts ------------------------------------------------------------------------------------

def test_async_body_past_its_timeout_is_cancelled() -> None:
    """An async body past its timeout answers timeout and is cancelled, not left running."""
    seen: list[str] = []

    async def slow() -> dict[str, Any]:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        seen.append("finished")
        return {}

    gate = Gate({"slow": {"fn": slow, "args": {}, "returns": {}, "timeout": 0.05}})

    async def main() -> tuple[Any, Any, list[str]]:
        envelope = await gate.acall_tool("slow", {})
        model = await gate.acall_for_model("slow", {})
        for _ in range(10):  # a few turns of the loop for a cancellation to be delivered
            await asyncio.sleep(0)
        return envelope, model, list(seen)

    envelope, model, seen_before_loop_closed = asyncio.run(main())
    assert envelope == refused("timeout")
    assert model["error"]["code"] == "TIMEOUT"
    assert seen_before_loop_closed == ["cancelled", "cancelled"]
    stats = gate.stats("slow")
    assert (stats.runs, stats.timed_out) == (2, 2)


# -- Sync bodies through acall_tool --------------------------------------------------------------

CURRENT_CALL: contextvars.ContextVar[str] = contextvars.ContextVar("current_call",
                                                                   default="unset")


@pytest.mark.parametrize("timeout", [None, 5.0], ids=["untimed", "timed"])
@pytest.mark.parametrize("twin", ["call_tool", "acall_tool"])
def test_a_sync_body_sees_the_callers_context_variables(twin: str, timeout: float | None) -> None:
    """A sync body run in a worker thread (timed, or from acall_tool) still sees the context
    variables its caller set, as it would inline: frameworks find their current call there."""
    seen: list[str] = []

    def body() -> dict[str, Any]:
        seen.append(CURRENT_CALL.get())
        return {}

    entry: dict[str, Any] = {"fn": body, "args": {}, "returns": {}}
    if timeout is not None:
        entry["timeout"] = timeout
    gate = Gate({"probe": entry}, memo_size=0)

    async def acall() -> dict[str, Any]:
        CURRENT_CALL.set("async caller")
        return await gate.acall_tool("probe", {})

    def call() -> dict[str, Any]:
        CURRENT_CALL.set("sync caller")
        return gate.call_tool("probe", {})

    answer = asyncio.run(acall()) if twin == "acall_tool" else contextvars.copy_context().run(call)
    assert answer["ok"], answer
    assert seen == ["async caller" if twin == "acall_tool" else "sync caller"]


def test_sync_body_runs_in_a_worker_thread_and_the_loop_keeps_running() -> None:
    """acall_tool runs a sync body off the loop's thread; a ticker task ticks while it waits."""
    ticks = [0]
    started = threading.Event()
    ticked = threading.Event()
    seen: dict[str, Any] = {}

    def body() -> dict[str, Any]:
        seen["thread"] = threading.get_ident()
        at_start = ticks[0]
        started.set()
        # Only the loop's ticker sets this; a body run on the loop's own thread blocks the
        # ticker and waits out the guard, finding no ticks.
        ticked.wait(5.0)
        seen["ticks"] = ticks[0] - at_start
        return {"n": 1}

    gate = Gate({"t": {"fn": body, "args": {}, "returns": {"n": {"type": "int"}}}})

    async def ticker(stop: asyncio.Event) -> None:
        since_start = 0
        while not stop.is_set():
            ticks[0] += 1
            if started.is_set():
                since_start += 1
                if since_start >= 3:
                    ticked.set()
            await asyncio.sleep(0.001)

    async def main() -> tuple[int, Any]:
        stop = asyncio.Event()
        task = asyncio.create_task(ticker(stop))
        envelope = await gate.acall_tool("t", {})
        stop.set()
        await task
        return threading.get_ident(), envelope

    loop_thread, envelope = asyncio.run(main())
    assert envelope == {"ok": True, "value": {"n": 1}, "error": ""}
    assert seen["thread"] != loop_thread
    assert seen["ticks"] > 0
    assert gate.stats("t").runs == 1


# -- Async bodies through the sync call_tool ------------------------------------------------------

def _async_counting(calls: list[int]) -> Callable[..., Any]:
    async def fn() -> dict[str, Any]:
        calls.append(1)
        await asyncio.sleep(0)
        return {"n": len(calls)}

    return fn


def _coroutine_returning(calls: list[int]) -> Callable[..., Any]:
    inner = _async_counting(calls)
    return lambda **kwargs: inner(**kwargs)


BODY_KINDS = [
    pytest.param(_async_counting, id="async-def"),
    pytest.param(_coroutine_returning, id="sync-fn-returning-a-coroutine"),
]


@pytest.mark.parametrize("kind", BODY_KINDS)
def test_sync_call_runs_an_async_body_when_no_loop_is_running(
        kind: Callable[[list[int]], Callable[..., Any]]) -> None:
    """call_tool with no running loop runs an async body (or a returned coroutine) to its value."""
    calls: list[int] = []
    gate = Gate({"t": {"fn": kind(calls), "args": {}, "returns": {"n": {"type": "int"}}}})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        envelope = gate.call_tool("t", {})
        model = gate.call_for_model("t", {})
        gc.collect()
    assert envelope == {"ok": True, "value": {"n": 1}, "error": ""}
    assert model["ok"] is True
    assert model["data"] == {"n": 1}  # a memo hit
    assert calls == [1]
    assert gate.stats("t").runs == 1
    assert never_awaited(caught) == []


@pytest.mark.parametrize("kind", BODY_KINDS)
def test_async_call_awaits_a_returned_coroutine(
        kind: Callable[[list[int]], Callable[..., Any]]) -> None:
    """acall_tool awaits an async body and a returned coroutine alike, leaving none unawaited."""
    calls: list[int] = []
    gate = Gate({"t": {"fn": kind(calls), "args": {}, "returns": {"n": {"type": "int"}}}})

    async def main() -> tuple[Any, Any]:
        return await gate.acall_tool("t", {}), await gate.acall_for_model("t", {})

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        envelope, model = asyncio.run(main())
        gc.collect()
    assert envelope == {"ok": True, "value": {"n": 1}, "error": ""}
    assert model["data"] == {"n": 1}
    assert calls == [1]
    assert gate.stats("t").runs == 1
    assert never_awaited(caught) == []


@pytest.mark.parametrize("kind", BODY_KINDS)
def test_sync_call_inside_a_running_loop_refuses_an_async_body(
        kind: Callable[[list[int]], Callable[..., Any]]) -> None:
    """call_tool in a running loop answers async:loop_running for an async body; none leaks."""
    calls: list[int] = []
    gate = Gate({"t": {"fn": kind(calls), "args": {}, "returns": {"n": {"type": "int"}}}})

    async def main() -> tuple[Any, Any]:
        return gate.call_tool("t", {}), gate.call_for_model("t", {})

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        envelope, model = asyncio.run(main())
        gc.collect()
    assert envelope == refused("async:loop_running")
    assert model["ok"] is False
    assert model["error"]["code"] == "INTERNAL"
    assert model["error"]["retryable"] is False
    assert model["error"]["details"]["reason"] == "async:loop_running"
    assert calls == []
    assert never_awaited(caught) == []
    if kind is _async_counting:  # known async before it is called: the body never ran
        assert gate.stats("t").runs == 0


# -- What propagates and what is answered --------------------------------------------------------

def test_cancelled_error_inside_an_async_body_propagates() -> None:
    """asyncio.CancelledError raised by an async body comes out of acall_tool, not as a value."""

    async def body() -> dict[str, Any]:
        raise asyncio.CancelledError

    gate = Gate({"t": {"fn": body, "args": {}, "returns": {}}})

    async def main() -> str:
        try:
            await gate.acall_tool("t", {})
        except asyncio.CancelledError:
            return "propagated"
        return "answered"

    assert asyncio.run(main()) == "propagated"


@pytest.mark.parametrize("sync_body", [False, True], ids=["async-body", "sync-body"])
def test_cancelling_the_awaiting_task_propagates(sync_body: bool) -> None:
    """Cancelling the task awaiting acall_tool raises CancelledError in it; no answer is made up."""
    state: dict[str, Any] = {}
    release = threading.Event()

    async def async_body() -> dict[str, Any]:
        state["started"].set()
        await asyncio.sleep(10)
        return {}

    def blocking_body() -> dict[str, Any]:
        state["loop"].call_soon_threadsafe(state["started"].set)
        release.wait(5.0)
        return {}

    gate = Gate({"t": {"fn": blocking_body if sync_body else async_body, "args": {},
                       "returns": {}}})

    async def main() -> tuple[str, bool]:
        state["started"] = asyncio.Event()
        state["loop"] = asyncio.get_running_loop()
        task = asyncio.create_task(gate.acall_tool("t", {}))
        await state["started"].wait()
        task.cancel()
        release.set()  # the sync body may now finish: its value must not answer the task
        try:
            await task
        except asyncio.CancelledError:
            return "propagated", task.cancelled()
        return "answered", task.cancelled()

    assert asyncio.run(main()) == ("propagated", True)


def test_a_cancelled_sync_read_drops_its_late_value_quietly() -> None:
    """A sync read body whose caller was cancelled finishes in its worker; its value answers
    nobody, and the loop is handed no error for it (no answer set on a cancelled future)."""
    release, finished = threading.Event(), threading.Event()
    loop_errors: list[dict[str, Any]] = []

    def body() -> dict[str, Any]:
        state["loop"].call_soon_threadsafe(state["started"].set)
        release.wait(5.0)
        finished.set()
        return {}

    state: dict[str, Any] = {}
    gate = Gate({"t": {"fn": body, "args": {}, "returns": {}}})

    async def main() -> bool:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: loop_errors.append(context))
        state["started"], state["loop"] = asyncio.Event(), loop
        task = asyncio.create_task(gate.acall_tool("t", {}))
        await state["started"].wait()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        release.set()
        while not finished.is_set():
            await asyncio.sleep(0.001)
        for _ in range(20):  # the worker's answer reaches the loop as a callback
            await asyncio.sleep(0.001)
        return task.cancelled()

    assert asyncio.run(main()) is True
    assert loop_errors == []
    assert gate.stats("t").runs == 1


def test_a_sync_read_body_raising_stop_iteration_is_answered_on_the_async_path() -> None:
    """No future can hold a StopIteration (``asyncio.to_thread`` never answers one): the
    async twins answer it as a coroutine's, ``raised:RuntimeError``, and do not hang."""
    runs = [0]

    def body() -> dict[str, Any]:
        runs[0] += 1
        raise StopIteration

    gate = Gate({"t": {"fn": body, "args": {}, "returns": {}}})

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        envelope = await asyncio.wait_for(gate.acall_tool("t", {}), 10)
        answer = await asyncio.wait_for(gate.acall_for_model("t", {}), 10)
        return envelope, answer

    envelope, answer = asyncio.run(main())
    assert envelope == refused("raised:RuntimeError")
    assert answer["error"]["details"]["reason"] == "raised:RuntimeError"
    assert runs[0] == 2


def test_a_sync_write_body_raising_stop_iteration_is_answered_on_the_async_path() -> None:
    """The general steps (a write) hop as the compiled read does: answered, not hung, and
    the write runs once in its key (a retry replays the stored refusal)."""
    runs = [0]

    def body(to: str) -> dict[str, Any]:
        runs[0] += 1
        raise StopIteration

    gate = Gate({"t": {"fn": body, "effect": "write", "risk": "reversible_write",
                       "args": {"to": {"type": "str"}}, "returns": {}}},
                scope={"read_public", "reversible_write"})

    async def main() -> list[dict[str, Any]]:
        return [await asyncio.wait_for(gate.acall_tool("t", {"to": "a"}, run_id="r",
                                                       step_id="s"), 10) for _ in range(2)]

    answers = asyncio.run(main())
    assert [answer["error"] for answer in answers] == ["raised:RuntimeError"] * 2
    assert runs[0] == 1


class _Halt(BaseException):
    """Neither an Exception nor an interrupt Python knows: a foreign BaseException."""


@pytest.mark.parametrize("halt", [KeyboardInterrupt, SystemExit, _Halt])
def test_a_base_exception_in_a_hopped_sync_write_propagates_and_never_writes_twice(
        halt: type[BaseException]) -> None:
    """A sync write body, run on a hop worker by acall_tool, raising a BaseException that is
    not an Exception: it comes out of the caller's await (not swallowed by the worker, not
    stored as the tool's failure), the key is left unknown, and the retry, sync or async,
    is answered ``write:unknown`` with no second run. The worker is free for the next hop."""
    runs: list[str] = []

    def body(to: str) -> dict[str, Any]:
        runs.append(to)
        if to == "a":
            raise halt
        return {}

    gate = Gate({"t": {"fn": body, "effect": "write", "risk": "reversible_write",
                       "args": {"to": {"type": "str"}}, "returns": {}}},
                scope={"read_public", "reversible_write"})

    async def first() -> object:
        return await asyncio.wait_for(gate.acall_tool("t", {"to": "a"}, run_id="r",
                                                      step_id="s"), 10)

    with pytest.raises(halt):
        asyncio.run(first())

    async def after() -> list[dict[str, Any]]:
        return [await asyncio.wait_for(gate.acall_tool("t", {"to": to}, run_id="r",
                                                       step_id=step), 10)
                for to, step in (("a", "s"), ("b", "s2"))]

    again, other = asyncio.run(after())
    assert again["error"] == "write:unknown"
    assert gate.call_tool("t", {"to": "a"}, run_id="r", step_id="s")["error"] == "write:unknown"
    assert other == {"ok": True, "value": {}, "error": ""}
    assert runs == ["a", "b"]
    stats = gate.stats("t")
    assert (stats.runs, stats.unknown) == (2, 1)  # one write interrupted, of two run


def test_more_concurrent_sync_reads_than_workers_all_run_and_at_most_that_many_at_once(
) -> None:
    """Sync read bodies called at once from the async path run off the loop, at most
    ``MAX_WORKERS`` at a time; the rest wait their turn and every one is answered."""
    calls = 3 * MAX_WORKERS
    lock = threading.Lock()
    running, most, threads = [0], [0], set()
    enough = threading.Event()

    def body(n: int) -> dict[str, Any]:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            threads.add(threading.get_ident())
            if running[0] == MAX_WORKERS:
                enough.set()
        enough.wait(5.0)  # the first ones hold their workers until all of them are busy
        with lock:
            running[0] -= 1
        return {"n": n}

    gate = Gate({"t": {"fn": body, "args": {"n": {"type": "int"}},
                       "returns": {"n": {"type": "int"}}}})

    async def main() -> list[dict[str, Any]]:
        return await asyncio.gather(*(gate.acall_tool("t", {"n": n}) for n in range(calls)))

    envelopes = asyncio.run(main())
    assert [envelope["value"] for envelope in envelopes] == [{"n": n} for n in range(calls)]
    assert enough.is_set()
    assert most[0] == MAX_WORKERS
    assert len(threads) <= MAX_WORKERS
    assert gate.stats("t").runs == calls


def test_sync_reads_called_one_after_another_start_no_worker_per_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker is free before its caller is answered, so a caller that calls again at once
    finds it free: calls made one at a time start one worker at most, not one per call."""
    def body(n: int) -> dict[str, Any]:
        return {"n": n}

    gate = Gate({"t": {"fn": body, "args": {"n": {"type": "int"}},
                       "returns": {"n": {"type": "int"}}}})

    async def main() -> None:
        for n in range(300):
            assert (await gate.acall_tool("t", {"n": n}))["value"] == {"n": n}

    workers = hop._Workers()  # none started yet: the shared ones may be, by earlier tests
    monkeypatch.setattr(hop, "_workers", workers)
    asyncio.run(main())
    assert workers.started == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_its_own_workers() -> None:
    """A child forked after the parent's async calls has none of its workers: it starts its
    own, instead of waiting for ever on a worker counted free that is not there."""
    def body(n: int) -> dict[str, Any]:
        return {"n": n}

    gate = Gate({"t": {"fn": body, "args": {"n": {"type": "int"}},
                       "returns": {"n": {"type": "int"}}}})
    assert asyncio.run(gate.acall_tool("t", {"n": 1}))["value"] == {"n": 1}  # a worker, free
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads running
        pid = os.fork()
    if pid == 0:  # the child: exit 0 only if answered
        try:
            answer = asyncio.run(asyncio.wait_for(gate.acall_tool("t", {"n": 2}), 10))
            os._exit(0 if answer["value"] == {"n": 2} else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


class _Interrupt:
    """A sync body that raises KeyboardInterrupt, counting its runs."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self) -> dict[str, Any]:
        self.runs += 1
        raise KeyboardInterrupt


def test_keyboard_interrupt_in_a_sync_body_propagates_from_both_twins() -> None:
    """KeyboardInterrupt raised by a sync body comes out of call_tool and out of acall_tool."""
    body = _Interrupt()
    gate = Gate({"t": {"fn": body, "args": {}, "returns": {}}})
    with pytest.raises(KeyboardInterrupt):
        gate.call_tool("t", {})
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(gate.acall_tool("t", {}))  # type: ignore[arg-type]
    assert body.runs == 2


class QuotaError(Exception):
    """A tool's own exception, unknown to the gate."""


def _raiser(exc: Exception, is_async: bool) -> Callable[..., Any]:
    if is_async:
        async def async_fn() -> dict[str, Any]:
            await asyncio.sleep(0)
            raise exc

        return async_fn

    def fn() -> dict[str, Any]:
        raise exc

    return fn


@pytest.mark.parametrize("exc", [ValueError("v"), QuotaError("q"), RuntimeError("r")],
                         ids=lambda exc: type(exc).__name__)
@pytest.mark.parametrize(("is_async", "twin"), [
    pytest.param(False, "acall_tool", id="sync-body-acall_tool"),
    pytest.param(True, "acall_tool", id="async-body-acall_tool"),
    pytest.param(True, "call_tool", id="async-body-call_tool"),
])
def test_an_exception_in_a_body_is_a_raised_value(exc: Exception, is_async: bool,
                                                  twin: str) -> None:
    """Any Exception from a body, sync or async, through either twin, answers raised:<Name>."""
    gate = Gate({"t": {"fn": _raiser(exc, is_async), "args": {}, "returns": {}}})
    call = getattr(gate, twin)
    envelope = asyncio.run(call("t", {})) if twin.startswith("a") else call("t", {})
    assert envelope == refused(f"raised:{type(exc).__name__}")
    stats = gate.stats("t")
    assert (stats.runs, stats.raised) == (1, 1)


# -- Writes through the async path ---------------------------------------------------------------

WRITE_ARGS: dict[str, Any] = {"order_id": "ORD-1", "cents": 500}
WRITE_ENTRY_ARGS: dict[str, Any] = {"order_id": {"type": "str"},
                                    "cents": {"type": "int", "min": 1}}


def write_gate(fn: Callable[..., Any], **extra: Any) -> Gate:
    """A gate over one reversible write, ``pay``, that the caller may use."""
    entry = {"fn": fn, "effect": "write", "risk": "reversible_write",
             "args": WRITE_ENTRY_ARGS, "returns": {"paid": {"type": "int"}}, **extra}
    return Gate({"pay": entry}, scope={"read_public", "reversible_write"})


def async_payment(paid: list[int], pause: float = 0.0) -> Callable[..., Any]:
    async def pay(order_id: str, cents: int) -> dict[str, Any]:
        await asyncio.sleep(pause)
        paid.append(cents)
        return {"paid": cents}

    return pay


def test_async_write_runs_once_per_key_and_replays() -> None:
    """acall_tool runs an async write once per key; a repeat answers the first outcome."""
    paid: list[int] = []
    gate = write_gate(async_payment(paid))

    async def main() -> list[Any]:
        return [await gate.acall_tool("pay", WRITE_ARGS, run_id="r", step_id="s")
                for _ in range(3)]

    assert asyncio.run(main()) == [{"ok": True, "value": {"paid": 500}, "error": ""}] * 3
    assert paid == [500]
    stats = gate.stats("pay")
    assert (stats.runs, stats.replayed, stats.hits) == (1, 2, 0)


def test_concurrent_async_writes_of_one_key_run_the_body_once() -> None:
    """Two acall_tool of one key at once: one runs, the other waits (not blocking), then replays."""
    paid: list[int] = []
    gate = write_gate(async_payment(paid, pause=0.05))

    async def main() -> list[Any]:
        return list(await asyncio.gather(
            *(gate.acall_tool("pay", WRITE_ARGS, run_id="r", step_id="s") for _ in range(2))))

    answers = asyncio.run(main())
    assert answers == [{"ok": True, "value": {"paid": 500}, "error": ""}] * 2
    assert paid == [500]
    stats = gate.stats("pay")
    assert (stats.runs, stats.replayed) == (1, 1)


def test_async_write_past_its_timeout_runs_on_and_stores_its_outcome() -> None:
    """A timed-out async write is not cancelled: it finishes, and the retry replays its outcome."""
    paid: list[int] = []
    gate = write_gate(async_payment(paid, pause=0.2), timeout=0.02)

    async def main() -> list[Any]:
        first = await gate.acall_tool("pay", WRITE_ARGS, run_id="r", step_id="s")
        for _ in range(500):  # the shielded body goes on in this loop (a cancelled one never pays)
            if paid:  # it settles its key in the same step as it pays: no await between
                break
            await asyncio.sleep(0.01)
        second = await gate.acall_tool("pay", WRITE_ARGS, run_id="r", step_id="s")
        return [first, second]

    first, second = asyncio.run(main())
    assert first == refused("timeout")
    assert second == {"ok": True, "value": {"paid": 500}, "error": ""}
    assert paid == [500]
    stats = gate.stats("pay")
    assert (stats.runs, stats.timed_out, stats.replayed) == (1, 1, 1)


def test_cancelled_error_from_an_async_write_propagates() -> None:
    """An async write body raising CancelledError propagates it out of acall_tool."""
    async def pay(order_id: str, cents: int) -> dict[str, Any]:
        raise asyncio.CancelledError

    gate = write_gate(pay)

    async def main() -> object:
        return await gate.acall_tool("pay", WRITE_ARGS, run_id="r", step_id="s")

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
    assert gate.stats("pay").runs == 1


# -- A sync stand-in that hands back a coroutine (an adapter's body) -----------------------------

class StandIn:
    """What an adapter's table entry calls: a sync callable that hands back the framework's
    coroutine, as LangChain's stand-in does. The coroutine notes the loop it runs on and the
    caller's context variable, waits on an event of the caller's loop (a loop-bound object:
    on another loop it raises), and pays."""

    def __init__(self) -> None:
        self.paid: list[int] = []
        self.loops: list[asyncio.AbstractEventLoop] = []
        self.seen: list[str] = []
        self.cancelled = 0
        self.gate_open: asyncio.Event | None = None

    def __call__(self, order_id: str, cents: int) -> Coroutine[Any, Any, dict[str, Any]]:
        return self.pay(cents)

    async def pay(self, cents: int) -> dict[str, Any]:
        self.loops.append(asyncio.get_running_loop())
        self.seen.append(CURRENT_CALL.get())
        assert self.gate_open is not None
        try:
            await self.gate_open.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        self.paid.append(cents)
        return {"paid": cents}


def test_a_timed_write_whose_sync_body_hands_back_a_coroutine_runs_it_on_the_callers_loop(
        ) -> None:
    """The coroutine runs on the caller's loop, in the caller's context (a worker's own loop
    could not wait on the caller's event), once; the retry replays it."""
    body = StandIn()
    gate = write_gate(body, timeout=30)

    async def main() -> tuple[list[Any], asyncio.AbstractEventLoop]:
        CURRENT_CALL.set("the agent's call")
        body.gate_open = asyncio.Event()
        body.gate_open.set()
        answers = [await gate.acall_tool("pay", WRITE_ARGS, run_id="r", step_id="s")
                   for _ in range(2)]
        return answers, asyncio.get_running_loop()

    answers, loop = asyncio.run(main())
    assert answers == [{"ok": True, "value": {"paid": 500}, "error": ""}] * 2
    assert body.loops == [loop]
    assert body.seen == ["the agent's call"]
    assert body.paid == [500]
    stats = gate.stats("pay")
    assert (stats.runs, stats.replayed) == (1, 1)


def test_a_stand_in_write_past_its_timeout_is_refused_runs_on_and_stores_its_outcome() -> None:
    """Past its timeout the call is the ``timeout`` refusal; the write is not cut half-way
    (it may have taken effect): it goes on on the caller's loop, and the retry replays it."""
    body = StandIn()
    gate = write_gate(body, timeout=0.05)

    async def main() -> list[Any]:
        body.gate_open = asyncio.Event()
        first = await gate.acall_tool("pay", WRITE_ARGS, run_id="r", step_id="s")
        body.gate_open.set()
        for _ in range(500):  # the kept task finishes on this loop
            if body.paid:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0)  # it settles its key in the step it pays
        return [first, await gate.acall_tool("pay", WRITE_ARGS, run_id="r", step_id="s")]

    first, second = asyncio.run(main())
    assert first == refused("timeout")
    assert second == {"ok": True, "value": {"paid": 500}, "error": ""}
    assert (body.paid, body.cancelled) == ([500], 0)


def test_a_stand_in_read_past_its_timeout_is_refused_and_cancelled() -> None:
    """A read's coroutine past its timeout is cancelled on the caller's loop: a late value
    is never remembered, and the body sees its cancellation."""
    body = StandIn()
    gate = Gate({"quote": {"fn": body, "args": WRITE_ENTRY_ARGS, "returns": {"paid": {
        "type": "int"}}, "timeout": 0.05}})

    async def main() -> tuple[Any, asyncio.AbstractEventLoop]:
        body.gate_open = asyncio.Event()
        answer = await gate.acall_tool("quote", WRITE_ARGS)
        for _ in range(10):  # a few turns for the cancellation to be delivered
            await asyncio.sleep(0)
        return answer, asyncio.get_running_loop()

    answer, loop = asyncio.run(main())
    assert answer == refused("timeout")
    assert body.loops == [loop]
    assert (body.cancelled, body.paid) == (1, [])


def test_cancelling_the_caller_of_a_stand_in_write_propagates_and_writes_once() -> None:
    """A CancelledError from outside reaches the caller; the write it started goes on (it may
    have taken effect) and settles once: the retry replays it, nothing is paid twice."""
    body = StandIn()
    gate = write_gate(body, timeout=30)

    async def main() -> tuple[str, Any]:
        body.gate_open = asyncio.Event()
        task = asyncio.create_task(gate.acall_tool("pay", WRITE_ARGS, run_id="r", step_id="s"))
        while not body.loops:  # the coroutine has started on this loop
            await asyncio.sleep(0.001)
        task.cancel()
        try:
            await task
            outcome = "answered"
        except asyncio.CancelledError:
            outcome = "propagated"
        body.gate_open.set()
        for _ in range(500):
            if body.paid:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0)
        return outcome, await gate.acall_tool("pay", WRITE_ARGS, run_id="r", step_id="s")

    outcome, retry = asyncio.run(main())
    assert outcome == "propagated"
    assert retry == {"ok": True, "value": {"paid": 500}, "error": ""}
    assert (body.paid, body.cancelled) == ([500], 0)
    assert gate.stats("pay").runs == 1


@pytest.mark.parametrize("write", [False, True], ids=["read", "write"])
def test_a_timed_async_body_runs_on_the_callers_loop_in_its_context(write: bool) -> None:
    """An ``async def`` body with a timeout is awaited on the caller's own loop (a read
    under an asyncio timeout, a write in a task of that loop), seeing the caller's context."""
    loops: list[asyncio.AbstractEventLoop] = []
    seen: list[str] = []

    async def pay(order_id: str, cents: int) -> dict[str, Any]:
        loops.append(asyncio.get_running_loop())
        seen.append(CURRENT_CALL.get())
        return {"paid": cents}

    gate = (write_gate(pay, timeout=30) if write else
            Gate({"pay": {"fn": pay, "args": WRITE_ENTRY_ARGS,
                          "returns": {"paid": {"type": "int"}}, "timeout": 30}}))

    async def main() -> tuple[Any, asyncio.AbstractEventLoop]:
        CURRENT_CALL.set("the caller's")
        answer = await gate.acall_tool("pay", WRITE_ARGS, run_id="r", step_id="s")
        return answer, asyncio.get_running_loop()

    answer, loop = asyncio.run(main())
    assert answer == {"ok": True, "value": {"paid": 500}, "error": ""}
    assert (loops, seen) == ([loop], ["the caller's"])
