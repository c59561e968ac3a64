"""Trials of `agtool mcp proxy` in front of each real server: what it serves, and four faults.

For one server (``servers.py``, in a sandbox of its own), ``run_trials`` starts the
proxy (a subprocess, over stdio, driven by the official ``ClientSession``) and
measures:

- listed, served and hidden tools (with the keyword the proxy's stderr names);
- stale read: a read, a write through the proxy, the read again: it sees the write;
- empty result: an upstream answer with nothing in it is passed, not refused;
- cross-client write: a second client (a second proxy on the same ``--store``) sends
  the same run id, step and arguments: its write runs, it is not replayed the first's;
- upstream crash: the upstream is stopped (SIGSTOP), sent a write, killed (SIGKILL):
  that call is answered retryable, its retry is ``write:unknown``, and a later call
  reaches the restarted upstream.

A trial a server has no tool for is ``n/a``. Used by ``tests/mcp/test_proxy_thirdparty.py``
(which asserts each outcome) and ``bench/trial_proxy_real.py`` (which prints the table).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from thirdparty.servers import SERVERS, sandboxed

ROOT = Path(__file__).resolve().parents[2]
SCENARIO_TIMEOUT = 180
#: Calls after the crash that may fail (a restart takes a moment) before one must work.
CALLS_AFTER_CRASH = 20
Args = Callable[[Path], dict[str, Any]]


@dataclass(frozen=True)
class Plan:
    """What a server's trials call: ``(tool, args of its sandbox state)`` each, or ``None``."""

    #: A read whose answer shows the write's effect, and that write.
    read: tuple[str, Args] | None = None
    write: tuple[str, Args] | None = None
    #: A call whose upstream answer is empty (no rows, no matches, ...).
    empty: tuple[str, Args] | None = None
    #: ``--effect`` options: the writes as reversible writes (the sandbox is thrown away),
    #: and the reads a server does not say are reads.
    effects: tuple[str, ...] = ()
    #: A read for the crash trial's "later call", when the server has no other.
    probe: tuple[str, Args] | None = None
    #: Without a write, a read whose answer changes by itself (a clock): the stale-read
    #: trial asks it twice, and a remembered answer would be the same.
    ticking: tuple[str, Args] | None = None
    #: The cross-client trial's write, where ``write`` can be made only once (a branch).
    cross: tuple[str, Args] | None = None


def _repo(state: Path) -> dict[str, Any]:
    return {"repo_path": str(state / "repo")}


PLANS: dict[str, Plan] = {
    "time": Plan(probe=("get_current_time", lambda state: {"timezone": "UTC"}),
                 ticking=("get_current_time", lambda state: {"timezone": "UTC"})),
    "git": Plan(read=("git_branch", lambda state: {**_repo(state), "branch_type": "local"}),
                write=("git_create_branch", lambda state: {**_repo(state),
                                                           "branch_name": "trial"}),
                empty=("git_diff_unstaged", _repo),
                cross=("git_create_branch", lambda state: {**_repo(state),
                                                           "branch_name": "cross"}),
                effects=("git_create_branch=write",)),
    "sqlite": Plan(read=("read_query", lambda state: {"query": "SELECT COUNT(*) AS n FROM items"}),
                   write=("write_query", lambda state: {
                       "query": "INSERT INTO items (name) VALUES ('trial')"}),
                   empty=("read_query", lambda state: {"query": "SELECT * FROM items WHERE 0"}),
                   effects=("read_query=read", "write_query=write")),
    "filesystem": Plan(
        read=("read_text_file", lambda state: {"path": f"{state}/files/hello.txt"}),
        write=("write_file", lambda state: {"path": f"{state}/files/hello.txt",
                                            "content": "written through the proxy\n"}),
        empty=("search_files", lambda state: {"path": f"{state}/files",
                                              "pattern": "no-such-file-anywhere"}),
        effects=("write_file=write",)),
    "memory": Plan(read=("search_nodes", lambda state: {"query": "trial"}),
                   write=("create_entities", lambda state: {"entities": [{
                       "name": "trial", "entityType": "test", "observations": ["made"]}]}),
                   empty=("search_nodes", lambda state: {"query": "nothing-is-called-this"}),
                   effects=("create_entities=write",)),
    "everything": Plan(write=("toggle-simulated-logging", lambda state: {}),
                       probe=("echo", lambda state: {"message": "after"}),
                       effects=("toggle-simulated-logging=write",)),
}


@dataclass
class Row:
    """What the trials of one server measured."""

    server: str
    listed: list[str] = field(default_factory=list)
    served: list[str] = field(default_factory=list)
    hidden: dict[str, str] = field(default_factory=dict)  #: tool -> the keyword named
    #: Each trial's outcome in a few words, and whether it held.
    stale: tuple[str, bool | None] = ("n/a", None)
    empty: tuple[str, bool | None] = ("n/a", None)
    cross: tuple[str, bool | None] = ("n/a", None)
    crash: tuple[str, bool | None] = ("n/a", None)


def _proxy(argv: list[str], env: dict[str, str], cwd: Path, plan: Plan, store: Path,
           records: Path) -> StdioServerParameters:
    passed = [item for name in env for item in ("--env", name)]
    effects = [item for effect in plan.effects for item in ("--effect", effect)]
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agtool._cli", "mcp", "proxy", "--records", str(records), "--store",
              str(store), "--scope", "read_public", "--scope", "reversible_write", *passed,
              *effects, "--", *argv],
        cwd=str(cwd), env={**env, "PYTHONPATH": str(ROOT)})


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rpartition(")")[2].split()
            except OSError:
                continue
            if fields[1] == str(pid) and fields[0] != "Z":
                found.append(int(entry))
    return found


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as line:
            return line.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _upstream_of(records: Path) -> int:
    """The upstream behind the proxy that writes ``records``: that proxy's one child."""
    (proxy,) = [pid for pid in children_of(os.getpid())
                if "agtool._cli mcp proxy" in cmdline(pid) and str(records) in cmdline(pid)]
    (upstream,) = children_of(proxy)
    return upstream


def reason_of(result: Any) -> str:
    """``""`` for a success, else the gate's reason (or the start of the error text)."""
    if not result.is_error:
        return ""
    try:
        return str(json.loads(result.content[0].text)["error"]["details"]["reason"])
    except (ValueError, KeyError, TypeError, IndexError):
        return result.content[0].text[:80] if result.content else "?"


def _text(result: Any) -> str:
    if result.structured_content is not None:
        return json.dumps(result.structured_content, sort_keys=True)
    return "\n".join(getattr(block, "text", "") for block in result.content)


def _hidden(err: str) -> dict[str, str]:
    found = dict(re.findall(r"tool '([^']*)' is hidden: (.*)", err))
    return {tool: (re.match(r"keyword '([^']*)'", why) or re.match(r"(.{0,40})", why))[1]
            for tool, why in found.items()}


def _replayed(records: Path) -> list[bool]:
    lines = records.read_text().splitlines() if records.exists() else []
    return [json.loads(line).get("replayed", False) for line in lines]


class _Client:
    """One proxy session: calls by name, each step of its own unless told."""

    def __init__(self, session: ClientSession, state: Path) -> None:
        self.session, self.state = session, state
        self.steps = 0

    async def call(self, tool: tuple[str, Args], step: str | None = None) -> Any:
        self.steps += 1
        name, args = tool
        meta = {"agtool/run_id": "trial", "agtool/step_id": step or f"s{self.steps}"}
        return await self.session.call_tool(name, args(self.state), meta=meta)


async def _stale(client: _Client, plan: Plan) -> tuple[str, bool | None]:
    if plan.write is None or plan.read is None:
        if plan.ticking is None:
            return "n/a", None
        first = await client.call(plan.ticking)
        await anyio.sleep(1.1)
        second = await client.call(plan.ticking)
        fresh = _text(first) != _text(second)
        return (f"no write; two reads 1.1 s apart {'differ' if fresh else 'are the same'}",
                fresh)
    before = _text(await client.call(plan.read))
    wrote = reason_of(await client.call(plan.write))
    after = _text(await client.call(plan.read))
    seen = wrote == "" and after != before
    return ("read after the write sees it" if seen else
            f"stale (write: {wrote or 'ok'}, read unchanged)"), seen


async def _empty(client: _Client, plan: Plan) -> tuple[str, bool | None]:
    if plan.empty is None:
        return "n/a", None
    result = await client.call(plan.empty)
    reason = reason_of(result)
    shown = _text(result).replace("\n", " ")[:40]
    return (f"passed: `{shown}`" if not reason else f"refused {reason}"), not reason


async def _crash(client: _Client, plan: Plan, records: Path) -> tuple[str, bool | None]:
    target = plan.write or plan.probe
    later = plan.read or plan.probe or plan.empty
    if target is None or later is None:
        return "n/a", None
    upstream = _upstream_of(records)
    os.kill(upstream, signal.SIGSTOP)  # it reads the call, and never answers it
    answers: dict[str, str] = {}

    async def in_flight() -> None:
        answers["call"] = reason_of(await client.call(target, step="crash"))

    async with anyio.create_task_group() as group:
        group.start_soon(in_flight)
        await anyio.sleep(0.5)
        os.kill(upstream, signal.SIGKILL)
    retry = reason_of(await client.call(target, step="crash")) if plan.write else "(a read)"
    after = "?"
    for _ in range(CALLS_AFTER_CRASH):
        after = reason_of(await client.call(later))
        if after == "":
            break
        await anyio.sleep(0.25)
    held = (answers["call"] in ("upstream:connection", "timeout") and after == ""
            and (retry == "write:unknown" or not plan.write))
    return (f"in flight: {answers['call']}; retry: {retry}; "
            f"later call: {after or 'ok'} (restarted)"), held


async def _cross(params_b: StdioServerParameters, state: Path, plan: Plan, records_a: Path,
                 records_b: Path, first: str) -> tuple[str, bool | None]:
    """Client B: the same run, step and arguments as A's write ``first`` answered."""
    cross = plan.cross or plan.write
    assert cross is not None
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params_b, errlog=quiet) as (read, write), ClientSession(
                read, write) as session:
            await session.initialize()
            second = reason_of(await _Client(session, state).call(cross, step="cross"))
    replayed = _replayed(records_b)
    ran = not any(replayed)
    return (f"A: {first or 'ok'}, B: {second or 'ok'}, B replayed: {any(replayed)}"), ran


def run_trials(server: str, tmp_path: Path) -> Row:
    """Every trial of ``server``'s proxy, in sandboxes under ``tmp_path``."""
    plan = PLANS[server]
    argv, env, cwd = sandboxed(SERVERS[server], tmp_path / server)
    state = tmp_path / server / "state"
    store, records_a, records_b = (tmp_path / "store.db", tmp_path / "a.jsonl",
                                   tmp_path / "b.jsonl")
    row = Row(server)
    errlog = tmp_path / "proxy.err"

    async def direct() -> list[str]:
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(cwd))
        with open(os.devnull, "w") as quiet:
            async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(
                    read, write) as session:
                await session.initialize()
                return [tool.name for tool in (await session.list_tools()).tools]

    async def scenario() -> None:
        row.listed = await direct()
        with errlog.open("w") as err:
            async with stdio_client(_proxy(argv, env, cwd, plan, store, records_a),
                                    errlog=err) as (read, write), ClientSession(
                    read, write) as session:
                await session.initialize()
                row.served = [tool.name for tool in (await session.list_tools()).tools]
                client = _Client(session, state)
                row.stale = await _stale(client, plan)
                row.empty = await _empty(client, plan)
                if plan.write is not None:
                    first = reason_of(await client.call(plan.cross or plan.write,
                                                        step="cross"))
                    row.cross = await _cross(_proxy(argv, env, cwd, plan, store, records_b),
                                             state, plan, records_a, records_b, first)
                row.crash = await _crash(client, plan, records_a)

    async def bounded() -> None:
        with anyio.fail_after(SCENARIO_TIMEOUT):
            await scenario()

    anyio.run(bounded)
    row.hidden = _hidden(errlog.read_text())
    return row


def markdown(rows: list[Row]) -> str:
    """The rows as the README's table."""
    lines = ["| server | listed | served | hidden (keyword) | stale read | empty result | "
             "cross-client write | upstream crash |", "|---|---:|---:|---|---|---|---|---|"]
    for row in rows:
        hidden = ", ".join(f"`{tool}` ({why})" for tool, why in sorted(row.hidden.items()))
        lines.append(f"| {row.server} | {len(row.listed)} | {len(row.served)} | "
                     f"{hidden or 'none'} | {row.stale[0]} | {row.empty[0]} | "
                     f"{row.cross[0]} | {row.crash[0]} |")
    return "\n".join(lines)
