"""`agtool mcp serve --http` as a real subprocess: runs per client, tokens, Origin, binding.

Clients are the SDK's default ``Client`` (protocol 2026-07-28: no sessions), each
with its own HTTP connection, as two independent agents would be.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from _ports import free_port, wait_for_port
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agtool._cli import main

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_TABLE = "tests.fixtures.mcp_table:TOOLS"
SCENARIO_TIMEOUT = 60
SMS = {"to": "+821012345678", "text": "Your refund was sent."}
TOKENS = {"AGTOOL_TEST_TOKEN_A": "a" * 24 + "-alpha", "AGTOOL_TEST_TOKEN_B": "b" * 24 + "-beta"}


class Served:
    """One `agtool mcp serve --http` process, and the file its write bodies append to."""

    def __init__(self, tmp_path: Path, *options: str) -> None:
        self.port = free_port()
        self.runs = tmp_path / "runs.txt"
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process = subprocess.Popen(  # noqa: S603 - this repository's own CLI
            [sys.executable, "-m", "agtool._cli", "mcp", "serve", "--table", FIXTURE_TABLE,
             "--http", "--port", str(self.port), "--scope", "read_public", "--scope",
             "reversible_write", "--records", str(tmp_path / "records.jsonl"), *options],
            cwd=ROOT, env={**os.environ, **TOKENS, "PYTHONPATH": str(ROOT),
                           "AGTOOL_TEST_RUNS": str(self.runs)},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for_port(self.port, self.process, SCENARIO_TIMEOUT)

    def ran(self) -> list[str]:
        return self.runs.read_text().splitlines() if self.runs.exists() else []

    def stop(self) -> None:
        self.process.terminate()
        self.process.communicate(timeout=SCENARIO_TIMEOUT)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    process = Served(tmp_path)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def served_with_tokens(tmp_path: Path) -> Iterator[Served]:
    process = Served(tmp_path, "--token-env", "AGTOOL_TEST_TOKEN_A", "--token-env",
                     "AGTOOL_TEST_TOKEN_B", "--allow-origin", "https://app.example")
    try:
        yield process
    finally:
        process.stop()


def run(scenario: Any) -> Any:
    async def bounded() -> Any:
        with anyio.fail_after(SCENARIO_TIMEOUT):
            return await scenario()

    return anyio.run(bounded)


async def send(url: str, meta: dict[str, Any] | None = None, token: str | None = None,
               times: int = 1) -> list[Any]:
    """``times`` calls of the write from the SDK's default client, on a connection of its own."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as http, Client(
            streamable_http_client(url, http_client=http)) as session:
        return [await session.call_tool("send_sms", SMS, meta=meta) for _ in range(times)]


@pytest.mark.slow
def test_two_independent_clients_making_the_same_write_both_run_it(served: Served) -> None:
    """No session, no run named: the second client is not told `replayed` with the first
    client's result; each write runs, each its own."""
    first = run(lambda: send(served.url))
    second = run(lambda: send(served.url))
    assert [first[0].structured_content, second[0].structured_content] == [{"sent": 1},
                                                                           {"sent": 2}]
    assert served.ran() == ["send_sms", "send_sms"]


@pytest.mark.slow
def test_a_run_id_a_client_chooses_is_its_own(served: Served) -> None:
    """Two clients naming the same `_meta["agtool/run_id"]` never share a key: each runs its
    write once; a retry on the same client, in the same run, replays."""
    meta = {"agtool/run_id": "run-1"}
    first = run(lambda: send(served.url, meta, times=2))
    second = run(lambda: send(served.url, meta))
    assert [answer.structured_content for answer in first] == [{"sent": 1}, {"sent": 1}]
    assert second[0].structured_content == {"sent": 2}
    assert served.ran() == ["send_sms", "send_sms"]


@pytest.mark.slow
def test_bearer_tokens_name_the_client_and_keep_its_runs_apart(
        served_with_tokens: Served) -> None:
    """Each --token-env is one client: the same run id under another token is another run,
    and under the same token, on a new connection, the same run (its retry replays)."""
    url, meta = served_with_tokens.url, {"agtool/run_id": "run-1"}
    alice, bob = TOKENS["AGTOOL_TEST_TOKEN_A"], TOKENS["AGTOOL_TEST_TOKEN_B"]
    by_alice = run(lambda: send(url, meta, alice))
    by_bob = run(lambda: send(url, meta, bob))
    alice_again = run(lambda: send(url, meta, alice))  # a new connection, the same client
    assert [by_alice[0].structured_content, by_bob[0].structured_content,
            alice_again[0].structured_content] == [{"sent": 1}, {"sent": 2}, {"sent": 1}]
    assert served_with_tokens.ran() == ["send_sms", "send_sms"]


@pytest.mark.slow
@pytest.mark.parametrize(("headers", "status"), [
    pytest.param({}, 401, id="no-token"),
    pytest.param({"Authorization": "Bearer " + "a" * 30}, 401, id="wrong-token"),
    pytest.param({"Authorization": "Basic " + TOKENS["AGTOOL_TEST_TOKEN_A"]}, 401,
                 id="not-bearer"),
    pytest.param({"Authorization": "Bearer " + TOKENS["AGTOOL_TEST_TOKEN_A"],
                  "Origin": "https://evil.example"}, 403, id="foreign-origin"),
])
def test_the_door_refuses_before_any_mcp_message_is_read(served_with_tokens: Served,
                                                         headers: dict[str, str],
                                                         status: int) -> None:
    """A request without a valid bearer token is 401 (with WWW-Authenticate: Bearer), from
    an origin not allowed 403; the body, a write, never runs. An allowed origin passes."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "send_sms", "arguments": SMS}}
    answer = httpx2.post(served_with_tokens.url, json=body, headers=headers, timeout=30)
    assert answer.status_code == status
    if status == 401:
        assert answer.headers["www-authenticate"].startswith("Bearer ")
    allowed = run(lambda: send(served_with_tokens.url, None,
                               TOKENS["AGTOOL_TEST_TOKEN_A"]))
    assert allowed[0].structured_content == {"sent": 1}
    assert served_with_tokens.ran() == ["send_sms"]


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.7", "::", "example.com"])  # noqa: S104 - refused
def test_serving_off_loopback_without_a_token_is_refused(capsys: pytest.CaptureFixture[str],
                                                         host: str) -> None:
    """Bound to anything but loopback, `--http` will not start without --token-env."""
    argv = ["mcp", "serve", "--table", FIXTURE_TABLE, "--http", "--host", host]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--token-env" in err
    assert host in err
    assert err.count("\n") == 1


def test_a_token_variable_that_is_unset_or_short_is_refused(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """--token-env names a variable: unset, empty or under 16 bytes is a one-line error."""
    monkeypatch.delenv("AGTOOL_TEST_NO_TOKEN", raising=False)
    monkeypatch.setenv("AGTOOL_TEST_SHORT_TOKEN", "short")
    base = ["mcp", "serve", "--table", FIXTURE_TABLE, "--http", "--host", "0.0.0.0"]  # noqa: S104
    assert main([*base, "--token-env", "AGTOOL_TEST_NO_TOKEN"]) == 2
    assert "AGTOOL_TEST_NO_TOKEN" in capsys.readouterr().err
    assert main([*base, "--token-env", "AGTOOL_TEST_SHORT_TOKEN"]) == 2
    assert "shorter than 16 bytes" in capsys.readouterr().err
