"""The upstream MCP server of a proxy: started, watched, restarted, stopped, and its faults mapped.

An ``Upstream`` is a stdio subprocess (``command``) or a streamable HTTP
server (``url``), held by one supervising task for the life of an ``async
with``. What can go wrong with it reaches the gate as one of three things,
mapped once here (``Upstream.call``):

- the connection was lost (the process died, the pipe or socket closed, the
  SDK's ``MCPError`` ``CONNECTION_CLOSED``): ``ConnectionError``, which the
  gate answers ``upstream:connection``, retryable, and which leaves a write's
  outcome unknown, never a stored failure;
- the upstream did not answer in time (``MCPError`` ``REQUEST_TIMEOUT``):
  ``TimeoutError``;
- the upstream answered a protocol error: ``UpstreamError`` (502 for its
  ``INTERNAL_ERROR``, since its body may have run; ``UPSTREAM_TOOL_ERROR`` for
  a request it refused).

A lost connection is restarted, at most ``restarts`` times in
``RESTART_WINDOW`` seconds, each said on the ``agtool`` logger; past that the
upstream is ``gone`` and every call is a lost connection. A call that times
out sends a ``ping``: an upstream that cannot answer even that is blocked, and
is restarted too.

The subprocess gets the MCP SDK's default environment
(``mcp.client.stdio.get_default_environment``) plus the variables named in
``env``, never ``AGTOOL_SECRET``. It runs in its own process group, which
``stop`` ends with SIGTERM then SIGKILL as soon as the proxy leaves, whatever
made it leave (its client went away, a signal, an error).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from typing import Any

import anyio
import mcp.types as types
from anyio.abc import ObjectReceiveStream, TaskStatus
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from .._errors import UpstreamError, UpstreamUnavailable
from .._keys import ENV_SECRET

__all__ = ["DEFAULT_RESTARTS", "RESTART_WINDOW", "UPSTREAM_TOOL_ERROR", "Upstream",
           "UpstreamUnavailable", "upstream_environment"]

_log = logging.getLogger("agtool")
#: The status an upstream tool's own error (``isError``) is answered with: a
#: refusal by the upstream, not a transport failure, so never retried blindly.
UPSTREAM_TOOL_ERROR = 422
#: How many restarts of a lost upstream are tried in ``RESTART_WINDOW`` seconds.
DEFAULT_RESTARTS = 5
RESTART_WINDOW = 60.0
#: Seconds between a loss and the restart after it, doubled on each restart in a row.
_FIRST_BACKOFF = 0.1
#: Seconds a ``ping`` may take after a call timed out before the upstream counts as blocked.
PING_TIMEOUT = 5.0
#: Seconds the upstream's process group has after SIGTERM before SIGKILL.
_STOP_GRACE = 1.0
_CONNECTION_CLOSED = -32000
_REQUEST_TIMEOUT = -32001
_INTERNAL_ERROR = -32603


def upstream_environment(names: Collection[str]) -> dict[str, str]:
    """What the upstream gets beside the SDK's default environment: the variables ``names`` names.

    ``AGTOOL_SECRET`` is refused (``ValueError``): with it an upstream could sign
    approvals another gate on the same secret accepts. A name that is not set
    is left out.
    """
    if ENV_SECRET in names:
        raise ValueError(f"--env {ENV_SECRET}: the gate's secret is never handed to the "
                         f"upstream server")
    return {name: os.environ[name] for name in names if name in os.environ}


def cause_of(exc: BaseException) -> str:
    """The first real failure inside ``exc``, which a task group may have wrapped."""
    inner = getattr(exc, "exceptions", None)
    while inner:
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    return f"{type(exc).__name__}: {exc}"


#: Called with each new listing of the upstream's tools: after a restart, or a
#: ``notifications/tools/list_changed``; what it answers, if awaitable, is awaited.
OnListing = Callable[[list[types.Tool]], Awaitable[None] | None]


class Upstream:
    """The upstream MCP server, kept running for the life of an ``async with``."""

    def __init__(self, command: Sequence[str] = (), *, url: str | None = None,
                 env: Collection[str] = (), restarts: int = DEFAULT_RESTARTS,
                 cwd: str | None = None) -> None:
        if bool(command) == bool(url):
            raise ValueError("give the upstream server's command or its url, not both "
                             "and not neither")
        self.command = list(command)
        self.url = url
        self.label = url or self.command[0]
        self.restarts = restarts
        self._environment = upstream_environment(env)
        self._cwd = cwd
        #: What the upstream listed when it (re)started or said its list changed.
        self.listed: list[types.Tool] = []
        #: Called on every listing after the first.
        self.on_listing: OnListing | None = None
        self.session: ClientSession | None = None
        self._ready = anyio.Event()
        self._lost = anyio.Event()
        self.gone = anyio.Event()  #: set when the upstream was lost and not restarted
        self._restarted: deque[float] = deque()
        self._pgid: int | None = None
        self._group: Any = None

    # --- life -------------------------------------------------------------------------

    async def __aenter__(self) -> Upstream:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        try:
            await self._group.start(self._supervise)
        except BaseException as exc:
            self._group.cancel_scope.cancel()
            with contextlib.suppress(Exception):
                await self._group.__aexit__(None, None, None)
            if isinstance(exc, UpstreamUnavailable):
                raise exc from None
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._group.cancel_scope.cancel()
        await self._group.__aexit__(None, None, None)

    def stop(self) -> None:
        """End the upstream's process group now: SIGTERM, then SIGKILL after a grace.

        Blocks for at most the grace; safe in a signal handler, and more than once.
        """
        pgid = self._pgid
        if pgid is None or not _signal(pgid, signal.SIGTERM):
            return
        deadline = time.monotonic() + _STOP_GRACE
        while time.monotonic() < deadline and _signal(pgid, 0):
            time.sleep(0.01)
        _signal(pgid, signal.SIGKILL)

    async def _astop(self) -> None:
        """``stop`` for the event loop: the same steps, waiting without blocking it."""
        pgid, self._pgid = self._pgid, None
        if pgid is None or not _signal(pgid, signal.SIGTERM):
            return
        with anyio.move_on_after(_STOP_GRACE):
            while _signal(pgid, 0):
                await anyio.sleep(0.01)
        _signal(pgid, signal.SIGKILL)

    async def _supervise(self, task_status: TaskStatus[None]) -> None:
        first = True
        while True:
            try:
                async with self._connected() as session:
                    tools = await self._tools(session)
                    self.listed = tools
                    if first:
                        first = False
                        task_status.started()
                    else:
                        await self._tell(tools)
                    self._publish(session)
                    await self._lost.wait()
            except Exception as exc:
                if first:
                    raise UpstreamUnavailable(f"the upstream server {self.label!r} did not "
                                              f"start as an MCP server ({cause_of(exc)})"
                                              ) from None
                _log.warning("the upstream server %r failed (%s)", self.label, cause_of(exc))
            finally:
                self.session, self._lost = None, anyio.Event()
            if not await self._may_restart():
                return

    async def _may_restart(self) -> bool:
        now = time.monotonic()
        while self._restarted and now - self._restarted[0] > RESTART_WINDOW:
            self._restarted.popleft()
        if len(self._restarted) >= self.restarts:
            _log.error("the upstream server %r was lost and is not restarted (%d restarts in "
                       "%.0f s): every call now fails", self.label, len(self._restarted),
                       RESTART_WINDOW)
            self.gone.set()
            self._ready.set()  # waiting calls wake, and find it gone
            return False
        self._restarted.append(now)
        _log.warning("the upstream server %r was lost: restarting it (restart %d of at most "
                     "%d in %.0f s)", self.label, len(self._restarted), self.restarts,
                     RESTART_WINDOW)
        await anyio.sleep(_FIRST_BACKOFF * 2 ** (len(self._restarted) - 1))
        return True

    @contextlib.asynccontextmanager
    async def _connected(self) -> AsyncIterator[ClientSession]:
        async with self._transport() as (read, write), ClientSession(
                _Watched(read, self._ended), write,
                message_handler=self._on_message) as session:
            await session.initialize()
            yield session

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        if self.url is not None:
            from mcp.client.streamable_http import streamable_http_client

            async with streamable_http_client(self.url) as (read, write, *_):
                yield read, write
            return
        params = StdioServerParameters(command=self.command[0], args=self.command[1:],
                                       env=self._environment, cwd=self._cwd)
        before = _children()
        async with stdio_client(params) as (read, write):
            # The SDK starts the server as the leader of a new process group; knowing it
            # lets ``stop`` end that group at once (a signal handler must be able to), where
            # the SDK would first wait for it to read the end of its stdin.
            self._pgid = _only(_children() - before)
            try:
                yield read, write
            finally:
                with anyio.CancelScope(shield=True):
                    await self._astop()

    async def _on_message(self, message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification) and self.session is not None:
            self._group.start_soon(self._relist, self.session)

    async def _relist(self, session: ClientSession) -> None:
        try:
            tools = await self._tools(session)
        except Exception as exc:  # a lost upstream is restarted, and listed then
            _log.warning("the upstream server %r said its tools changed, and did not list "
                         "them (%s)", self.label, cause_of(exc))
            return
        if session is self.session:
            self.listed = tools
            await self._tell(tools)

    async def _tell(self, tools: list[types.Tool]) -> None:
        """Hand a new listing to ``on_listing``; what it raises is said, and breaks nothing."""
        if self.on_listing is None:
            return
        try:
            told = self.on_listing(tools)
            if told is not None:
                await told
        except Exception:
            _log.exception("the listing of the upstream server %r could not be taken in",
                           self.label)

    async def tools(self) -> list[types.Tool]:
        """Every tool the upstream lists now; ``UpstreamUnavailable`` if it cannot say."""
        try:
            return await self._tools(await self._session())
        except Exception as exc:  # an upstream whose listing fails has nothing to gate
            raise UpstreamUnavailable(f"the upstream server {self.label!r} did not list its "
                                      f"tools ({cause_of(exc)})") from None

    @staticmethod
    async def _tools(session: ClientSession) -> list[types.Tool]:
        """Every tool the upstream lists, page after page."""
        tools: list[types.Tool] = []
        cursor: str | None = None
        while True:
            page = await session.list_tools(params=None if cursor is None else
                                            types.PaginatedRequestParams(cursor=cursor))
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    # --- calls ------------------------------------------------------------------------

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """One upstream ``tools/call``, as the upstream answered it; faults mapped (see above).

        The result is not checked against the tool's ``outputSchema`` here: the
        gate checks it against its own contract, and a second check by the SDK
        would only turn a bad result into an exception.
        """
        session = await self._session()
        request = types.CallToolRequest(params=types.CallToolRequestParams(
            name=name, arguments=arguments))
        try:
            return await session.send_request(request, types.CallToolResult)
        except MCPError as exc:
            raise self._mapped(session, name, exc) from exc
        except (OSError, EOFError, anyio.BrokenResourceError, anyio.ClosedResourceError,
                anyio.EndOfStream) as exc:
            self._lose(session)
            raise ConnectionError(f"upstream {name!r}: the connection was lost") from exc
        except BaseException as exc:
            if isinstance(exc, anyio.get_cancelled_exc_class()):
                self._group.start_soon(self._check_alive, session)
            raise

    def _publish(self, session: ClientSession) -> None:
        """Calls go to ``session`` from now on; those waiting for one wake."""
        self.session = session
        ready, self._ready = self._ready, anyio.Event()
        ready.set()

    async def _session(self) -> ClientSession:
        """The live session, once there is one (a restart may be under way)."""
        while self.session is None:
            if self.gone.is_set():
                raise ConnectionError(f"the upstream server {self.label!r} is gone")
            await self._ready.wait()
        return self.session

    def _mapped(self, session: ClientSession, name: str, exc: MCPError) -> Exception:
        if exc.code == _CONNECTION_CLOSED:
            self._lose(session)
            return ConnectionError(f"upstream {name!r}: the connection was lost")
        if exc.code == _REQUEST_TIMEOUT:
            return TimeoutError(f"upstream {name!r} did not answer in time")
        status = 502 if exc.code == _INTERNAL_ERROR else UPSTREAM_TOOL_ERROR
        return UpstreamError(status, exc.message)

    def _ended(self) -> None:
        """The connection's read stream ended: the upstream exited or closed it."""
        self.session = None
        self._lost.set()

    def _lose(self, session: ClientSession) -> None:
        """``session`` is lost: no call goes to it again, and the supervisor restarts."""
        if session is self.session:
            self.session = None
            self._lost.set()

    async def _check_alive(self, session: ClientSession) -> None:
        """After a call was given up on: an upstream that cannot answer a ping is restarted."""
        with anyio.move_on_after(PING_TIMEOUT):
            with contextlib.suppress(Exception):
                await session.send_ping()
                return
        if session is self.session:
            _log.warning("the upstream server %r does not answer a ping after a call was "
                         "given up on: it is restarted", self.label)
            self._lose(session)

    def body(self, name: str, timeout: float | None = None) -> Callable[..., Awaitable[Any]]:
        """The gate body of upstream tool ``name``: its checked args, sent on as they are.

        With ``timeout``, the body itself gives up after that many seconds, with
        ``TimeoutError``: a write's body must end for its outcome to be marked
        unknown, where the gate's own timeout would leave it running.
        """
        async def call_upstream(**arguments: Any) -> Any:
            if timeout is None:
                result = await self.call(name, arguments)
            else:
                with anyio.fail_after(timeout):
                    result = await self.call(name, arguments)
            if result.is_error:
                raise UpstreamError(UPSTREAM_TOOL_ERROR, text_of(result))
            return value_of(result)

        call_upstream.__name__ = f"upstream_{name}"
        return call_upstream


class _Watched(ObjectReceiveStream[Any]):
    """A receive stream that says when it ends: the upstream's connection is lost then."""

    def __init__(self, inner: ObjectReceiveStream[Any], on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def value_of(result: types.CallToolResult) -> Any:
    """The result as the gate checks it: structured content, or the object its text holds.

    Text that is not a JSON object (``[]`` from a query with no rows, a number,
    prose) is ``{"text": text}``: a tool without ``outputSchema`` promises no
    shape, so any text is its answer, and one with an object schema must send it.
    """
    if result.structured_content is not None:
        return result.structured_content
    text = text_of(result)
    try:
        value = json.loads(text)
    except ValueError:
        return {"text": text}
    return value if isinstance(value, dict) else {"text": text}


def _children() -> set[int]:
    """This process's children, from ``/proc`` (empty where there is none)."""
    me, found = os.getpid(), set()
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rpartition(")")[2].split()
            except OSError:
                continue
            if len(fields) > 1 and fields[1] == str(me):
                found.add(int(entry))
    return found


def _only(pids: set[int]) -> int | None:
    return next(iter(pids)) if len(pids) == 1 else None


def _signal(pgid: int, number: int) -> bool:
    """Send ``number`` to process group ``pgid``; ``False`` once the group is gone.

    Never to a group whose leader's pid now belongs to a process that is not ours:
    the leader may have been reaped, and its pid given to someone else.
    """
    if not _ours(pgid):
        return False
    try:
        os.killpg(pgid, number)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member we may not signal: the group is still there
        return True
    return True


def _ours(pid: int) -> bool:
    """Whether ``pid`` is this process's child, or no process at all (only its group is left)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return len(fields) > 1 and fields[1] == str(os.getpid())
