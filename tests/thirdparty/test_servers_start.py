"""Each real third-party MCP server starts in its sandbox and answers the official client.

The expected tool names are the ones each server's own README (or, for
server-everything, its docs/features.md) documents; the read calls check
answers made from the sandbox's own state, so a server that ignored its
arguments (another root, another repository, another memory file) fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from thirdparty.fixture import Started, require_ts_sdk
from thirdparty.servers import SERVERS, network_isolation

pytestmark = pytest.mark.slow

CANARY = "canary-the-sandbox-must-not-see-this"

# Documented tools, per server (a subset: a pinned release may add more).
DOCUMENTED_TOOLS = {
    "time": {"get_current_time", "convert_time"},
    "git": {"git_status", "git_diff_unstaged", "git_diff_staged", "git_diff", "git_commit",
            "git_add", "git_reset", "git_log", "git_create_branch", "git_checkout",
            "git_show", "git_branch"},
    "sqlite": {"read_query", "write_query", "create_table", "list_tables", "describe_table",
               "append_insight"},
    "filesystem": {"read_text_file", "read_media_file", "read_multiple_files", "write_file",
                   "edit_file", "create_directory", "list_directory",
                   "list_directory_with_sizes", "move_file", "search_files",
                   "directory_tree", "get_file_info", "list_allowed_directories"},
    "memory": {"create_entities", "create_relations", "add_observations", "delete_entities",
               "delete_observations", "delete_relations", "read_graph", "search_nodes",
               "open_nodes"},
    "everything": {"echo", "get-env", "get-sum"},
}


def _text(result: Any) -> str:
    assert not result.is_error, result
    return "".join(getattr(block, "text", "") for block in result.content)


def _check_time(text: str, _state: Path) -> None:
    answer = json.loads(text)
    assert answer["timezone"] == "UTC"
    stamp = datetime.fromisoformat(answer["datetime"])
    assert stamp.utcoffset() == timedelta(0)


def _check_git(text: str, _state: Path) -> None:
    assert "first commit" in text  # the one commit the sandbox's repository has


def _check_sqlite(text: str, _state: Path) -> None:
    assert "apple" in text
    assert "pear" in text
    assert text.index("apple") < text.index("pear")  # ORDER BY id, as inserted


def _check_filesystem(text: str, _state: Path) -> None:
    assert text == "hello from the sandbox\n"


def _check_memory(text: str, _state: Path) -> None:
    graph = json.loads(text)
    assert [e["name"] for e in graph["entities"]] == ["sandbox"]  # the seeded file was read


def _check_everything(text: str, _state: Path) -> None:
    assert "the sandbox says hi" in text


# name -> (a harmless read tool, its arguments given the state dir, a check of the answer)
READS: dict[str, tuple[str, Callable[[Path], dict[str, Any]], Callable[[str, Path], None]]] = {
    "time": ("get_current_time", lambda _s: {"timezone": "UTC"}, _check_time),
    "git": ("git_log", lambda s: {"repo_path": str(s / "repo")}, _check_git),
    "sqlite": ("read_query", lambda _s: {"query": "SELECT name FROM items ORDER BY id"},
               _check_sqlite),
    "filesystem": ("read_text_file", lambda s: {"path": str(s / "files" / "hello.txt")},
                   _check_filesystem),
    "memory": ("read_graph", lambda _s: {}, _check_memory),
    "everything": ("echo", lambda _s: {"message": "the sandbox says hi"}, _check_everything),
}


def _children() -> list[int]:
    """The pids of this process's direct children (any of its threads')."""
    pids: list[int] = []
    for task in Path("/proc/self/task").iterdir():
        pids += [int(p) for p in (task / "children").read_text().split()]
    return pids


def _server_pid(executable: Path) -> int:
    """The child running the server: its command line names the server's executable."""
    for pid in _children():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except FileNotFoundError:
            continue
        if str(executable).encode() in cmdline:
            return pid
    raise AssertionError(f"no child process runs {executable}")


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    pairs = (item.decode().partition("=") for item in raw if item)
    return {key: value for key, _, value in pairs}


def _check_sandbox(name: str, started: Started) -> None:
    _argv, env, cwd = started
    pid = _server_pid(SERVERS[name].executable)
    seen = _environ(pid)
    assert CANARY not in "".join(f"{k}={v}" for k, v in seen.items())
    assert "AGTOOL_SECRET" not in seen
    assert seen["HOME"] == env["HOME"]
    assert Path(env["HOME"]).is_relative_to(cwd.parent)
    assert Path(os.readlink(f"/proc/{pid}/cwd")) == cwd
    if network_isolation():
        assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")


@contextlib.asynccontextmanager
async def _session(started: Started) -> AsyncIterator[ClientSession]:
    """An initialized official-client session with the sandboxed server, bounded in time."""
    argv, env, cwd = started
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd)
    with anyio.fail_after(60), open(os.devnull, "w") as quiet:  # quiet: start-up banners
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(
                read, write) as session:
            await session.initialize()
            yield session


async def _drive(name: str, started: Started) -> tuple[set[str], str]:
    tool, arguments, _check = READS[name]
    async with _session(started) as session:
        listed = {t.name for t in (await session.list_tools()).tools}
        answer = _text(await session.call_tool(tool, arguments(started[2].parent / "state")))
        _check_sandbox(name, started)
    return listed, answer


@pytest.fixture
def parent_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Secrets in the test's own environment, which no sandboxed server may read."""
    monkeypatch.setenv("AGTOOL_SECRET", CANARY)
    monkeypatch.setenv("THIRDPARTY_CANARY", CANARY)


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_server_starts_lists_its_tools_and_answers_a_read(
        name: str, thirdparty_server: Callable[[str], Started], parent_secrets: None) -> None:
    """initialize, tools/list with the documented tools, one read answered from the sandbox."""
    started = thirdparty_server(name)
    listed, answer = anyio.run(_drive, name, started)
    assert DOCUMENTED_TOOLS[name] <= listed, DOCUMENTED_TOOLS[name] - listed
    READS[name][2](answer, started[2].parent / "state")


def test_server_env_as_the_server_itself_reports_it(
        thirdparty_server: Callable[[str], Started], parent_secrets: None) -> None:
    """server-everything's get-env tool (its own process.env) shows no secret of the parent."""
    started = thirdparty_server("everything")
    env = started[1]

    async def env_seen_by_server() -> dict[str, str]:
        async with _session(started) as session:
            reported: dict[str, str] = json.loads(_text(await session.call_tool("get-env", {})))
        return reported

    reported = anyio.run(env_seen_by_server)
    assert CANARY not in json.dumps(reported)
    assert reported["HOME"] == env["HOME"]
    assert reported["PATH"] == env["PATH"]


def test_filesystem_root_is_the_sandbox(
        thirdparty_server: Callable[[str], Started]) -> None:
    """server-filesystem refuses a path outside the sandbox's root: the root argv is in force."""
    started = thirdparty_server("filesystem")
    outside = started[2].parent / "home" / "outside.txt"
    outside.write_text("not for the server\n")

    async def read_outside() -> Any:
        async with _session(started) as session:
            return await session.call_tool("read_text_file", {"path": str(outside)})

    result = anyio.run(read_outside)
    assert result.is_error
    assert "not for the server" not in "".join(getattr(b, "text", "") for b in result.content)


# The TypeScript SDK's own client: lists a sandboxed server's tools and prints their names.
NODE_CLIENT = """
const [sdk, command, ...args] = process.argv.slice(1);
const { Client } = await import(`${sdk}/dist/esm/client/index.js`);
const { StdioClientTransport } = await import(`${sdk}/dist/esm/client/stdio.js`);
const client = new Client({ name: "thirdparty-test", version: "1" });
const env = JSON.parse(process.env.SERVER_ENV);
await client.connect(new StdioClientTransport({ command, args, env }));
console.log(JSON.stringify((await client.listTools()).tools.map((t) => t.name)));
await client.close();
"""


def test_typescript_sdk_client_drives_a_sandboxed_server(
        thirdparty_server: Callable[[str], Started]) -> None:
    """The installed TypeScript SDK's client lists server-time's documented tools from Node."""
    sdk = require_ts_sdk()
    argv, env, cwd = thirdparty_server("time")
    done = subprocess.run(  # noqa: S603 - node and the sandbox's own argv
        ["node", "--input-type=module", "-e", NODE_CLIENT, str(sdk), *argv],  # noqa: S607
        env={**env, "SERVER_ENV": json.dumps(env)}, cwd=cwd, capture_output=True,
        text=True, timeout=60, check=True)
    assert set(json.loads(done.stdout)) >= DOCUMENTED_TOOLS["time"]
