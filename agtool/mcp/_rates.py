"""Rate limits of a served gate, per tool and per client: ``--rate NAME=N/SECONDS``.

The MCP spec asks servers to rate limit tool calls. A limit lets ``N`` calls
of tool ``NAME`` (``*``: every tool without its own) through in any window of
``SECONDS`` seconds, counted apart for each client (``agtool.mcp._serve.client_of``).
A call over it is refused before the gate is asked, as a retryable
``RATE_LIMITED`` error whose ``details.retry_after`` says how long to pause.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._answers import model_error
from .._reasons import RATE_LIMITED

__all__ = ["ANY_TOOL", "MAX_CLIENTS", "Rates", "parse_rate"]

#: The ``NAME`` of a limit that holds for every tool without a limit of its own.
ANY_TOOL = "*"
#: How many (tool, client) windows are kept: the least recently used one goes first, so
#: that a flood of one-call connections cannot grow the server's memory without bound.
MAX_CLIENTS = 10_000


def parse_rate(text: str) -> tuple[str, int, float]:
    """``"send_sms=5/60"`` as ``("send_sms", 5, 60.0)``; ``ValueError`` says what is wrong."""
    name, found, limit = text.partition("=")
    count, slash, seconds = limit.partition("/")
    try:
        calls, window = int(count), float(seconds)
    except ValueError:
        calls, window = 0, 0.0
    if not found or not name or not slash or calls < 1 or not 0 < window < math.inf:
        raise ValueError(f"--rate {text!r}: expected NAME=N/SECONDS, N a positive int and "
                         f"SECONDS a positive number (NAME * for every tool)")
    return name, calls, window


class Rates:
    """Sliding windows of calls per (tool, client), thread-safe."""

    def __init__(self, limits: Mapping[str, tuple[int, float]] | Iterable[str], *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(limits, Mapping):
            self.limits = {name: (int(n), float(s)) for name, (n, s) in limits.items()}
        else:
            self.limits = {name: (n, s) for name, n, s in map(parse_rate, limits)}
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: OrderedDict[tuple[str, str], deque[float]] = OrderedDict()

    def take(self, tool: str, client: str) -> float:
        """Count one call; ``0.0`` if it may go, else the seconds until one would be let through."""
        limit = self.limits.get(tool) or self.limits.get(ANY_TOOL)
        if limit is None:
            return 0.0
        calls, window = limit
        now = self._clock()
        key = (tool, client)
        with self._lock:
            times = self._windows.get(key)
            if times is None:
                times = self._windows[key] = deque()
                if len(self._windows) > MAX_CLIENTS:
                    self._windows.popitem(last=False)
            else:
                self._windows.move_to_end(key)
            while times and times[0] <= now - window:
                times.popleft()
            if len(times) >= calls:
                return max(times[0] + window - now, 1e-3)
            times.append(now)
            return 0.0

    def refusal(self, tool: str, wait: float) -> dict[str, Any]:
        """The answer to a call over its limit, as ``call_for_model`` shapes a failure."""
        error = model_error(RATE_LIMITED, None, None, {"retry_after": round(wait, 3)})
        error["message"] = (f"too many calls of {tool} from this caller; try again in "
                            f"{math.ceil(wait)} s")
        return {"ok": False, "error": error, "request_id": "rate_limited"}
