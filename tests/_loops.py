"""Closing the event loop a framework's ``run_sync`` leaves set on the thread.

pydantic-ai's ``Agent.run_sync`` and the OpenAI Agents SDK's ``Runner.run_sync``
each keep the thread's default event loop open for the next sync run. A later
``asyncio.run`` in the same process replaces it and drops it unclosed, and its
``ResourceWarning`` then fails whichever test happens to be running.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["closing_loop"]

_T = TypeVar("_T")


def closing_loop(run: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``run(*args, **kwargs)``, then the thread's default event loop closed and unset."""
    try:
        return run(*args, **kwargs)
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # as both frameworks ask for it
            loop = asyncio.get_event_loop_policy().get_event_loop()
        loop.close()
        asyncio.set_event_loop(None)
