"""Scenarios with a bound: an async scenario run under a timeout, and whether a process lives.

A hang fails the test instead of blocking it, and a process that should be gone is
told from a zombie (which has exited and only waits to be reaped).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

SCENARIO_TIMEOUT = 90


def run(scenario: Callable[[], Awaitable[Any]], seconds: float = SCENARIO_TIMEOUT) -> Any:
    """``scenario()`` run to its end in a new event loop, failed after ``seconds``."""
    async def bounded() -> Any:
        with anyio.fail_after(seconds):
            return await scenario()
    return anyio.run(bounded)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False
