"""`agtool mcp proxy`, `pin` and `serve` run in process: refused starts, exit statuses, pins.

``main(argv)`` runs in the test's own process, so coverage follows it; the upstream
servers behind it are real subprocesses (``tests/_fault_server.py``). A refused start
must refuse before anything starts: the upstream given is a command that leaves a mark
when it runs, and the mark is looked for. The serving itself, over stdio, is
driven as a subprocess in ``tests/mcp/test_proxy_faults.py`` and ``test_mcp.py``.
"""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from _bounded import run
from _ports import free_port

import agtool.mcp  # imported here, not first under a test's capture (see below)
from agtool._cli import main

ROOT = Path(__file__).resolve().parents[2]
FAULT = [sys.executable, str(ROOT / "tests" / "_fault_server.py")]
FIXTURE_TABLE = "tests.fixtures.mcp_table:TOOLS"
# The SDK's stdio client takes `sys.stderr` as it was when `mcp` was first imported as the
# upstream's stderr: imported under one test's capture, a later test's upstream would write
# to that closed stream and fail to start.


@pytest.fixture(autouse=True)
def agtool_logger() -> Iterator[None]:
    """The command points the `agtool` logger at stderr, as a process would: undone after."""
    logger = logging.getLogger("agtool")
    handlers, level = list(logger.handlers), logger.level
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)


@pytest.fixture
def marking(tmp_path: Path) -> tuple[list[str], Path]:
    """An upstream command that leaves a file behind if it is ever started."""
    mark = tmp_path / "started"
    return [sys.executable, "-c", f"open({str(mark)!r}, 'w')"], mark


def agtool(capfd: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capfd.readouterr()
    return status, out, err


@pytest.mark.parametrize(("options", "said"), [
    pytest.param(["--effect", "note"], "--effect 'note': expected NAME=VALUE", id="effect"),
    pytest.param(["--sensitive", "note"], "--sensitive 'note': expected NAME.VALUE",
                 id="sensitive"),
    pytest.param(["--sensitive", ".text"], "expected NAME.VALUE", id="sensitive-no-tool"),
    pytest.param(["--memo", "whoami=soon"], "--memo ...=soon: expected a positive number",
                 id="memo-not-a-number"),
    pytest.param(["--memo", "whoami=0"], "expected a positive number of seconds",
                 id="memo-zero"),
    pytest.param(["--memo", "whoami=inf"], "expected a positive number of seconds",
                 id="memo-infinite"),
    pytest.param(["--rate", "note=ten/1"], "--rate 'note=ten/1': expected NAME=N/SECONDS",
                 id="rate"),
    pytest.param(["--http", "--host", "192.0.2.7"], "--host 192.0.2.7 is not loopback",
                 id="off-loopback"),
    pytest.param(["--http", "--token-env", "AGTOOL_TEST_UNSET_TOKEN"],
                 "--token-env AGTOOL_TEST_UNSET_TOKEN: the environment variable is unset",
                 id="unset-token"),
])
def test_a_proxy_with_a_malformed_option_exits_2_before_its_upstream_starts(
        capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        marking: tuple[list[str], Path], options: list[str], said: str) -> None:
    monkeypatch.delenv("AGTOOL_TEST_UNSET_TOKEN", raising=False)
    command, mark = marking
    status, out, err = agtool(capfd, "mcp", "proxy", *options, "--", *command)
    assert status == 2
    assert said in err
    assert err.startswith("agtool mcp: ")
    assert err.count("\n") == 1
    assert out == ""
    assert not mark.exists()


@pytest.mark.parametrize("command", ["proxy", "pin"])
@pytest.mark.parametrize("upstream", [
    pytest.param([], id="neither"),
    pytest.param(["--url", "http://127.0.0.1:1/mcp", "--", "python"], id="both"),
    pytest.param(["--env", "AGTOOL_SECRET", "--", "python"], id="the-secret"),
])
def test_an_upstream_must_be_one_command_or_one_url_and_never_get_the_secret(
        capfd: pytest.CaptureFixture[str], tmp_path: Path, command: str,
        upstream: list[str]) -> None:
    pins = ["--pins", str(tmp_path / "pins.json")] if command == "pin" else []
    status, _, err = agtool(capfd, "mcp", command, *pins, *upstream)
    assert status == 2
    assert err.startswith("agtool mcp: ")
    assert err.count("\n") == 1
    assert not (tmp_path / "pins.json").exists()


@pytest.mark.parametrize("flag", [["--restarts", "-1"], ["--timeout", "0"], ["--timeout", "nan"],
                                  ["--port", "70000"]])
def test_a_number_out_of_range_is_a_usage_error(capfd: pytest.CaptureFixture[str],
                                                flag: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["mcp", "proxy", *flag, "--", "python"])
    assert exited.value.code == 2
    assert flag[1] in capfd.readouterr().err


def test_a_proxy_whose_upstream_does_not_start_exits_2_saying_so(
        capfd: pytest.CaptureFixture[str]) -> None:
    status, out, err = agtool(capfd, "mcp", "proxy", "--restarts", "0", "--", sys.executable,
                              "-c", "import sys; sys.exit(4)")
    assert status == 2
    assert "did not start as an MCP server (MCPError: Connection closed)" in err
    assert out == ""


def test_a_proxy_naming_a_tool_its_upstream_lacks_exits_2_naming_it(
        capfd: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--memo` (and every option naming a tool) is checked against the first listing."""
    monkeypatch.setenv("FAULT_RUNS", str(tmp_path / "runs.jsonl"))
    status, _, err = agtool(capfd, "mcp", "proxy", "--env", "FAULT_RUNS", "--memo",
                            "whoami=5", "--memo", "weather=5", "--records",
                            str(tmp_path / "records.jsonl"), "--", *FAULT)
    assert status == 2
    assert "'weather'" in err
    assert "is named by --memo but the upstream server lists no such tool" in err
    assert not (tmp_path / "runs.jsonl").exists()  # nothing was called


def test_pin_writes_every_listed_tool_and_says_how_many(
        capfd: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAULT_RUNS", str(tmp_path / "runs.jsonl"))
    pins = tmp_path / "pins.json"
    pins.write_text('{"tools": {"gone": "an old pin"}}')
    status, out, err = agtool(capfd, "mcp", "pin", "--pins", str(pins), "--", *FAULT)
    assert status == 0, err
    assert out == ""
    assert f"agtool mcp pin: 4 tools pinned in {pins}" in err
    assert sorted(json.loads(pins.read_text())["tools"]) == ["grow", "note", "retitle",
                                                             "whoami"]


def test_pin_into_a_file_that_cannot_be_written_exits_2(
        capfd: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAULT_RUNS", str(tmp_path / "runs.jsonl"))
    pins = tmp_path / "no-such-folder" / "pins.json"
    status, _, err = agtool(capfd, "mcp", "pin", "--pins", str(pins), "--", *FAULT)
    assert status == 2
    assert f"--pins {pins}: [Errno 2] No such file or directory" in err
    assert not pins.exists()


def test_pin_with_an_upstream_that_does_not_start_blames_the_upstream_not_the_pins(
        capfd: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pins = tmp_path / "pins.json"
    status, _, err = agtool(capfd, "mcp", "pin", "--pins", str(pins), "--", sys.executable,
                            "-c", "import sys; sys.exit(4)")
    assert status == 2
    assert "did not start as an MCP server" in err
    assert "--pins" not in err


def test_serve_with_a_store_that_cannot_be_opened_exits_2(
        capfd: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    store = tmp_path / "no-such-folder" / "writes.db"
    status, _, err = agtool(capfd, "mcp", "serve", "--table", FIXTURE_TABLE, "--store",
                            str(store))
    assert status == 2
    assert f"agtool mcp: --store {store}: " in err


def test_serve_refuses_on_loop_for_a_tool_its_table_lacks(
        capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="on_loop names 'weather'"):
        main(["mcp", "serve", "--table", FIXTURE_TABLE, "--on-loop", "weather"])


def test_serve_over_http_answers_with_a_token_and_ends_with_status_0_on_sigterm(
        capfd: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`agtool mcp serve --http` in this process: a client with the token gets its write
    run and recorded; SIGTERM shuts the server down and the command returns 0, the signal
    handed on to the handler that was there before."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from sse_starlette.sse import AppStatus

    port, token = free_port(), "k" * 24
    runs, records = tmp_path / "runs.txt", tmp_path / "records.jsonl"
    monkeypatch.setenv("AGTOOL_TEST_TOKEN", token)
    monkeypatch.setenv("AGTOOL_TEST_RUNS", str(runs))
    answers: list[Any] = []

    def client() -> None:
        async def call() -> None:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
                    Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp",
                                                  http_client=http)) as session:
                answers.append(await session.call_tool(
                    "send_sms", {"to": "+8210", "text": "hi"}))
        try:
            wait_until_listening(port)
            run(call)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)

    handed_on: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda number, frame: handed_on.append(number))
    visitor = threading.Thread(target=client)
    try:
        visitor.start()
        status = main(["mcp", "serve", "--table", FIXTURE_TABLE, "--http", "--port", str(port),
                       "--token-env", "AGTOOL_TEST_TOKEN", "--scope", "read_public", "--scope",
                       "reversible_write", "--records", str(records)])
        visitor.join(60)
    finally:
        signal.signal(signal.SIGTERM, previous)
        AppStatus.should_exit = False  # see tests/mcp/test_http_door.py's `serving`
    assert status == 0
    assert handed_on == [signal.SIGTERM]
    assert [answer.is_error for answer in answers] == [False]
    assert runs.read_text().splitlines() == ["send_sms"]
    assert [json.loads(line)["tool"] for line in records.read_text().splitlines()] == [
        "send_sms"]


def wait_until_listening(port: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listened on port {port}"
            time.sleep(0.05)


def test_a_reader_that_closed_the_pipe_ends_the_command_with_141_quietly(
        capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`agtool export | head -1` in process: the write meets a closed pipe; no traceback."""
    class ClosedPipe(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    status = main(["export", "--format", "mcp"])
    monkeypatch.undo()
    assert status == 141
    assert capfd.readouterr().err == ""
