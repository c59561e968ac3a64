"""The streamable HTTP door in process: bearer tokens, Origin, the loopback rule, and serving.

``HttpDoor`` is driven two ways. At the ASGI level, in front of a recording app,
so that a refusal is seen to stop the request before anything behind the door runs;
and as a real loopback server (``aserve_http`` under uvicorn, in the test's own event
loop) in front of a gated table, reached by the SDK's client, and by the proxy's
``Upstream(url=...)``. ``tests/mcp/test_mcp_serve_http.py`` drives the same door as an
``agtool mcp serve --http`` subprocess.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
import pytest
from _bounded import run
from _ports import connected, free_port, listening
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sse_starlette.sse import AppStatus

from agtool import Gate
from agtool.mcp import aserve_http, serve_http, server
from agtool.mcp._http import HttpDoor, HttpOptions, check_binding, is_loopback, tokens_from_env
from agtool.mcp._serve import PRINCIPAL_SCOPE_KEY
from agtool.mcp._upstream import Upstream

ALICE, BOB = "a" * 20 + "-alice", "b" * 20 + "-bob"
TOKENS = {"AGTOOL_TEST_ALICE": ALICE, "AGTOOL_TEST_BOB": BOB}


# --- At the ASGI level ------------------------------------------------------------------------


class Behind:
    """The app behind the door: records each scope it is handed, and answers 200."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.scopes.append(dict(scope))
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"behind"})


def knock(door: HttpDoor, headers: list[tuple[str, str]], kind: str = "http"
          ) -> list[dict[str, Any]]:
    """The messages the door sends for one request of ``kind`` with ``headers``."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": kind, "method": "POST", "path": "/mcp",
             "headers": [(key.lower().encode(), value.encode()) for key, value in headers]}
    run(lambda: door(scope, receive, send))
    return sent


def status_of(sent: list[dict[str, Any]]) -> int:
    return int(sent[0]["status"])


def door(host: str = "127.0.0.1", tokens: dict[str, str] | None = None,
         origins: tuple[str, ...] = ()) -> tuple[HttpDoor, Behind]:
    behind = Behind()
    return HttpDoor(behind, HttpOptions(host, 8000, tokens or {}, origins)), behind


@pytest.mark.parametrize(("token", "client"), [(ALICE, "AGTOOL_TEST_ALICE"),
                                                (BOB, "AGTOOL_TEST_BOB")])
def test_the_token_that_matches_names_its_client(token: str, client: str) -> None:
    """Each configured token is one client; its variable's name reaches the app in the scope
    (where the runs of that client are kept apart from every other's)."""
    gate, behind = door(tokens=TOKENS)
    sent = knock(gate, [("Authorization", f"Bearer {token}")])
    assert status_of(sent) == 200
    assert [scope[PRINCIPAL_SCOPE_KEY] for scope in behind.scopes] == [client]


def test_the_scheme_is_read_case_blind_and_the_token_trimmed() -> None:
    gate, behind = door(tokens=TOKENS)
    assert status_of(knock(gate, [("Authorization", f"bearer   {ALICE}  ")])) == 200
    assert behind.scopes[0][PRINCIPAL_SCOPE_KEY] == "AGTOOL_TEST_ALICE"


@pytest.mark.parametrize("authorization", [
    pytest.param(None, id="none"),
    pytest.param("Bearer ", id="empty"),
    pytest.param(f"Basic {ALICE}", id="not-bearer"),
    pytest.param(f"Bearer {ALICE[:-1]}", id="a-prefix"),
    pytest.param(f"Bearer {ALICE}x", id="one-byte-more"),
    pytest.param(f"Bearer {ALICE.upper()}", id="another-case"),
    pytest.param(f"Bearer {ALICE} {BOB}", id="two-tokens"),
])
def test_a_missing_or_wrong_token_is_401_and_nothing_behind_runs(
        authorization: str | None) -> None:
    gate, behind = door(tokens=TOKENS)
    sent = knock(gate, [] if authorization is None else [("Authorization", authorization)])
    assert status_of(sent) == 401
    headers = dict(sent[0]["headers"])
    assert headers[b"www-authenticate"].startswith(b"Bearer ")
    assert int(headers[b"content-length"]) == len(sent[1]["body"])
    assert sent[1]["body"] == b"a valid bearer token is required\n"
    assert behind.scopes == []


def test_a_second_authorization_header_does_not_override_the_first() -> None:
    gate, behind = door(tokens=TOKENS)
    sent = knock(gate, [("Authorization", "Bearer wrong-token-xxxxxxxxxx"),
                        ("Authorization", f"Bearer {ALICE}")])
    assert status_of(sent) == 401
    assert behind.scopes == []


@pytest.mark.parametrize("origin", ["http://localhost:3000", "http://127.0.0.1",
                                    "https://127.8.9.10:8443", "http://[::1]:8080",
                                    "HTTP://LOCALHOST/"])
def test_bound_to_loopback_a_loopback_origin_is_let_in(origin: str) -> None:
    gate, behind = door()
    assert status_of(knock(gate, [("Origin", origin)])) == 200
    assert len(behind.scopes) == 1
    assert PRINCIPAL_SCOPE_KEY not in behind.scopes[0]  # no token configured, none named


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://localhost.evil.example",
                                    "ftp://localhost", "http://[::2]:80", "localhost"])
def test_an_origin_not_allowed_is_403_and_nothing_behind_runs(origin: str) -> None:
    gate, behind = door()
    sent = knock(gate, [("Origin", origin)])
    assert status_of(sent) == 403
    assert sent[1]["body"] == b"origin not allowed\n"
    assert behind.scopes == []


def test_allowed_origins_match_exactly_ignoring_case_and_a_trailing_slash() -> None:
    gate, behind = door(origins=("https://App.Example/",))
    assert status_of(knock(gate, [("Origin", "https://app.example")])) == 200
    assert status_of(knock(gate, [("Origin", "https://app.example:8443")])) == 403
    assert status_of(knock(gate, [("Origin", "http://app.example")])) == 403
    assert len(behind.scopes) == 1


def test_off_loopback_a_loopback_origin_is_not_enough() -> None:
    """A server bound to another address cannot tell whose `localhost` a browser means."""
    gate, behind = door("0.0.0.0", tokens=TOKENS, origins=("https://app.example",))  # noqa: S104
    token = ("Authorization", f"Bearer {ALICE}")
    assert status_of(knock(gate, [("Origin", "http://localhost:3000"), token])) == 403
    assert status_of(knock(gate, [("Origin", "https://app.example"), token])) == 200
    assert status_of(knock(gate, [token])) == 200  # no Origin: not a browser, not refused
    assert len(behind.scopes) == 2


def test_the_origin_is_checked_before_the_token() -> None:
    gate, _ = door(tokens=TOKENS)
    assert status_of(knock(gate, [("Origin", "https://evil.example")])) == 403


def test_lifespan_passes_through_and_a_websocket_is_closed_unheard() -> None:
    """The SDK's session manager starts on lifespan; MCP is served over HTTP only."""
    gate, behind = door(tokens=TOKENS)
    assert knock(gate, [], kind="lifespan") == []
    assert [scope["type"] for scope in behind.scopes] == ["lifespan"]
    assert knock(gate, [("Authorization", f"Bearer {ALICE}")], kind="websocket") == [
        {"type": "websocket.close", "code": 1008}]
    assert knock(gate, [], kind="telepathy") == []
    assert [scope["type"] for scope in behind.scopes] == ["lifespan"]


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.255.0.9", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("LocalHost", True), ("0.0.0.0", False), ("::", False),  # noqa: S104
    ("192.0.2.7", False), ("example.com", False), ("localhost.example.com", False), ("", False)])
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_check_binding_refuses_off_loopback_without_a_token_and_any_short_token() -> None:
    check_binding(HttpOptions("127.0.0.1"))
    check_binding(HttpOptions("0.0.0.0", tokens={"T": "x" * 16}))  # noqa: S104
    with pytest.raises(ValueError, match="is not loopback: give --token-env"):
        check_binding(HttpOptions("192.0.2.7"))
    with pytest.raises(ValueError, match="--token-env T: the token is shorter than 16 bytes"):
        check_binding(HttpOptions("127.0.0.1", tokens={"T": "x" * 15}))


def test_tokens_are_read_from_the_named_variables_trimmed() -> None:
    environ = {"A": f"  {ALICE}\n", "EMPTY": "  "}
    assert tokens_from_env(["A"], environ) == {"A": ALICE}
    for name in ("EMPTY", "UNSET"):
        with pytest.raises(ValueError, match=f"--token-env {name}: the environment variable "
                                             "is unset or empty"):
            tokens_from_env(["A", name], environ)


def test_serve_http_refuses_before_the_gate_is_made() -> None:
    """Off loopback without a token nothing starts: not even the table's gate."""
    made: list[str] = []

    class Table(dict[str, Any]):
        def __iter__(self) -> Any:
            made.append("iterated")
            return super().__iter__()

    with pytest.raises(ValueError, match="is not loopback"):
        serve_http(Table(), host="192.0.2.7")
    assert made == []


# --- A real loopback server -------------------------------------------------------------------


def counted_table() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A write and a read; the write's runs counted here, where the gate cannot see."""
    sent: list[dict[str, Any]] = []

    def send_sms(to: str, text: str) -> dict[str, Any]:
        sent.append({"to": to, "text": text})
        return {"sent": len(sent)}

    def ping() -> dict[str, Any]:
        return {"pong": True}

    table = {
        "send_sms": {"fn": send_sms, "effect": "write", "risk": "reversible_write",
                     "description": "Send a text message.", "key_args": ["to"],
                     "args": {"to": {"type": "str"}, "text": {"type": "str"}},
                     "returns": {"sent": {"type": "int"}}},
        "ping": {"fn": ping, "description": "Answer pong.", "args": {},
                 "returns": {"pong": {"type": "bool"}}},
    }
    return table, sent


async def serving(http: HttpOptions, table: dict[str, Any],
                  visit: Callable[[str], Awaitable[Any]]) -> Any:
    """Serve ``table`` at ``http`` in this event loop while ``visit(url)`` runs, then stop it
    as an operator would, with SIGTERM: uvicorn shuts down and hands the signal on after."""
    gate = Gate(table, scope={"read_public", "reversible_write"})
    url = f"http://127.0.0.1:{http.port}/mcp"
    handed_on: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda number, frame: handed_on.append(number))
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(aserve_http, server(gate), http)
            await listening(http.port)
            try:
                visited = await visit(url)
            finally:
                signal.raise_signal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)
        # sse-starlette marks the whole process as exiting when uvicorn takes a signal; in a
        # real server the process then ends, here every later SSE answer would end at once.
        AppStatus.should_exit = False
    assert handed_on == [signal.SIGTERM]
    return visited


async def calls(url: str, token: str | None, meta: dict[str, Any] | None, times: int
                ) -> list[Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as http, Client(
            streamable_http_client(url, http_client=http)) as session:
        return [await session.call_tool("send_sms", {"to": "+8210", "text": "hi"}, meta=meta)
                for _ in range(times)]


def test_served_over_loopback_each_token_is_its_own_client_and_a_wrong_one_is_401() -> None:
    """The same run id under two tokens is two runs (each write runs once); under one token
    on a new connection it is the same run (the retry replays); a wrong token never gets
    to the gate."""
    table, sent = counted_table()
    http = HttpOptions("127.0.0.1", free_port(), TOKENS)
    meta = {"agtool/run_id": "run-1"}

    async def visit(url: str) -> tuple[list[Any], int]:
        answers = [*await calls(url, ALICE, meta, 2), *await calls(url, BOB, meta, 1),
                   *await calls(url, ALICE, meta, 1)]
        async with httpx2.AsyncClient() as raw:
            refused = await raw.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                     headers={"Authorization": "Bearer " + "c" * 24})
        return answers, refused.status_code

    answers, refused = run(lambda: serving(http, table, visit))
    assert [answer.structured_content for answer in answers] == [
        {"sent": 1}, {"sent": 1}, {"sent": 2}, {"sent": 1}]
    assert len(sent) == 2
    assert refused == 401


def test_a_proxys_upstream_reaches_a_streamable_http_server_by_url() -> None:
    """`Upstream(url=...)`: the served table is listed and called over streamable HTTP."""
    table, sent = counted_table()
    http = HttpOptions("127.0.0.1", free_port())

    async def visit(url: str) -> tuple[list[str], Any]:
        async with Upstream(url=url, restarts=0) as upstream:
            listed = sorted(tool.name for tool in upstream.listed)
            return listed, await upstream.body("ping")()

    listed, pong = run(lambda: serving(http, table, visit))
    assert listed == ["ping", "send_sms"]
    assert pong == {"pong": True}
    assert sent == []


async def closed_by_server(held: Any) -> bool:
    """Whether the server ends ``held`` within 5 s, sending nothing more on it."""
    async with held:
        with anyio.fail_after(5):
            try:
                await held.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return True
    return False


async def tasks_left(before: set[asyncio.Task[Any]]) -> set[str]:
    """The tasks on this loop that were not there ``before``, a moment after a cancel."""
    await anyio.sleep(0.2)
    return {repr(task.get_coro()) for task in
            asyncio.all_tasks() - before - {asyncio.current_task()}}


def test_a_cancelled_server_stops_listening_closes_its_connections_and_leaves_no_task(
        ) -> None:
    """``aserve_http`` in a task group that is cancelled, with one client connected idle and
    another that sent a request's headers and only part of its body: the port is free
    again at once, both connections are closed and no task is left (uvicorn, cancelled,
    runs no shutdown of its own, and would wait for the rest of the body for ever)."""
    table, _ = counted_table()
    http = HttpOptions("127.0.0.1", free_port())

    async def scenario() -> tuple[list[bool], bool, set[str]]:
        before = asyncio.all_tasks()
        async with anyio.create_task_group() as group:
            group.start_soon(aserve_http, server(Gate(table)), http)
            idle, halfway = await connected(http.port), await connected(http.port)
            await halfway.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               b"Content-Type: application/json\r\n"
                               b"Accept: application/json, text/event-stream\r\n"
                               b"Content-Length: 1000\r\n\r\n{\"jsonrpc\": ")
            await anyio.sleep(0.3)  # both accepted, the app waiting for the rest of the body
            group.cancel_scope.cancel()
        closed = [await closed_by_server(idle), await closed_by_server(halfway)]
        still_listening = True
        try:
            await (await anyio.connect_tcp("127.0.0.1", http.port)).aclose()
        except OSError:
            still_listening = False
        return closed, still_listening, await tasks_left(before)

    closed, still_listening, left = run(scenario)
    assert closed == [True, True]
    assert not still_listening
    assert left == set()


def test_a_cancelled_server_ends_a_call_in_flight_and_leaves_no_task() -> None:
    """Cancelled while a client waits on a call whose body is still running (a response
    that never completes on its own): the body is cancelled, the client's call ends, and
    no task the server started, its app's lifespan (the SDK's session manager) included,
    is left on the loop."""
    running, stopped = anyio.Event(), []

    async def wait_for_ever() -> dict[str, Any]:
        running.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.append("the body was stopped")
        return {}

    table = {"wait_for_ever": {"fn": wait_for_ever, "effect": "read", "timeout": 3600,
                               "description": "Wait.", "args": {}, "returns": {}}}
    http = HttpOptions("127.0.0.1", free_port())
    url = f"http://127.0.0.1:{http.port}/mcp"

    async def call(ended: list[str]) -> None:
        try:
            async with Client(streamable_http_client(url)) as session:
                await session.call_tool("wait_for_ever", {})
            ended.append("answered")
        except Exception as exc:  # the server went away under the call: what a client sees
            ended.append(type(exc).__name__)

    async def scenario() -> tuple[list[str], set[str]]:
        before = asyncio.all_tasks()
        ended: list[str] = []
        async with anyio.create_task_group() as clients:
            async with anyio.create_task_group() as group:  # the server's
                group.start_soon(aserve_http, server(Gate(table)), http)
                await listening(http.port)
                clients.start_soon(call, ended)
                await running.wait()
                group.cancel_scope.cancel()
            with anyio.fail_after(10):
                while not ended:
                    await anyio.sleep(0.05)
        return ended, await tasks_left(before)

    ended, left = run(scenario)
    assert len(ended) == 1  # the call ended (the SDK client raises: the server is gone)
    assert ended != ["answered"]
    assert stopped == ["the body was stopped"]
    assert left == set()
