"""Every tool of each real third-party MCP server goes through the importer.

Each server is started in its sandbox (``tests/thirdparty``) and listed with
the official client; each tool is imported as the proxy imports it
(``_LISTED_KEYS``, ``tool_definition``, ``import_tool``). A tool may be hidden
only with a keyword the gate truly cannot enforce; none of these servers'
tools uses one, so each must import. The imported contract must then accept
what ``jsonschema`` accepts on the server's own schema for a call drawn from
the contract (the gate's valid values are the server's valid values).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from jsonschema import Draft202012Validator
from mcp import ClientSession, StdioServerParameters, stdio_client
from thirdparty.fixture import Started, thirdparty_server  # noqa: F401  # a fixture, by name

from agtool._contract import parse_entry
from agtool._jsonschema import SchemaError, import_tool, tool_definition
from agtool.harness.strategies._specs import valid_object
from agtool.mcp._proxy import _LISTED_KEYS

pytestmark = pytest.mark.slow

#: Keywords a hidden tool may name: the ones the gate cannot enforce (none of these
#: servers should need one; a new release that does is news, named by the failure).
UNENFORCEABLE = frozenset({"taskSupport", "$ref", "$dynamicRef"})


async def _listing(started: Started) -> list[dict[str, Any]]:
    argv, env, cwd = started
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
    return [{key: value for key, value in tool.model_dump(
        by_alias=True, exclude_none=True, mode="json").items() if key in _LISTED_KEYS}
        for tool in tools]


def _imported(listing: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, str]]:
    entries: dict[str, Any] = {}
    hidden: dict[str, str] = {}
    for index, item in enumerate(listing):
        try:
            entries[item["name"]] = import_tool(tool_definition(item, "upstream",
                                                                f"/tools/{index}"))
        except SchemaError as exc:
            hidden[item["name"]] = exc.field.rsplit("/", 1)[-1]
    return entries, hidden


@pytest.mark.parametrize(("name", "expected_hidden"), [
    ("time", {}), ("git", {}), ("sqlite", {}), ("filesystem", {}), ("memory", {}),
    # Its one task-only tool answers only as an MCP task, which the gate does not call.
    ("everything", {"simulate-research-query": "taskSupport"}),
])
def test_every_tool_of_a_real_server_is_imported(
        name: str, expected_hidden: dict[str, str],
        thirdparty_server: Callable[[str], Started],  # noqa: F811
        caplog: pytest.LogCaptureFixture) -> None:
    """Listed == imported, or hidden only by a keyword no gate can enforce."""
    listing = anyio.run(_listing, thirdparty_server(name))
    with caplog.at_level(logging.WARNING, logger="agtool"):
        entries, hidden = _imported(listing)
    print(f"{name}: listed {len(listing)}, imported {len(entries)}, hidden {hidden}")
    assert listing, f"{name} listed no tools"
    assert set(hidden.values()) <= UNENFORCEABLE, hidden
    assert len(entries) + len(hidden) == len(listing)
    assert hidden == expected_hidden
    for item in listing:
        if item["name"] in entries:
            _valid_calls_keep_the_servers_schema(item, entries[item["name"]])


def _valid_calls_keep_the_servers_schema(item: dict[str, Any], entry: dict[str, Any]) -> None:
    """What the imported contract calls valid, jsonschema accepts on the server's schema."""
    contract = parse_entry(item["name"], entry)
    oracle = Draft202012Validator(item["inputSchema"],
                                  format_checker=Draft202012Validator.FORMAT_CHECKER)

    @settings(max_examples=25, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(args=valid_object(contract.args, top=True))
    def check(args: dict[str, Any]) -> None:
        # Null for an optional key is the gate's "not given": the server reads it so too
        # only if its schema admits null there, so nulls are sent as absent keys.
        sent = {key: value for key, value in args.items() if value is not None}
        assert oracle.is_valid(sent), (item["name"], sent,
                                       [error.message for error in oracle.iter_errors(sent)])

    check()
