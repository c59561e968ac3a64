"""A bounded pool of worker threads for timed sync bodies, one pool per gate.

Python cannot stop a thread, so a body that overruns its timeout keeps its
worker until it returns. With a thread per call, a hung upstream would leave
one live thread per call for ever; here it holds at most ``size`` workers,
and a timed call that finds every worker busy is refused at once
(``submit`` answers ``None``) instead of starting another thread.

The workers hold only the pool's queue and counts (``_Workers``), never the
pool or a job once it is done, so a pool nobody holds any more is collected,
and its finalizer tells every worker to exit: an idle one at once, a busy one
when its body returns. ``close()`` does the same now.
"""

from __future__ import annotations

import contextvars
import queue
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["BodyPool"]

_T = TypeVar("_T")
_Job = tuple[Future[Any], contextvars.Context, Callable[[], Any]]


class _Workers:
    """What the worker threads share with their pool: the jobs, and who is busy."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.busy = 0
        self.started = 0
        self.closed = False
        #: Jobs, and one ``None`` per worker when the pool closes: that worker exits.
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()

    def free(self) -> None:
        with self.lock:
            self.busy -= 1

    def close(self) -> None:
        """Every worker exits: an idle one now, a busy one when its body returns."""
        with self.lock:
            self.closed = True
            stopping, self.started = self.started, 0
        for _ in range(stopping):
            self.jobs.put(None)


class BodyPool:
    """At most ``size`` daemon workers, started as they are first needed and then reused."""

    def __init__(self, size: int) -> None:
        if type(size) is not int or size < 1:
            raise ValueError(f"workers must be a positive int, got {size!r}")
        self.size = size
        self._workers = _Workers()
        # Runs once: on close(), or when the pool is collected (its gate dropped).
        self._close = weakref.finalize(self, self._workers.close)

    @property
    def busy(self) -> int:
        """How many workers are running a body now."""
        return self._workers.busy

    @property
    def started(self) -> int:
        """How many worker threads run now (never more than ``size``; none once closed)."""
        return self._workers.started

    @property
    def closed(self) -> bool:
        return self._workers.closed

    def close(self) -> None:
        """Stop the workers (an idle one now, a busy one when its body returns); idempotent.
        A closed pool starts nothing: ``submit`` answers ``None``."""
        self._close()

    def submit(self, work: Callable[[], _T]) -> Future[_T] | None:
        """Run ``work()`` on a free worker, in a copy of the caller's context.

        ``None`` when every worker is busy, or the pool is closed: nothing was started.
        """
        workers = self._workers
        with workers.lock:
            if workers.closed or workers.busy >= self.size:
                return None
            workers.busy += 1
            start = workers.busy > workers.started
            if start:
                workers.started += 1
        future: Future[_T] = Future()
        workers.jobs.put((future, contextvars.copy_context(), work))
        if start:
            threading.Thread(target=_work, args=(workers,), name="agtool-body",
                             daemon=True).start()
        return future


def _work(workers: _Workers) -> None:
    """One worker's life: run jobs until told to exit; hold none of them while idle."""
    while True:
        job = workers.jobs.get()
        if job is None:
            return
        future, context, work = job
        del job
        started = future.set_running_or_notify_cancel()
        try:
            value = context.run(work) if started else None
        except BaseException as exc:  # handed to the caller, as if the body ran inline
            workers.free()
            future.set_exception(exc)
        else:
            # Free before answering: a caller woken by the answer may submit at once.
            workers.free()
            if started:  # else its caller stopped waiting before it started: nothing ran
                future.set_result(value)
            del value
        # A job done is not kept while waiting for the next: it may hold its gate.
        del future, context, work
