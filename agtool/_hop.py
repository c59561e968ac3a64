"""A compiled read's one hop off the event loop: ``in_thread(fn, args)`` for a sync body.

``asyncio.to_thread`` makes, for every call, a context copy, a partial, the
default executor's work item and future and a loop future chained to that
one, and answers through both futures. ``in_thread`` makes one loop future
and one queue entry, and its worker answers it with ``call_soon_threadsafe``
(about two thirds of ``to_thread``'s time per hop: README, "In an agent").
Otherwise it does what ``to_thread`` does: the body runs in a copy of the
caller's context, in a worker thread reused from call to call; at most
``MAX_WORKERS`` run at once (the default executor's bound) and further calls
wait their turn; a caller that stops waiting (cancelled) leaves the body to
finish there, its value dropped. A body's ``StopIteration``, which no future can hold (``to_thread``
never answers it), is raised as a ``RuntimeError``, as a coroutine's is.

The workers are daemon threads shared by every gate, started as first needed:
an exiting interpreter does not wait for a read whose caller stopped waiting.
A forked child starts its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_WORKERS", "in_thread"]

#: Bodies run at once at most, as ``ThreadPoolExecutor``'s default bound.
MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context,
             Callable[..., Any], dict[str, Any]]


class _Workers:
    """The jobs, and how many workers there are and how many will take one unasked."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle = 0
        self.started = 0
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()


_workers = _Workers()


def _forked() -> None:
    global _workers
    _workers = _Workers()


if hasattr(os, "register_at_fork"):  # POSIX: a child has none of its parent's threads
    os.register_at_fork(after_in_child=_forked)


async def in_thread(fn: Callable[..., Any], args: dict[str, Any]) -> Any:
    """``fn(**args)`` in a worker thread, in a copy of the caller's context, awaited."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    workers = _workers
    with workers.lock:
        if workers.idle:
            workers.idle -= 1
            start = False
        else:
            start = workers.started < MAX_WORKERS
            workers.started += start
    workers.jobs.put((loop, future, contextvars.copy_context(), fn, args))
    if start:
        threading.Thread(target=_work, args=(workers,), name="agtool-hop", daemon=True).start()
    return await future


def _work(workers: _Workers) -> None:
    while True:
        loop, future, context, fn, args = workers.jobs.get()
        error: BaseException | None = None
        value = None
        try:
            value = context.run(fn, **args)
        except StopIteration as exc:
            error = RuntimeError("a tool body raised StopIteration")
            error.__cause__ = exc
        except BaseException as exc:  # handed to the caller, as if the body ran there
            error = exc
        # Free before answering: a caller woken by the answer may hop again at once, and
        # finding this worker free it starts no other thread.
        with workers.lock:
            workers.idle += 1
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for this now
            loop.call_soon_threadsafe(_answer, future, value, error)
        # Nothing of a job done is held while waiting for the next.
        del loop, future, context, fn, args, value, error


def _answer(future: asyncio.Future[Any], value: object, error: BaseException | None) -> None:
    if future.cancelled():  # its caller stopped waiting
        return
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)
