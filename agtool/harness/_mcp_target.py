"""One MCP server under test, reached through the official client: its environment, its calls.

A stdio server is started with the MCP SDK's default safe environment
(``mcp.client.stdio.get_default_environment``: ``HOME``, ``PATH``, ``USER`` and
the like), the variables the user names (``--env NAME``), and one planted
secret: ``AGTOOL_CANARY_TOKEN`` set to a random value made for the run. Never
the caller's whole environment: in CI that holds the CI's secrets. Every
answer is looked at for the canary (a server that hands it back has leaked its
environment), and everything printed about an answer first goes through
``scrubber``, made from every value of the caller's environment.

A call that gets no answer within its time limit is followed by a ping on the
same session: a server that still answers is busy with a long call
(``LongRunning``, not a failure); one that does not is ``Unresponsive``, a
``ServerGone``. Either way the session is dropped, so the next call starts
the server again.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    AsyncExitStack,
    asynccontextmanager,
)
from dataclasses import dataclass
from typing import Any

import anyio
import mcp.types as types
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from .._errors import LongRunning, ServerGone, Unresponsive, UpstreamUnavailable
from .._scrub import Scrubber
from ..mcp._proxy import _cause as _first_cause

__all__ = [
    "CALL_TIMEOUT",
    "CANARY_NAME",
    "Answer",
    "LongRunning",
    "McpTarget",
    "ServerGone",
    "Transport",
    "Unresponsive",
    "environment_scrubber",
    "looks_like_error",
    "one_line",
    "server_environment",
]

#: Seconds one call may take by default before the server is asked whether it is alive.
CALL_TIMEOUT = 15.0
#: The variable planted in a started server's environment; its value is made per run.
CANARY_NAME = "AGTOOL_CANARY_TOKEN"
#: Shorter values of the caller's environment are not scrubbed: "1", "true" and "/usr"
#: cannot be told apart from ordinary text, and hold no secret.
SCRUB_MIN_CHARS = 6

#: Makes the read and write streams of a session: an async context manager, as
#: ``stdio_client`` is (for a server in this process, the SDK's in-memory transport).
Transport = Callable[[], AbstractAsyncContextManager[Any]]

# What a tool's text says when it is an error, however the server flags it: a leading
# "Error"/"Invalid"/"Traceback", or the phrases validators write.
_ERROR_START = re.compile(
    r"^\W*(?:mcp\s+)?(?:error|errors|exception|traceback|invalid|failed|failure|fatal)\b",
    re.IGNORECASE)
_ERROR_PHRASE = re.compile(
    r"validation error|invalid (?:argument|arguments|params|parameters|input|type)\b|"
    r"is not of type|is a required property|field required|missing required|"
    r"expected (?:a |an )?(?:string|number|integer|boolean|array|object)\b",
    re.IGNORECASE)


# Characters after which a terminal, a log viewer or str.splitlines starts a new line.
_BREAKS = re.compile("[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def one_line(text: str) -> str:
    r"""``text`` with every character that starts a new line escaped (``\u2028`` as the six
    characters ``\u2028``): a line printed is never cut inside server data."""
    return _BREAKS.sub(lambda found: json.dumps(found[0])[1:-1], text)


def looks_like_error(text: str) -> bool:
    """Whether a tool's text reads as an error message (an error answered as a success)."""
    head = text.strip()[:400]
    return bool(_ERROR_START.search(head) or _ERROR_PHRASE.search(head))


def server_environment(names: Mapping[str, str] | None, canary: str) -> dict[str, str]:
    """What a started server gets beside the SDK's safe defaults: the named variables and
    the canary."""
    return {**(names or {}), **({CANARY_NAME: canary} if canary else {})}


def environment_scrubber(environ: Mapping[str, str] | None = None,
                         extra: Mapping[str, str] | None = None) -> Scrubber:
    """Takes every value of the caller's environment (and ``extra``'s) out of printed text."""
    values = {value for value in [*(environ if environ is not None else os.environ).values(),
                                  *(extra or {}).values()]
              if len(value.strip()) >= SCRUB_MIN_CHARS}
    return Scrubber(sorted(values))


def _is_url(target: str) -> bool:
    return target.startswith(("http://", "https://"))


def _cause(exc: BaseException, timeout: float) -> str:
    """The first real failure inside ``exc``; a bare timeout said as one."""
    cause = _first_cause(exc)
    return f"no answer within {timeout:g} s" if cause == "TimeoutError: " else cause


def _with_fileno(stream: Any) -> Any:
    """``stream`` if a subprocess can write to it, else the null device (a captured stderr)."""
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return open(os.devnull, "w")  # closed by McpTarget.close
    return stream


@dataclass(frozen=True)
class Answer:
    """A server's answer to one ``tools/call``."""

    refused: bool  #: ``isError``, or a JSON-RPC error in place of a result
    structured: Any  #: ``structuredContent`` (``None`` when absent)
    text: str  #: the text blocks, joined
    protocol_error: bool = False

    @property
    def value(self) -> Any:
        """What the gate would check: the structured content, or the JSON the text holds."""
        if self.structured is not None:
            return self.structured
        try:
            return json.loads(self.text)
        except ValueError:
            return {"text": self.text}

    @property
    def reason(self) -> str:
        """An agtool server's structured reason (``args:type:limit``), else ``""``."""
        error = self.structured.get("error") if isinstance(self.structured, dict) else None
        details = error.get("details") if isinstance(error, dict) else None
        reason = details.get("reason") if isinstance(details, dict) else None
        return reason if isinstance(reason, str) else ""

    @property
    def empty(self) -> bool:
        """Nothing found: no text and no structure, or an empty list, object or string."""
        value = self.value
        if isinstance(value, dict):
            if set(value) == {"text"} and self.structured is None:
                return not str(value["text"]).strip()
            return not value or all(each in ([], {}, "", None) for each in value.values())
        return value in ([], "", None, {})

    @property
    def error_as_success(self) -> bool:
        """Accepted (no ``isError``), with a text that reads as an error."""
        return not self.refused and looks_like_error(self.text)

    def holds(self, secret: str) -> bool:
        """Whether ``secret`` is anywhere in the answer (text or structure)."""
        if not secret:
            return False
        return secret in self.text or secret in json.dumps(self.structured, default=repr)


@asynccontextmanager
async def _open_session(target: str, errlog: Any, transport: Transport | None,
                        env: Mapping[str, str], cwd: str | None, timeout: float
                        ) -> AsyncIterator[ClientSession]:
    async with AsyncExitStack() as stack:
        if transport is not None:
            read, write = await stack.enter_async_context(transport())
        elif _is_url(target):
            read, write = await stack.enter_async_context(streamable_http_client(target))
        else:
            command = shlex.split(target)
            # env: the SDK adds its safe defaults (HOME, PATH, ...) to what is given here.
            params = StdioServerParameters(command=command[0], args=command[1:],
                                           env=dict(env), cwd=cwd)
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        session = await stack.enter_async_context(ClientSession(read, write))
        with anyio.fail_after(timeout):
            await session.initialize()
        yield session


class McpTarget:
    """One MCP server under test, reached through the official client.

    Use as a context manager (or call ``close``). Calls are synchronous: an
    event loop in a background thread holds the client session, so a
    Hypothesis test can make them one by one. ``env`` is what a started server
    gets beside the SDK's safe defaults (the canary is added to it), ``cwd``
    where it runs; ``timeout`` the seconds a call may take, ``tool_timeouts``
    the same per tool.
    """

    def __init__(self, target: str, *, errlog: Any = None,
                 transport: Transport | None = None, env: Mapping[str, str] | None = None,
                 cwd: str | None = None, timeout: float = CALL_TIMEOUT,
                 tool_timeouts: Mapping[str, float] | None = None,
                 canary: str | None = None) -> None:
        if not target.strip():
            raise ValueError("the MCP server to check is empty: give a command or a URL")
        self.target = target
        given = errlog if errlog is not None else sys.stderr
        self._errlog = _with_fileno(given)
        self._own_errlog = self._errlog is not given
        self._transport = transport
        self.timeout = timeout
        self.tool_timeouts = dict(tool_timeouts or {})
        #: The planted secret: made here for a server started here, ``""`` for a URL (whose
        #: environment is not ours to set), or the one given (a server in this process).
        self.canary = canary if canary is not None else (
            "" if _is_url(target) or transport is not None
            else "agtool-canary-" + secrets.token_hex(12))
        self._env = server_environment(env, self.canary if transport is None else "")
        self._cwd = cwd
        self.scrubber = environment_scrubber(extra=env)
        #: tool -> the first call whose answer held the canary, as printed.
        self.leaks: dict[str, str] = {}
        self._portal_cm: AbstractContextManager[BlockingPortal] = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._session: tuple[str, ClientSession, AbstractContextManager[Any]] | None = None
        self._listing: list[types.Tool] | None = None

    def __enter__(self) -> McpTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the open session (ending a stdio server) and the event loop."""
        self.drop()
        self._portal_cm.__exit__(None, None, None)
        if self._own_errlog:
            self._errlog.close()

    def drop(self) -> None:
        """Close the open session: the next call starts the server (or a session) again."""
        if self._session is not None:
            _, _, opened = self._session
            self._session = None
            with contextlib.suppress(Exception):  # a dead server's close is no news
                opened.__exit__(None, None, None)

    def timeout_of(self, tool: str) -> float:
        """The seconds a call of ``tool`` may take."""
        return self.tool_timeouts.get(tool, self.timeout)

    def session(self, key: str) -> ClientSession:
        """The session of ``key`` (a tool), opened now unless it is the open one."""
        if self._session is not None and self._session[0] == key:
            return self._session[1]
        self.drop()
        opened = self._portal.wrap_async_context_manager(
            _open_session(self.target, self._errlog, self._transport, self._env, self._cwd,
                          max(self.timeout, CALL_TIMEOUT)))
        try:
            session = opened.__enter__()
        except Exception as exc:  # a missing command, a crash, a server that is not MCP
            raise UpstreamUnavailable(f"{self.target!r} did not start as an MCP server "
                                      f"({_cause(exc, self.timeout)})") from None
        self._session = (key, session, opened)
        return session

    def tools(self) -> list[types.Tool]:
        """Every tool the server lists, page after page (listed once)."""
        if self._listing is None:
            self._listing = self.list_now("")
        return list(self._listing)

    def list_now(self, key: str) -> list[types.Tool]:
        """The listing as the session of ``key`` sees it now (``UpstreamUnavailable``)."""
        return list(self._portal.call(self._list, self.session(key)))

    async def _list(self, session: ClientSession) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        try:
            while True:
                with anyio.fail_after(max(self.timeout, CALL_TIMEOUT)):
                    page = await session.list_tools(
                        params=None if cursor is None else types.PaginatedRequestParams(
                            cursor=cursor))
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return tools
        except Exception as exc:
            raise UpstreamUnavailable(f"{self.target!r} did not list its tools "
                                      f"({_cause(exc, self.timeout)})") from None

    def call(self, tool: str, arguments: dict[str, Any]) -> Answer:
        """One ``tools/call``; ``ServerGone`` if the server or the session did not survive
        it, ``LongRunning`` if it is still at work when the time limit ends."""
        session = self.session(tool)
        try:
            answer: Answer = self._portal.call(self._call, session, tool, arguments)
        except (ServerGone, LongRunning):
            self.drop()  # the next call starts the server again
            raise
        if answer.holds(self.canary) and tool not in self.leaks:
            self.leaks[tool] = (f"{tool}({json.dumps(arguments, ensure_ascii=False)}) answered "
                                f"the value of {CANARY_NAME}, planted in its environment")
        return answer

    async def _call(self, session: ClientSession, tool: str, arguments: dict[str, Any]
                    ) -> Answer:
        request = types.CallToolRequest(params=types.CallToolRequestParams(
            name=tool, arguments=arguments))
        timeout = self.timeout_of(tool)
        try:
            # send_request, not call_tool: call_tool checks the result against the listed
            # outputSchema itself and raises, and the harness wants to see the result.
            result = await session.send_request(request, types.CallToolResult,
                                                request_read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                await self._after_timeout(session, timeout)
            if exc.code == types.CONNECTION_CLOSED:
                raise ServerGone(f"{exc} (JSON-RPC {exc.code})") from None
            return Answer(True, None, f"JSON-RPC error {exc.code}: {exc}", protocol_error=True)
        except Exception as exc:  # a closed stream, a result that is no CallToolResult
            raise ServerGone(_cause(exc, timeout)) from None
        text = "\n".join(block.text for block in result.content
                         if isinstance(block, types.TextContent))
        return Answer(bool(result.is_error), result.structured_content, text)

    async def _after_timeout(self, session: ClientSession, timeout: float) -> None:
        """Raise ``LongRunning`` if a ping is still answered, else ``Unresponsive``."""
        try:
            with anyio.fail_after(timeout):
                await session.send_ping()
        except Exception:
            raise Unresponsive(f"no answer within {timeout:g} s, and no answer to a ping "
                               f"within {timeout:g} s after it: the server is frozen") from None
        raise LongRunning(f"no answer within {timeout:g} s, though the server still answers "
                          f"a ping")
