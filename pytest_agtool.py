"""agtool's pytest plugin entry point (``pytest11``): ``pytest --agtool-table=module:TOOLS``.

pytest loads this module in every session where agtool is installed, before
coverage starts measuring. It therefore imports nothing of agtool (nor
Hypothesis) itself: only when ``--agtool-table`` is given does it register
``agtool._plugin``, which generates the property tests. See that module for
what they check.
"""

from __future__ import annotations

import pytest

TABLE_OPTION = "agtool_table"
STUB_OPTION = "agtool_stub_bodies"
MCP_OPTION = "agtool_mcp"
WRITES_OPTION = "agtool_allow_writes"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agtool", "agtool: property tests of a contract table")
    group.addoption(
        "--agtool-table", dest=TABLE_OPTION, action="append", default=[],
        metavar="MODULE:NAME",
        help="run the gate's properties against the contract table NAME in MODULE "
             "(repeatable), e.g. --agtool-table=myapp.tools:TOOLS",
    )
    group.addoption(
        "--agtool-stub-bodies", dest=STUB_OPTION, action="store_true", default=False,
        help="never run the real tool bodies: stubs record each call and return a value "
             "drawn from the return contract (for tools with side effects)",
    )
    group.addoption(
        "--agtool-mcp", dest=MCP_OPTION, action="append", default=[],
        metavar="COMMAND_OR_URL",
        help="run the harness's properties over the tools of an MCP server, from the outside "
             "(repeatable): a command started as a stdio server, --agtool-mcp='python "
             "server.py', or a streamable HTTP URL, --agtool-mcp=http://127.0.0.1:8000/mcp",
    )
    group.addoption(
        "--agtool-allow-writes", dest=WRITES_OPTION, action="store_true", default=False,
        help="with --agtool-mcp, also call the tools that may write (no readOnlyHint: true); "
             "without it their items are skipped",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # tryfirst: the plugin's own configure must run before Hypothesis loads a profile.
    if config.getoption(TABLE_OPTION):
        from agtool import _plugin

        config.pluginmanager.register(_plugin, "agtool-harness")
    if config.getoption(MCP_OPTION):
        from agtool import _plugin_mcp

        config.pluginmanager.register(_plugin_mcp, "agtool-mcp-harness")
