"""The proxy's own stdio: its client's lines in, its answers out, never blocking its loop.

The SDK's ``stdio_server`` reads fd 0 and writes fd 1 through worker threads,
waiting for one per line read and two per message written (write, flush), and
its reader cannot be cancelled: a proxy whose upstream is lost for good would
wait for its client's next line before it could exit. ``stdio_lines`` gives
``aserve_stdio`` a reader and a writer of its own instead:

- where fd 0 and fd 1 are pipes or sockets (as an MCP client starts a
  server) and the loop is asyncio's, the event loop itself reads and writes
  them (``_PipeLines``, ``_PipeOutput``): no thread, so no wake-up and no turn
  of the GIL per message, which measured about a tenth of the proxy's
  throughput (``bench/bench_proxy.py``);
- elsewhere (a terminal, a file, another event loop), ``_Lines`` reads in a
  daemon thread of its own and ``_Output`` writes in another.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import queue
import stat
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel

from .._run import loop_running

__all__ = ["stdin_lines", "stdio_lines", "stdout_lines"]


class _Lines:
    """Lines of stdin for ``stdio_server``, read by a daemon thread of their own.

    The SDK's reader waits for each line in a worker thread that cannot be
    cancelled, nor left behind at exit: a proxy whose upstream is lost for good
    would wait for its client's next line before it could exit.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._receive: Any = None

    def __aiter__(self) -> _Lines:
        send, self._receive = anyio.create_memory_object_stream[str](math.inf)
        hand_over = _handing_over()

        def read() -> None:
            try:
                for line in iter(self._stream.readline, ""):
                    hand_over(send.send_nowait, line)
            except Exception:  # noqa: S110 - the loop is gone, or stdin broke: the lines end
                pass
            finally:
                with contextlib.suppress(Exception):
                    hand_over(send.close)

        threading.Thread(target=read, name="agtool-stdin", daemon=True).start()
        return self

    async def __anext__(self) -> str:
        try:
            line: str = await self._receive.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None
        return line


def _handing_over() -> Callable[..., object]:
    """How a thread hands a call to this event loop: without waiting for it where it can."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # another event loop (trio): anyio's round trip
        token = anyio.lowlevel.current_token()
        return lambda function, *args: anyio.from_thread.run_sync(function, *args, token=token)
    return loop.call_soon_threadsafe


def stdin_lines(fd: int = 0) -> Any:
    """The lines of ``fd`` (this process's stdin) as ``_Lines``; it is read, never closed."""
    return _Lines(open(fd, encoding="utf-8", errors="replace", closefd=False))


class _PipeLines:
    """Lines of a pipe or socket, read by the event loop itself: cancelled with the loop."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _PipeLines:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self._reader.readline()
        except (OSError, ValueError):  # stdin broke: the lines end, as _Lines's do
            line = b""
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _PipeOutput:
    """Answers written to a pipe or socket by the event loop at once; what the pipe cannot
    take yet is kept by the transport and written as soon as it can, never waited on."""

    def __init__(self, transport: asyncio.WriteTransport, closed: asyncio.Future[None]) -> None:
        self._transport = transport
        self._closed = closed

    async def write(self, text: str) -> None:
        if not self._transport.is_closing():  # the client went away: nothing can reach it
            self._transport.write(text.encode("utf-8"))

    async def flush(self) -> None:
        """Nothing to wait for: the transport writes the rest when the pipe takes it."""

    async def aclose(self, timeout: float) -> None:
        """Write what is kept (waiting at most ``timeout`` seconds), then stop."""
        self._transport.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._closed), timeout)


class _Closing(asyncio.Protocol):
    """Tells when the writing transport is done: all written, or the pipe broke."""

    def __init__(self) -> None:
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


#: The longest line read: a tool's answer or arguments may be large (the thread reader has
#: no bound either), where asyncio's default of 64 KiB would end the client's lines.
LINE_LIMIT = 2**31


def _is_pipe(fd: int) -> bool:
    """A pipe or a socket: what the loop can watch. A terminal is left to the threads, since
    making it non-blocking would make it so for the shell that shares it too."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextlib.asynccontextmanager
async def stdio_lines(stdin: int = 0, stdout: int = 1, timeout: float = 2.0
                      ) -> AsyncIterator[tuple[Any, Any]]:
    """The client's lines on ``stdin`` and a writer of answers to ``stdout``, for
    ``aserve_stdio``: read and written by the event loop where both are pipes or sockets
    and the loop is asyncio's, else by ``_Lines``' and ``_Output``'s threads.

    Neither descriptor is closed; each gets its blocking mode back, and what is
    still to be written is written (waiting at most ``timeout`` seconds) when
    the block ends.
    """
    if not (loop_running() and _is_pipe(stdin) and _is_pipe(stdout)):
        with stdout_lines(timeout, stdout) as threaded:
            yield stdin_lines(stdin), threaded
        return
    loop = asyncio.get_running_loop()
    blocking = {fd: os.get_blocking(fd) for fd in (stdin, stdout)}
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    reading, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader),
        open(stdin, "rb", buffering=0, closefd=False))  # noqa: SIM115 - the transport's
    try:
        writing, protocol = await loop.connect_write_pipe(
            _Closing, open(stdout, "wb", buffering=0, closefd=False))  # noqa: SIM115
        output = _PipeOutput(writing, protocol.closed)
        try:
            yield _PipeLines(reader), output
        finally:
            await output.aclose(timeout)
    finally:
        reading.close()
        for fd, was in blocking.items():
            with contextlib.suppress(OSError):
                os.set_blocking(fd, was)


class _Output:
    """stdout for ``stdio_server``: each message handed to a daemon thread, never waited on.

    The SDK's writer waits for a worker thread twice per message (write, flush):
    a proxy pays that on every answer. Here the event loop only queues the text;
    the thread writes it, and flushes whenever nothing else is waiting.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._write_all, name="agtool-stdout",
                                        daemon=True)
        self._thread.start()

    async def write(self, text: str) -> None:
        self._queue.put(text)

    async def flush(self) -> None:
        """Nothing to wait for: the thread flushes as soon as its queue is empty."""

    def _write_all(self) -> None:
        try:
            while (text := self._queue.get()) is not None:
                self._stream.write(text)
                if self._queue.empty():
                    self._stream.flush()
        except (OSError, ValueError):  # the client closed its end: nothing more can reach it
            return

    def close(self, timeout: float) -> None:
        """Write what is queued (waiting at most ``timeout`` seconds), then stop."""
        self._queue.put(None)
        self._thread.join(timeout)


@contextlib.contextmanager
def stdout_lines(timeout: float = 2.0, fd: int = 1) -> Iterator[_Output]:
    """``fd`` (this process's stdout) as ``_Output``, flushed when the block ends; it is
    never closed."""
    output = _Output(open(fd, "w", encoding="utf-8", closefd=False))  # noqa: SIM115
    try:
        yield output
    finally:
        output.close(timeout)
