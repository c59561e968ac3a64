"""Loopback ports for the tests that start a real HTTP server in a subprocess."""

from __future__ import annotations

import socket
import subprocess
import time


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
