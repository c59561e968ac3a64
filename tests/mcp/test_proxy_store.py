"""`agtool mcp proxy --http --store FILE`: a write waiting on its store stalls no other client.

A real proxy subprocess in front of ``tests/_fault_server.py``, its write store a SQLite
file the test locks (``BEGIN EXCLUSIVE`` on a connection of its own), so that a write's
claim waits on SQLite's busy timeout. Two clients, each on a connection of its own: one
writes, the other reads while the write waits.
"""

from __future__ import annotations

import json
import os
import sqlite3
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

ROOT = Path(__file__).resolve().parents[2]
FAULT = str(ROOT / "tests" / "_fault_server.py")
SCENARIO_TIMEOUT = 90

pytestmark = pytest.mark.slow


class Proxy:
    """One `agtool mcp proxy --http --store FILE` process in front of the fault server."""

    def __init__(self, tmp_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.store = tmp_path / "store.db"
        self.runs = tmp_path / "runs.jsonl"
        self.process = subprocess.Popen(  # noqa: S603 - this repository's own CLI
            [sys.executable, "-m", "agtool._cli", "mcp", "proxy", "--http", "--port",
             str(self.port), "--store", str(self.store), "--scope", "read_public", "--scope",
             "reversible_write", "--records", str(tmp_path / "records.jsonl"), "--env",
             "FAULT_RUNS", "--", sys.executable, FAULT],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "FAULT_RUNS": str(self.runs)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, self.process, SCENARIO_TIMEOUT)

    def upstream_calls(self) -> list[str]:
        lines = self.runs.read_text().splitlines() if self.runs.exists() else []
        return [json.loads(line)["tool"] for line in lines]

    def stop(self) -> None:
        self.process.terminate()
        self.process.communicate(timeout=SCENARIO_TIMEOUT)


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Proxy]:
    process = Proxy(tmp_path)
    try:
        yield process
    finally:
        process.stop()


async def _call(url: str, name: str, args: dict[str, Any], meta: dict[str, Any]) -> Any:
    async with httpx2.AsyncClient() as http, Client(
            streamable_http_client(url, http_client=http)) as session:
        return await session.call_tool(name, args, meta=meta)


def test_a_write_waiting_on_a_locked_store_does_not_stall_another_clients_read(
        proxy: Proxy) -> None:
    """Client A's write waits on the locked store; client B's reads are answered meanwhile,
    before A's; once the lock goes, A's write runs once and answers."""
    lock = sqlite3.connect(proxy.store, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    order: list[str] = []
    answers: dict[str, Any] = {}

    async def write() -> None:
        answers["write"] = await _call(proxy.url, "note", {"text": "x"},
                                       {"agtool/run_id": "a", "agtool/step_id": "1"})
        order.append("write")

    async def scenario() -> None:
        with anyio.fail_after(SCENARIO_TIMEOUT):
            await both()

    async def both() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(write)
            # Time for A's claim to reach the lock. Were it not there yet, B would be
            # answered first anyway: this wait can make the test prove less, never fail.
            await anyio.sleep(1.5)
            for nonce in ("b1", "b2"):
                answers[nonce] = await _call(proxy.url, "whoami", {"nonce": nonce}, {})
                order.append(nonce)
            pending = "write" not in answers
            calls_meanwhile = proxy.upstream_calls()
            lock.rollback()  # the store is free: A's claim goes through
        assert pending, order
        assert calls_meanwhile == ["whoami", "whoami"]  # the write had not run

    anyio.run(scenario)
    lock.close()
    assert order == ["b1", "b2", "write"]
    assert not answers["b1"].is_error
    assert not answers["b2"].is_error
    assert not answers["write"].is_error, answers["write"]
    assert answers["write"].structured_content == {"noted": "x"}
    assert proxy.upstream_calls().count("note") == 1
