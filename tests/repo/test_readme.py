"""The README's promises: its example runs, and CI runs its test command."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _ports import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text("utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_readme_python_blocks_run(index: int) -> None:
    """Every Python block in the README executes and its asserts hold."""
    namespace: dict[str, object] = {}
    exec(compile(_blocks("python")[index], "README.md", "exec"), namespace)  # noqa: S102
    assert len(namespace) > 1  # it defined something besides __builtins__


def test_readme_diagram_is_the_graph() -> None:
    """The README's mermaid diagram is what build_graph() draws today."""
    from agtool import tools

    drawn = tools.build_graph().get_graph().draw_mermaid().strip()
    assert _blocks("mermaid") == [drawn + "\n"]


def test_readme_has_exactly_two_commands() -> None:
    """The README gives two shell commands: the main job and the tests."""
    commands = [block.strip() for block in _blocks("sh")]
    assert len(commands) == 2
    assert commands[0].endswith("python -m reports")
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command() -> None:
    """.ci/run contains the README's test command verbatim, so CI tests what users run."""
    test_command = _blocks("sh")[1].strip()
    ci_lines = (ROOT / ".ci" / "run").read_text("utf-8").splitlines()
    assert test_command in ci_lines


def _agtool_commands() -> list[list[str]]:
    """Each ``$ agtool ...`` line of the README's console blocks, as argv after ``agtool``."""
    commands = []
    for block in _blocks("console"):
        for line in re.sub(r"\\\n\s*", "", block).splitlines():
            if line.startswith("$ agtool "):
                commands.append(shlex.split(re.split(r"\s+[#>|]", line[2:])[0])[1:])
    return commands


def test_readme_agtool_commands_are_ones_the_cli_takes() -> None:
    """Every agtool command the README shows parses with the CLI's own parser."""
    from agtool._cli import command_parser

    assert len(_agtool_commands()) >= 8
    for argv in _agtool_commands():
        command_parser().parse_args(argv)  # exits (fails the test) on an unknown option


def _runnable(argv: list[str]) -> bool:
    # The examples name a table module and an upstream server the test writes; one
    # proxies an npm package, which is only parsed. `mcp pin` writes a file and exits, and
    # `--pins` and `--url` need that file or a server at that address: only parsed here,
    # run as written by tests/mcp/test_proxy_faults.py.
    return (argv[:1] == ["mcp"] and "npx" not in argv and argv[1:2] != ["pin"]
            and "--pins" not in argv and "--url" not in argv)


def _readme_table_module(folder: Path) -> None:
    """The README's own `search_tickets` table, as the module its MCP examples serve."""
    own_tool = README[README.index("## Your own tool, gated"):]
    code = re.search(r"```python\n(.*?)```", own_tool, re.S)
    assert code is not None
    (folder / "support_tools.py").write_text(code.group(1).split("gate = Gate(TOOLS)")[0])
    (folder / "their_server.py").write_text((ROOT / "tests" / "_lax_server.py").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("argv", [argv for argv in _agtool_commands() if _runnable(argv)],
                         ids=" ".join)
def test_readme_mcp_commands_serve_a_real_client(argv: list[str], tmp_path: Path) -> None:
    """Each `agtool mcp` command of the README, run as written in a folder holding the
    modules it names, lists its tools to the official MCP client (over HTTP on a free
    port instead of the README's 8000)."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client

    _readme_table_module(tmp_path)
    # As in the activated environment the README's commands are typed into.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "LAX_RUNS": str(tmp_path / "runs")}
    expected = "count_items" if argv[1] == "proxy" else "search_tickets"

    async def listed(read: Any, write: Any) -> list[str]:
        async with ClientSession(read, write) as session:
            await session.initialize()
            return [tool.name for tool in (await session.list_tools()).tools]

    async def over_stdio() -> list[str]:
        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "agtool._cli", *argv],
                                       cwd=str(tmp_path), env=env)
        with anyio.fail_after(60):
            async with stdio_client(params) as (read, write):
                return await listed(read, write)

    if "--http" not in argv:
        assert expected in anyio.run(over_stdio)
        return
    port = free_port()
    argv = [str(port) if previous == "--port" else arg
            for previous, arg in zip(["", *argv[:-1]], argv, strict=True)]
    server = subprocess.Popen([sys.executable, "-m", "agtool._cli", *argv], cwd=tmp_path,  # noqa: S603
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def over_http() -> list[str]:
        with anyio.fail_after(60):
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read,
                                                                                write, *_):
                return await listed(read, write)

    try:
        wait_for_port(port, server, 60)
        assert expected in anyio.run(over_http)
    finally:
        server.terminate()
        server.wait(timeout=60)


_GLUE_NAME = re.compile(r"\b(build_graph|gated_tools|gated_tool_node|GateMiddleware)\(")


def _glue_calls() -> list[str]:
    """Every adapter call in the glue table, each up to its own closing parenthesis."""
    table = README[README.index("| where the agent runs | the glue |"):]
    table = table[:table.index("\n\n")]
    calls = []
    for match in _GLUE_NAME.finditer(table):
        depth, end = 0, match.end() - 1
        for end in range(match.end() - 1, len(table)):
            depth += {"(": 1, ")": -1}.get(table[end], 0)
            if depth == 0:
                break
        calls.append(table[match.start():end + 1])
    return calls


def test_readme_glue_table_calls_run_as_written() -> None:
    """Each adapter call in the glue table builds what it names, with the arguments shown."""
    from langchain_core.tools import tool

    from agtool import Gate, tools
    from agtool.graph import build_graph
    from agtool.langchain import GateMiddleware, gated_tool_node, gated_tools

    @tool
    def stock_lookup(sku: str) -> dict[str, object]:
        """The stock of a SKU."""
        return {}

    namespace = {"gate": Gate(tools.TOOLS), "tools": [stock_lookup], "build_graph": build_graph,
                 "gated_tools": gated_tools, "gated_tool_node": gated_tool_node,
                 "GateMiddleware": GateMiddleware}
    calls = _glue_calls()
    assert {call.partition("(")[0] for call in calls} == {
        "build_graph", "gated_tools", "gated_tool_node", "GateMiddleware"}
    for call in calls:
        assert eval(call, namespace) is not None, call  # noqa: S307 - the README's own text
