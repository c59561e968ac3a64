"""A bounded pool of worker threads for timed sync bodies, one pool per gate.

Python cannot stop a thread, so a body that overruns its timeout keeps its
worker until it returns. With a thread per call, a hung upstream would leave
one live thread per call for ever; here it holds at most ``size`` workers,
and a timed call that finds every worker busy is refused at once
(``submit`` answers ``None``) instead of starting another thread.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["BodyPool"]

_T = TypeVar("_T")
_Job = tuple[Future[Any], contextvars.Context, Callable[[], Any]]


class BodyPool:
    """At most ``size`` daemon workers, started as they are first needed and then reused."""

    def __init__(self, size: int) -> None:
        if type(size) is not int or size < 1:
            raise ValueError(f"workers must be a positive int, got {size!r}")
        self.size = size
        self._lock = threading.Lock()
        self._busy = 0
        self._workers = 0
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()

    @property
    def busy(self) -> int:
        """How many workers are running a body now."""
        return self._busy

    @property
    def started(self) -> int:
        """How many worker threads this pool has started (never more than ``size``)."""
        return self._workers

    def submit(self, work: Callable[[], _T]) -> Future[_T] | None:
        """Run ``work()`` on a free worker, in a copy of the caller's context.

        ``None`` when every worker is busy: nothing was started.
        """
        with self._lock:
            if self._busy >= self.size:
                return None
            self._busy += 1
            start = self._busy > self._workers
            if start:
                self._workers += 1
        future: Future[_T] = Future()
        self._jobs.put((future, contextvars.copy_context(), work))
        if start:
            threading.Thread(target=self._work, name="agtool-body", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            future, context, work = self._jobs.get()
            started = future.set_running_or_notify_cancel()
            try:
                value = context.run(work) if started else None
            except BaseException as exc:  # handed to the caller, as if the body ran inline
                self._free()
                future.set_exception(exc)
                continue
            # Free before answering: a caller woken by the answer may submit at once.
            self._free()
            if started:  # else its caller stopped waiting before it started: nothing ran
                future.set_result(value)

    def _free(self) -> None:
        with self._lock:
            self._busy -= 1
