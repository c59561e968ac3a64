"""Serving over stdio in process: ``aserve_stdio`` on the proxy's own line reader and writer.

``agtool mcp proxy`` reads its client's lines and writes its answers with
``stdio_lines``: on pipes, by the event loop itself (``_PipeLines``,
``_PipeOutput``); on anything else, with ``_Lines`` (a daemon thread, so a lost
upstream never waits for the client's next line) and ``_Output`` (queued, flushed
by a thread of its own). Here each runs over real pipes in the test's process, in
front of a gated table, with raw JSON-RPC lines as a client sends them;
``tests/mcp/test_proxy_faults.py`` runs them inside a proxy subprocess.
"""

from __future__ import annotations

import io
import json
import os
import threading
from typing import Any

import anyio
import pytest
from _bounded import run

from agtool import Gate
from agtool.mcp import aserve_stdio, server
from agtool.mcp._stdio import LINE_LIMIT, _Lines, _Output, _PipeLines, _PipeOutput, stdio_lines


def handshake_and(*requests: dict[str, Any]) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    return lines + [{"jsonrpc": "2.0", "id": index, **request}
                    for index, request in enumerate(requests, start=1)]


def served_over_pipes(gate: Gate, requests: list[dict[str, Any]], *, on_loop: bool = False
                      ) -> list[dict[str, Any]]:
    """Each answer ``aserve_stdio`` writes, read back from its stdout pipe before the next
    request is sent; the client's stdin is closed at the end, which ends the server.

    With ``on_loop``, the reader and writer are ``stdio_lines``' own on the pipes (the
    event loop's), else ``_Lines`` and ``_Output`` (the threads)."""
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    # The descriptors are this test's to close (fd 0 and 1 are never closed by the proxy).
    lines = _Lines(open(in_read, encoding="utf-8", closefd=False))  # noqa: SIM115
    output = _Output(open(out_write, "w", encoding="utf-8", closefd=False))  # noqa: SIM115
    closed: list[int] = []

    async def serve() -> None:
        if not on_loop:
            await aserve_stdio(server(gate), lines, output)
            return
        try:
            async with stdio_lines(in_read, out_write) as (loop_lines, loop_output):
                assert isinstance(loop_lines, _PipeLines)
                assert isinstance(loop_output, _PipeOutput)
                await aserve_stdio(server(gate), loop_lines, loop_output)
        finally:
            # A server that stopped early (its lines ended) ends both pipes: a request being
            # sent then breaks, and a reply awaited reads the end, failing the test instead
            # of waiting for ever.
            os.close(out_write)
            os.close(in_read)
            closed.extend((out_write, in_read))

    async def scenario() -> list[dict[str, Any]]:
        answers: list[dict[str, Any]] = []
        with open(out_read, encoding="utf-8") as replies, open(in_write, "w") as client:
            async with anyio.create_task_group() as group:
                group.start_soon(serve)
                for request in requests:
                    def send(line: str = json.dumps(request) + "\n") -> None:
                        client.write(line)
                        client.flush()
                    # From a thread: a line longer than the pipe holds is read by the server
                    # on this very loop, which a write blocking here would never let run.
                    await anyio.to_thread.run_sync(send)
                    if "id" in request:
                        answers.append(json.loads(
                            await anyio.to_thread.run_sync(replies.readline)))
                client.close()  # the client leaves: the reader ends, and the server with it
        return answers

    try:
        answers: list[dict[str, Any]] = run(scenario)
    finally:
        output.close(5)
        if lines._receive is not None:
            lines._receive.close()
        for fd in {in_read, out_write} - set(closed):
            os.close(fd)
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


@pytest.mark.parametrize("on_loop", [False, True], ids=["threads", "event loop"])
def test_a_gated_table_answers_over_the_line_reader_and_writer(on_loop: bool) -> None:
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
        {"method": "tools/call", "params": {"name": "nope", "arguments": {}}}), on_loop=on_loop)
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


def test_on_the_loop_a_line_far_longer_than_asyncio_default_limit_arrives_whole() -> None:
    """asyncio's readline stops at 64 KiB by default; a tool's argument may be larger."""
    def echo(text: str) -> dict[str, Any]:
        return {"length": len(text)}

    gate = Gate({"echo": {"fn": echo, "args": {"text": {"type": "str"}},
                          "returns": {"length": {"type": "int"}}}})
    text = "é" * (3 * 2**20)  # 6 MiB of UTF-8 on the line, two bytes a character
    answers = served_over_pipes(gate, handshake_and(
        {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}}}),
        on_loop=True)
    assert answers[1]["result"]["structuredContent"] == {"length": len(text)}
    assert len(json.dumps(text)) < LINE_LIMIT


def test_on_the_loop_every_answer_written_before_the_block_ends_reaches_the_client() -> None:
    """Far more than a pipe holds, written without a wait: the transport keeps what the pipe
    cannot take yet, and the end of the block waits until it is all written."""
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    received: list[bytes] = []
    drain = threading.Thread(target=lambda: received.extend(iter(
        lambda: os.read(out_read, 1 << 16), b"")))
    messages = [f'{{"n": {index}, "pad": "{"x" * 1000}"}}\n' for index in range(2000)]

    async def scenario() -> None:
        async with stdio_lines(in_read, out_write, timeout=60) as (_, output):
            for message in messages:
                await output.write(message)
            drain.start()  # the client reads only once ~2 MB wait in the proxy

    try:
        run(scenario)
        os.close(out_write)
        drain.join(60)
    finally:
        for fd in (in_read, in_write, out_read):
            os.close(fd)
    assert b"".join(received).decode() == "".join(messages)


def test_on_the_loop_a_client_gone_away_breaks_nothing() -> None:
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    os.close(out_read)  # the client closed its end

    async def scenario() -> None:
        async with stdio_lines(in_read, out_write) as (_, output):
            for _ in range(10):  # asyncio warns from the fifth write to a lost pipe on
                await output.write("lost\n")
                await output.flush()

    try:
        run(scenario)
    finally:
        for fd in (in_read, in_write, out_write):
            os.close(fd)


def test_on_the_loop_a_reader_waiting_for_a_line_is_cancelled_at_once() -> None:
    """The thread reader cannot be cancelled; the loop's can: a proxy whose upstream is
    lost for good exits without its client's next line."""
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    reached: list[str] = []

    async def scenario() -> None:
        async with stdio_lines(in_read, out_write) as (lines, _), \
                anyio.create_task_group() as group:
            async def read() -> None:
                async for line in lines:
                    reached.append(line)

            group.start_soon(read)
            await anyio.wait_all_tasks_blocked()
            group.cancel_scope.cancel()

    try:
        run(scenario, seconds=30)
    finally:
        for fd in (in_read, in_write, out_read, out_write):
            os.close(fd)
    assert reached == []


def test_blocking_modes_come_back_and_no_descriptor_is_closed() -> None:
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()

    async def scenario() -> None:
        async with stdio_lines(in_read, out_write) as (lines, output):
            assert not os.get_blocking(in_read)
            assert not os.get_blocking(out_write)
            await output.write("one\n")
            os.write(in_write, b"two\n")
            assert await lines.__anext__() == "two\n"

    try:
        run(scenario)
        assert os.get_blocking(in_read)
        assert os.get_blocking(out_write)
        assert os.read(out_read, 100) == b"one\n"  # out_write is still open: written to
        os.write(in_write, b"three\n")
        assert os.read(in_read, 100) == b"three\n"
    finally:
        for fd in (in_read, in_write, out_read, out_write):
            os.close(fd)


def test_a_file_or_a_terminal_is_read_and_written_by_the_threads(tmp_path: Any) -> None:
    """Only pipes and sockets are the loop's: a terminal made non-blocking would be so for
    the shell that shares it too, and a regular file cannot be watched."""
    source = tmp_path / "lines"
    source.write_text("one\ntwo\n")
    out_read, out_write = os.pipe()
    with open(source) as stdin:
        async def scenario() -> list[str]:
            async with stdio_lines(stdin.fileno(), out_write) as (lines, output):
                assert isinstance(lines, _Lines)
                assert isinstance(output, _Output)
                try:
                    return [line async for line in lines]
                finally:
                    lines._receive.close()

        try:
            assert run(scenario) == ["one\n", "two\n"]
        finally:
            os.close(out_read)
            os.close(out_write)
