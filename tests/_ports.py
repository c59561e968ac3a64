"""Loopback ports for the tests that start a real HTTP server, in a subprocess or in process."""

from __future__ import annotations

import socket
import subprocess
import time

import anyio
from anyio.abc import SocketStream


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], seconds: float) -> None:
    """Return once ``process`` listens on ``port``; fail if it exits or ``seconds`` pass first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listened on port {port} within {seconds} s")


async def connected(port: int) -> SocketStream:
    """A connection to loopback ``port``, once something listens there (an in-process
    server starting in the same event loop; the scenario's own bound ends a wait that
    never ends)."""
    while True:
        try:
            return await anyio.connect_tcp("127.0.0.1", port)
        except OSError:
            await anyio.sleep(0.05)


async def listening(port: int) -> None:
    """Return once something listens on loopback ``port``."""
    await (await connected(port)).aclose()
