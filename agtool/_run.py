"""Running a tool body: inline, in a worker thread, awaited, or within a timeout.

The gate's other steps never call a body; these functions do, and only
these. A body's ``Exception`` is handed back to the caller to be turned into
a reason; a ``BaseException`` (``KeyboardInterrupt``, ``SystemExit``,
``asyncio.CancelledError``) propagates, as Python code expects.

An ``async def`` body, or a sync callable that hands back a coroutine, is
awaited by the async path. The sync path runs it to completion with
``asyncio.run`` when no event loop is running in this thread; inside a
running loop it cannot wait for it without blocking that loop, so it closes
the coroutine unstarted and the call is refused (``async:loop_running``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ._hop import in_thread
from ._pool import BodyPool

__all__ = ["BUSY", "LOOP_RUNNING", "TIMED_OUT", "Busy", "LoopRunning", "TimedOut", "await_body",
           "finish_here", "is_async_body", "loop_running", "run_body", "within"]

_T = TypeVar("_T")


class TimedOut:
    """What a timed run answers when the body overran: the call is answered ``timeout``."""

    __slots__ = ()


class LoopRunning:
    """What the sync path answers for an async body it must not wait for in this thread."""

    __slots__ = ()


class Busy:
    """What a timed run answers when every worker is busy: the body was not started."""

    __slots__ = ()


TIMED_OUT = TimedOut()
LOOP_RUNNING = LoopRunning()
BUSY = Busy()


def is_async_body(fn: Callable[..., Any]) -> bool:
    """Whether calling ``fn`` gives a coroutine (``async def``, or a callable object's)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))  # noqa: B004 - a callable object's own __call__


def run_body(fn: Callable[..., Any], args: dict[str, Any]) -> Any:
    """``fn(**args)`` on the sync path; an awaitable it hands back is run to its end here.

    Answers ``LOOP_RUNNING`` (the body did not run) when that needs a loop this
    thread is already running.
    """
    if inspect.iscoroutinefunction(fn) and loop_running():
        return LOOP_RUNNING  # refused before the coroutine is even made
    return finish_here(fn(**args))


def finish_here(value: Any) -> Any:
    """``value``, or what it comes to if it is awaitable: run to its end with no loop
    running in this thread, else closed unstarted and answered ``LOOP_RUNNING``."""
    if not inspect.isawaitable(value):
        return value
    if loop_running():
        _close(value)
        return LOOP_RUNNING
    return asyncio.run(_awaited(value))


async def await_body(fn: Callable[..., Any], args: dict[str, Any], is_async: bool,
                     timeout: float | None, pool: BodyPool | None) -> Any:
    """``fn(**args)`` on the async path; ``TIMED_OUT`` if it overran ``timeout``.

    A coroutine body is awaited under an asyncio timeout, which cancels it. A
    sync body runs in a worker thread so that the event loop goes on meanwhile:
    on ``pool``'s when one is given (``BUSY`` when none is free), where on a
    timeout it runs on (Python cannot stop it) and its value is dropped. The
    body's own exceptions are raised here, after the timeout is out of the
    way, so that a body raising ``TimeoutError`` is not an overrun.
    """
    work = (_on_pool(pool, fn, args) if pool is not None and not is_async
            else _call_async(fn, args, is_async))
    if timeout is None:
        answer = await work
    else:
        try:
            answer = await asyncio.wait_for(work, timeout)
        except asyncio.TimeoutError:
            return TIMED_OUT
    if type(answer) is _Raised:
        raise answer.exc
    return answer


class _Raised:
    """A body's exception, carried past ``wait_for`` so that it is not read as an overrun."""

    __slots__ = ("exc",)

    def __init__(self, exc: Exception) -> None:
        self.exc = exc


async def _call_async(fn: Callable[..., Any], args: dict[str, Any], is_async: bool) -> Any:
    try:
        value = fn(**args) if is_async else await in_thread(fn, args)
        if inspect.isawaitable(value):  # a coroutine, or a sync callable that hands one back
            value = await value
    except Exception as exc:
        return _Raised(exc)
    return value


async def _on_pool(pool: BodyPool, fn: Callable[..., Any], args: dict[str, Any]) -> Any:
    future = pool.submit(lambda: fn(**args))
    if future is None:
        return BUSY
    try:
        value = await asyncio.wrap_future(future)
        if inspect.isawaitable(value):  # a sync callable that hands back a coroutine
            value = await value
    except Exception as exc:
        return _Raised(exc)
    return value


async def _awaited(value: Awaitable[_T]) -> _T:
    return await value


def loop_running() -> bool:
    """Whether this thread runs an asyncio event loop now (under trio, it does not)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _close(awaitable: object) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()  # a coroutine closed unstarted raises no "never awaited" warning


def within(pool: BodyPool, seconds: float, work: Callable[[], _T]) -> _T | TimedOut | Busy:
    """``work()`` if it answers within ``seconds``, else ``TIMED_OUT`` while it runs on.

    Python cannot stop a thread, so an overrunning body finishes on its worker
    in the background: a read's late value is dropped, a write's is stored by
    its key. ``BUSY`` (nothing started) when every worker of ``pool`` still
    runs a body. The body runs in a copy of the caller's context, as
    ``asyncio.to_thread`` runs it, so a context variable the caller set (a
    framework's current call, a tracing span) is still set inside a timed body.
    """
    future = pool.submit(work)
    if future is None:
        return BUSY
    # wait(), not result(timeout): a body's own TimeoutError is not an overrun.
    concurrent.futures.wait([future], seconds)
    if not future.done():
        return TIMED_OUT
    return future.result()
