"""Threads let go at once: the one way the tests race calls against each other."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def race(count: int, work: Callable[[int], Any]) -> list[Any]:
    """``work(i)`` from ``count`` threads released together; what each answered, in order.

    An exception any thread met is raised here, so a thread that died is never taken for
    one that answered ``None``.
    """
    barrier = threading.Barrier(count)
    answers: list[Any] = [None] * count
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            answers[i] = work(i)
        except BaseException as exc:  # handed to the test's own thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return answers
