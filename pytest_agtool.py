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


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # tryfirst: the plugin's own configure must run before Hypothesis loads a profile.
    if config.getoption(TABLE_OPTION):
        from agtool import _plugin

        config.pluginmanager.register(_plugin, "agtool-harness")
