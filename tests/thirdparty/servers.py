"""Real third-party MCP servers, and how to start one in a sandbox of temporary state.

The servers are the official ones from PyPI and npm, installed (pinned) by
``bash tests/thirdparty/install.sh`` into ``.thirdparty/`` at the repo root.
This module only describes them; it imports nothing from agtool, so tests,
benchmarks and other helpers can all use it.

A sandboxed server gets:
- its own state made fresh under ``tmp_path`` (files, a git repository, a
  database, a memory file), so nothing it does touches the machine;
- a scrubbed environment: ``PATH``, ``HOME`` (a temporary directory),
  ``LANG``, and only what that server needs; never the caller's secrets;
- a temporary working directory;
- its own network namespace (``unshare -n``) where the machine allows it.

The environment is returned, not baked into ``argv``: whoever starts the
server passes it on. That keeps a proxy's own handling of its upstream's
environment testable (a proxy that leaks ``AGTOOL_SECRET`` must be caught).
"""

from __future__ import annotations

import functools
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INSTALL_DIR = ROOT / ".thirdparty"
PYTHON_BIN = INSTALL_DIR / "py" / "bin"
SQLITE_BIN = INSTALL_DIR / "py-sqlite" / "bin"  # mcp 1.x: see install.sh
NPM_MODULES = INSTALL_DIR / "npm" / "node_modules"
NPM_BIN = NPM_MODULES / ".bin"
# The official TypeScript SDK, for tests that drive a server with its Node client. ES modules
# ignore NODE_PATH, so a script imports it by absolute path: f"{TS_SDK}/dist/esm/client/index.js".
TS_SDK = NPM_MODULES / "@modelcontextprotocol" / "sdk"
HOW_TO_INSTALL = "bash tests/thirdparty/install.sh"

# The few variables every server gets; anything else must be named by the server.
BASE_ENV = {"LANG": "C.UTF-8"}


@dataclass(frozen=True)
class Server:
    """One real server: where its executable lives and the state it runs on."""

    name: str
    registry: str  # "pypi" or "npm": which half of install.sh provides it
    executable: Path
    # Given the server's own (fresh, empty) state directory: make the state it
    # needs there and answer its extra arguments and environment.
    prepare: Callable[[Path], tuple[list[str], dict[str, str]]] = field(repr=False)


def _time_state(_state: Path) -> tuple[list[str], dict[str, str]]:
    # Fixed, so an answer never depends on the machine's time zone.
    return ["--local-timezone", "UTC"], {}


def _filesystem_state(state: Path) -> tuple[list[str], dict[str, str]]:
    root = state / "files"
    (root / "notes").mkdir(parents=True)
    (root / "hello.txt").write_text("hello from the sandbox\n")
    (root / "notes" / "todo.md").write_text("- read the contract\n- write the test\n")
    return [str(root)], {}


# Git sees only these: a caller's GIT_DIR (set inside git hooks, say) or global
# config must not reach the sandbox's repository.
def _git_env(home: Path) -> dict[str, str]:
    return {**BASE_ENV, "PATH": _sandbox_path(), "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def _git_state(state: Path) -> tuple[list[str], dict[str, str]]:
    repo = state / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("# sandbox repository\n")
    env = _git_env(state)
    ident = ["-c", "user.name=Sandbox", "-c", "user.email=sandbox@example.invalid"]
    for args in (["init", "-q", "-b", "main"], ["add", "README.md"],
                 [*ident, "commit", "-q", "-m", "first commit"]):
        subprocess.run(["git", *args], cwd=repo, env=env,  # noqa: S603, S607 - fixed git argv
                       check=True)
    # The server runs git too; the same isolation from the caller's config.
    return ["--repository", str(repo)], {"GIT_CONFIG_NOSYSTEM": "1",
                                         "GIT_CONFIG_GLOBAL": os.devnull}


def _sqlite_state(state: Path) -> tuple[list[str], dict[str, str]]:
    db = state / "db.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
        conn.executemany("INSERT INTO items (name) VALUES (?)", [("apple",), ("pear",)])
    conn.close()
    return ["--db-path", str(db)], {}


# One entity already in the graph, so a read has something real to find.
MEMORY_SEED = ('{"type":"entity","name":"sandbox","entityType":"place",'
               '"observations":["made by servers.py"]}\n')


def _memory_state(state: Path) -> tuple[list[str], dict[str, str]]:
    memory = state / "memory.jsonl"
    memory.write_text(MEMORY_SEED)
    return [], {"MEMORY_FILE_PATH": str(memory)}


def _everything_state(_state: Path) -> tuple[list[str], dict[str, str]]:
    return ["stdio"], {}


SERVERS: dict[str, Server] = {s.name: s for s in (
    Server("time", "pypi", PYTHON_BIN / "mcp-server-time", _time_state),
    Server("git", "pypi", PYTHON_BIN / "mcp-server-git", _git_state),
    Server("sqlite", "pypi", SQLITE_BIN / "mcp-server-sqlite", _sqlite_state),
    Server("filesystem", "npm", NPM_BIN / "mcp-server-filesystem", _filesystem_state),
    Server("memory", "npm", NPM_BIN / "mcp-server-memory", _memory_state),
    Server("everything", "npm", NPM_BIN / "mcp-server-everything", _everything_state),
)}


def installed(server: Server) -> bool:
    """Whether install.sh has put the server's executable in place."""
    return server.executable.is_file() and os.access(server.executable, os.X_OK)


def _sandbox_path() -> str:
    # The system's directories, plus node's own (npm servers start `env node`).
    dirs = ["/usr/local/bin", "/usr/bin", "/bin"]
    node = shutil.which("node")
    if node and str(Path(node).parent) not in dirs:
        dirs.insert(0, str(Path(node).parent))
    return ":".join(dirs)


@functools.cache
def network_isolation() -> tuple[str, ...]:
    """The argv prefix that gives a child its own (empty) network namespace, or ()."""
    for prefix in (("unshare", "-n", "--"), ("unshare", "-r", "-n", "--")):
        try:
            done = subprocess.run([*prefix, "true"],  # noqa: S603 - fixed argv, a probe
                                  capture_output=True, timeout=10)
            ok = done.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return prefix
    print("thirdparty: `unshare -n` is not permitted here; servers run without their own "
          "network namespace", file=sys.stderr)
    return ()


def sandboxed(server: Server, tmp_path: Path) -> tuple[list[str], dict[str, str], Path]:
    """Make the server's state under ``tmp_path``; answer ``(argv, env, cwd)`` to start it."""
    home, cwd, state = tmp_path / "home", tmp_path / "cwd", tmp_path / "state"
    for folder in (home, cwd, state):
        folder.mkdir(parents=True)
    args, extra_env = server.prepare(state)
    env = {**BASE_ENV, "PATH": _sandbox_path(), "HOME": str(home), **extra_env}
    argv = [*network_isolation(), str(server.executable), *args]
    return argv, env, cwd
