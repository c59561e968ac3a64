"""Exceptions agtool raises.

Only programming mistakes raise; bad arguments and bad results are data
(reasons returned by the gate), never exceptions. ``UpstreamError`` is the
one meant for tool bodies to raise, and the gate turns it into a reason.

    AgtoolError
    ├── ContractError (also a ValueError): a malformed contract table
    │   └── SchemaError: a JSON Schema or tools file that cannot become a contract exactly
    ├── TableError (also a ValueError): a ``module:NAME`` that names no loadable table
    ├── UpstreamError: raised by a tool body whose upstream failed
    ├── UpstreamUnavailable (also a ConnectionError): a proxied MCP server that did not
    │   start or list its tools
    ├── ServerGone (also a ConnectionError): an MCP server under check that died, hung or
    │   closed the session during a call
    │   └── Unresponsive: a call and the ping after it both got no answer in time
    ├── LongRunning (also a TimeoutError): a call still at work when its time limit ended,
    │   on a server that still answers a ping
    └── ToolFailed: a LangChain agent's own tool answered an error ``ToolMessage`` (to the
        gate, a body that raised)

    NotApplied (a BaseException, not an error): a body's word that it had no effect
"""

from __future__ import annotations

__all__ = ["AgtoolError", "ContractError", "LongRunning", "NotApplied", "SchemaError",
           "ServerGone", "TableError", "ToolFailed", "Unresponsive", "UpstreamError",
           "UpstreamUnavailable"]


class AgtoolError(Exception):
    """Root of every exception agtool raises."""


class ContractError(AgtoolError, ValueError):
    """A contract table is malformed.

    Raised when a table is registered (``Gate(table)``, ``check_table``), never
    while a call is being gated. ``tool``, ``field`` and ``problem`` say where
    and what: ``field`` is a dotted path such as ``args.limit.max``.
    """

    def __init__(self, tool: str, field: str, problem: str) -> None:
        self.tool = tool
        self.field = field
        self.problem = problem
        where = f"tool {tool!r}" + (f", field {field!r}" if field else "")
        super().__init__(f"{where}: {problem}")


class SchemaError(ContractError):
    """A JSON Schema or a tools file that cannot become a contract entry exactly.

    ``source`` is the file (or ``""``), ``tool`` the tool's name, ``field`` a
    JSON pointer to the offending keyword (``/properties/amount/maximum``) and
    ``problem`` what is wrong with it.
    """

    def __init__(self, source: str, tool: str, field: str, problem: str) -> None:
        super().__init__(tool, field, problem)
        self.source = source
        where = [part for part in (source, f"tool {tool!r}" if tool else "",
                                   f"at {field!r}" if field else "") if part]
        self.args = (", ".join(where) + f": {problem}" if where else problem,)


class TableError(AgtoolError, ValueError):
    """A ``module:NAME`` that does not name a table that can be loaded."""


class UpstreamUnavailable(AgtoolError, ConnectionError):
    """The upstream server did not start, did not list its tools, or was lost and could not be
    restarted: there is nothing to serve."""


class ServerGone(AgtoolError, ConnectionError):
    """The server died, hung or closed the session during a call."""


class Unresponsive(ServerGone):
    """A call got no answer in time, and neither did the ping sent after it: frozen."""


class LongRunning(AgtoolError, TimeoutError):
    """A call got no answer in time, but the server still answers a ping: it is busy."""


class ToolFailed(AgtoolError):
    """The agent's tool answered an error ``ToolMessage``: to the gate, a body that raised."""


class UpstreamError(AgtoolError):
    """Raised by a tool body when the service behind it failed (an HTTP 502, a 429).

    The gate answers ``upstream:<status>`` (``RATE_LIMITED`` for 429,
    ``NOT_FOUND`` for 404, ``UPSTREAM_ERROR`` otherwise) and keeps a short
    excerpt of ``body`` for the model's ``details``, never the body as data.
    ``retry_after`` is in seconds. ``applied=False`` is the body's word that
    the upstream did nothing (it refused the request before acting on it, as a
    rate limiter does): a write's idempotency key is then freed for a retry.
    Without it a write whose body failed retryably may have acted, and its key
    is left unknown.
    """

    def __init__(self, status: int, body: str = "", retry_after: float | None = None, *,
                 applied: bool | None = None) -> None:
        self.status = status
        self.body = body
        self.retry_after = retry_after
        self.applied = applied
        super().__init__(f"upstream answered {status}")


class NotApplied(BaseException):
    """Raised through a body to stop its call and say that it had no effect.

    A write's idempotency key is then freed, so a later call runs the body
    again (any other ``BaseException`` from a write body leaves its outcome
    unknown), and the exception propagates as every ``BaseException`` does.
    The LangChain adapter carries LangGraph's ``interrupt()`` this way: a
    resumed run re-runs the tool from its start.
    """
