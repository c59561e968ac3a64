"""The pytest side of the real servers: skip when they are not installed, fail in CI.

Use the ``thirdparty_server`` fixture (a conftest makes it visible with
``from thirdparty.fixture import thirdparty_server``), or call
``sandboxed_server`` directly. As for PostgreSQL (tests/_pg.py), a missing
server skips the test saying how to install it, and under ``CI=true`` fails
it, so a CI run never passes without the real servers.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from thirdparty.servers import HOW_TO_INSTALL, SERVERS, TS_SDK, installed, sandboxed

Started = tuple[list[str], dict[str, str], Path]


def require(what: str, present: bool) -> None:
    """Skip the test (fail it under CI) when a third-party piece is not installed."""
    if present:
        return
    problem = f"{what} is not installed: run `{HOW_TO_INSTALL}`"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{problem} (CI must run the real-server tests)")
    pytest.skip(problem)


def require_ts_sdk() -> Path:
    """The TypeScript SDK's package folder (for a Node client); skips/fails as ``require``."""
    require("the MCP TypeScript SDK (npm)", (TS_SDK / "package.json").is_file())
    return TS_SDK


def sandboxed_server(name: str, tmp_path: Path) -> Started:
    """``(argv, env, cwd)`` for the named server in a fresh sandbox under ``tmp_path``."""
    server = SERVERS[name]
    require(f"the real MCP server {name!r} ({server.registry})", installed(server))
    return sandboxed(server, tmp_path / name)


@pytest.fixture
def thirdparty_server(tmp_path: Path) -> Callable[[str], Started]:
    """A function from a server's name to ``(argv, env, cwd)`` in a sandbox of its own."""
    return lambda name: sandboxed_server(name, tmp_path)
