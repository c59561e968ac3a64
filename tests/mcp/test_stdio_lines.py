"""Serving over stdio in process: ``aserve_stdio`` on the proxy's own line reader and writer.

``agtool mcp proxy`` reads its client's lines with ``_Lines`` (a daemon thread, so a
lost upstream never waits for the client's next line) and writes its answers with
``_Output`` (queued, flushed by a thread of its own). Here both run over real pipes in
the test's process, in front of a gated table, with raw JSON-RPC lines as a client
sends them; ``tests/mcp/test_proxy_faults.py`` runs them inside a proxy subprocess.
"""

from __future__ import annotations

import io
import json
import os
import threading
from typing import Any

import anyio
from _bounded import run

from agtool import Gate
from agtool.mcp import aserve_stdio, server
from agtool.mcp._proxy import _Lines, _Output


def handshake_and(*requests: dict[str, Any]) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    return lines + [{"jsonrpc": "2.0", "id": index, **request}
                    for index, request in enumerate(requests, start=1)]


def served_over_pipes(gate: Gate, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each answer ``aserve_stdio`` writes, read back from its stdout pipe before the next
    request is sent; the client's stdin is closed at the end, which ends the server."""
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    # The descriptors are this test's to close (fd 0 and 1 are never closed by the proxy).
    lines = _Lines(open(in_read, encoding="utf-8", closefd=False))  # noqa: SIM115
    output = _Output(open(out_write, "w", encoding="utf-8", closefd=False))  # noqa: SIM115

    async def scenario() -> list[dict[str, Any]]:
        answers: list[dict[str, Any]] = []
        with open(out_read, encoding="utf-8") as replies, open(in_write, "w") as client:
            async with anyio.create_task_group() as group:
                group.start_soon(aserve_stdio, server(gate), lines, output)
                for request in requests:
                    client.write(json.dumps(request) + "\n")
                    client.flush()
                    if "id" in request:
                        answers.append(json.loads(
                            await anyio.to_thread.run_sync(replies.readline)))
                client.close()  # the client leaves: the reader ends, and the server with it
        return answers

    try:
        answers: list[dict[str, Any]] = run(scenario)
    finally:
        output.close(5)
        lines._receive.close()
        os.close(in_read)
        os.close(out_write)
    return answers


def read_all(lines: _Lines) -> list[str]:
    """Every line ``lines`` gives, to its end; its stream then closed (the proxy's ends with
    the process)."""
    async def scenario() -> list[str]:
        try:
            return [line async for line in lines]
        finally:
            lines._receive.close()
    read: list[str] = run(scenario)
    return read


def test_a_gated_table_answers_over_the_line_reader_and_writer() -> None:
    """One JSON message a line each way; a write retried in the same named run, step and
    business key runs once and is replayed; an unknown tool is refused, not run."""
    sent: list[str] = []

    def send_sms(to: str, text: str) -> dict[str, Any]:
        sent.append(to)
        return {"sent": len(sent)}

    gate = Gate({"send_sms": {"fn": send_sms, "effect": "write", "risk": "reversible_write",
                              "args": {"to": {"type": "str"}, "text": {"type": "str"}},
                              "returns": {"sent": {"type": "int"}}}},
                scope={"read_public", "reversible_write"})
    call = {"method": "tools/call", "params": {
        "name": "send_sms", "arguments": {"to": "+8210", "text": "hi"},
        "_meta": {"agtool/run_id": "r", "agtool/step_id": "s"}}}
    answers = served_over_pipes(gate, handshake_and(
        {"method": "tools/list"}, call, call,
        {"method": "tools/call", "params": {"name": "nope", "arguments": {}}}))
    assert [answer["id"] for answer in answers] == [0, 1, 2, 3, 4]
    assert [tool["name"] for tool in answers[1]["result"]["tools"]] == ["send_sms"]
    assert answers[2]["result"]["structuredContent"] == {"sent": 1}
    assert answers[3]["result"]["structuredContent"] == {"sent": 1}
    assert answers[4]["result"]["isError"] is True
    assert sent == ["+8210"]


def test_the_line_reader_ends_at_the_end_of_its_stream_and_keeps_each_line_whole() -> None:
    assert read_all(_Lines(io.StringIO("one\ntwo\nthree"))) == ["one\n", "two\n", "three"]


def test_a_line_reader_whose_stream_breaks_ends_its_lines() -> None:
    class Broken:
        def readline(self) -> str:
            raise OSError("stdin broke")

    assert read_all(_Lines(Broken())) == []


def test_the_writer_writes_what_is_queued_before_it_stops() -> None:
    stream = io.StringIO()
    output = _Output(stream)

    async def scenario() -> None:
        for index in range(100):
            await output.write(f"{index}\n")
        await output.flush()

    run(scenario)
    output.close(5)
    assert stream.getvalue() == "".join(f"{index}\n" for index in range(100))


def test_a_writer_whose_client_went_away_stops_quietly() -> None:
    """The client closed its end: the write fails, the thread ends, nothing is raised."""
    read, write = os.pipe()
    os.close(read)
    output = _Output(open(write, "w", encoding="utf-8", closefd=False))  # noqa: SIM115
    errors: list[BaseException] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)  # type: ignore[assignment]
    try:
        run(lambda: output.write("lost\n"))
        output.close(5)
    finally:
        threading.excepthook = previous
        os.close(write)
    assert not output._thread.is_alive()
    assert errors == []
