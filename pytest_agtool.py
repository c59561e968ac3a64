"""agtool's pytest plugin entry point (``pytest11``): ``pytest --agtool-table=module:TOOLS``.

pytest loads this module in every session where agtool is installed, before
coverage starts measuring. It therefore imports nothing of agtool (nor
Hypothesis) itself: only when ``--agtool-table`` is given does it register
``agtool.harness._pytest_table``, which generates the property tests. See that module for
what they check.

What every harness item shares, whoever made it (the table's items here, an
MCP server's elsewhere), lives here, read from the items alone:

- the ``agtool`` marker, on every harness item; ``--agtool-only`` deselects
  every item without it, so a project's own tests do not run;
- ``item.agtool_info``: a dict with ``source`` (the table spec or MCP target),
  ``tool`` and ``property`` (and ``case``, when there is one); it travels on
  the item's reports, so it reaches the controller under xdist;
- ``item.user_properties`` holds ``("examples", N)``, ``("failures", N)`` and
  ``("seed", S)`` once the item ran, so ``--junitxml`` carries them;
- ``--agtool-summary=PATH`` writes one NDJSON line per harness item: source,
  tool, property, case, outcome, examples, failures, seed, duration, and an MCP
  item's verdict (``warned`` and ``inconclusive`` besides pytest's outcomes);
- ``session_seed(config)``: one seed for every harness item of the session, the
  same in every xdist worker, so one seed replays the whole run.
"""

from __future__ import annotations

import importlib
import json
import random
import zlib
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

TABLE_OPTION = "agtool_table"
STUB_OPTION = "agtool_stub_bodies"
ONLY_OPTION = "agtool_only"
SUMMARY_OPTION = "agtool_summary"
REPRODUCE_OPTION = "agtool_reproduce"
MARKER = "agtool"
MCP_OPTION = "agtool_mcp"
WRITES_OPTION = "agtool_allow_writes"
ALLOW_TOOL_OPTION = "agtool_allow_tool"
ENV_OPTION = "agtool_env"
EXAMPLES_OPTION = "agtool_examples"
ITEM_OPTION = "agtool_item"
TIMEOUT_OPTION = "agtool_timeout"
STRICT_OPTION = "agtool_strict"
_SEED = pytest.StashKey[int]()
#: Where an xdist worker finds the seed its controller chose.
_SEED_INPUT = "agtool_seed"


def given_seed(config: pytest.Config) -> int | None:
    """``--hypothesis-seed`` as an int (Hypothesis takes any text: a text one is hashed)."""
    given = config.getoption("hypothesis_seed", None)
    if given is None:
        return None
    text = str(given)
    return int(text) if text.isdigit() else zlib.crc32(text.encode())


def session_seed(config: pytest.Config) -> int:
    """The seed of every harness item: the given one, else the xdist controller's, else new."""
    if _SEED not in config.stash:
        seed = given_seed(config)
        if seed is None:
            seed = getattr(config, "workerinput", {}).get(_SEED_INPUT)
        # S311: a seed to replay draws with, not a secret.
        config.stash[_SEED] = int(seed) if seed is not None else random.randrange(2**32)  # noqa: S311
    return config.stash[_SEED]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    # pytest-xdist's hook, on the controller, for each worker it starts.
    node.workerinput[_SEED_INPUT] = session_seed(node.config)


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
        "--agtool-only", dest=ONLY_OPTION, action="store_true", default=False,
        help="run only the harness's items (marked 'agtool'): the project's own tests are "
             "deselected",
    )
    group.addoption(
        "--agtool-summary", dest=SUMMARY_OPTION, default=None, metavar="PATH",
        help="write one NDJSON line per harness item: source, tool, property, outcome, "
             "examples, failures, seed, duration",
    )
    group.addoption(
        "--agtool-reproduce", dest=REPRODUCE_OPTION, default=None, metavar="BLOB",
        help="replay the exact failing example a harness report printed (select its item "
             "with -k)",
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
    group.addoption(
        "--agtool-allow-tool", dest=ALLOW_TOOL_OPTION, action="append", default=[],
        metavar="NAME", help="with --agtool-mcp, also call this tool though it may write "
                             "(repeatable): one known to be safe",
    )
    group.addoption(
        "--agtool-env", dest=ENV_OPTION, action="append", default=[], metavar="NAME[=VALUE]",
        help="with --agtool-mcp, pass this variable to the server (repeatable); it gets only "
             "the MCP SDK's safe environment otherwise",
    )
    group.addoption(
        "--agtool-examples", dest=EXAMPLES_OPTION, default=None, metavar="FILE",
        help="with --agtool-mcp, calls that should succeed: a JSON object of tool name -> list "
             "of argument objects",
    )
    group.addoption(
        "--agtool-item", dest=ITEM_OPTION, action="append", default=[], metavar="TOOL::LABEL",
        help="with --agtool-mcp, run only this item, named exactly (repeatable)",
    )
    group.addoption(
        "--agtool-timeout", dest=TIMEOUT_OPTION, default=None, metavar="[TOOL=]SECONDS",
        action="append", help="with --agtool-mcp, the seconds a call may take (per tool with "
                              "TOOL=SECONDS; repeatable)",
    )
    group.addoption(
        "--agtool-strict", dest=STRICT_OPTION, action="store_true", default=False,
        help="with --agtool-mcp, a warning fails its item",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # tryfirst: the plugin's own configure must run before Hypothesis loads a profile.
    config.addinivalue_line("markers", f"{MARKER}: an item of the agtool harness")
    path = config.getoption(SUMMARY_OPTION)
    if path is not None and not hasattr(config, "workerinput"):  # xdist: the controller writes
        config.pluginmanager.register(_Summary(path), "agtool-summary")
    tables, targets = config.getoption(TABLE_OPTION), config.getoption(MCP_OPTION)
    if not (tables or targets):
        return
    # Only now is agtool imported: the harness gets the options as values, and never
    # imports this module back. By full name, not as attributes of agtool.harness: an
    # in-process pytester run drops the modules it imported from sys.modules, and an
    # attribute left on the package would be the previous run's module.
    harness_options = importlib.import_module("agtool.harness._pytest_options")
    table_items = importlib.import_module("agtool.harness._pytest_table")
    mcp_items = importlib.import_module("agtool.harness._pytest_mcp")

    config.stash[harness_options.OPTIONS] = harness_options.HarnessOptions(
        marker=MARKER, seed=session_seed(config), given_seed=given_seed(config),
        tables=tuple(tables), stub_bodies=bool(config.getoption(STUB_OPTION)),
        reproduce=config.getoption(REPRODUCE_OPTION), mcp_targets=tuple(targets),
        allow_writes=bool(config.getoption(WRITES_OPTION)),
        mcp_allow_tools=tuple(config.getoption(ALLOW_TOOL_OPTION)),
        mcp_env=tuple(config.getoption(ENV_OPTION)),
        mcp_examples=config.getoption(EXAMPLES_OPTION),
        mcp_items=tuple(config.getoption(ITEM_OPTION)),
        mcp_timeouts=tuple(config.getoption(TIMEOUT_OPTION) or ()),
        mcp_strict=bool(config.getoption(STRICT_OPTION)))
    if tables:
        config.pluginmanager.register(table_items, "agtool-harness")
    if targets:
        config.pluginmanager.register(mcp_items, "agtool-mcp-harness")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # trylast: after every plugin has added its harness items.
    if not config.getoption(ONLY_OPTION):
        return
    kept = [item for item in items if item.get_closest_marker(MARKER) is not None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    info = getattr(item, "agtool_info", None)
    if isinstance(info, dict):
        report.agtool_info = {key: str(value) for key, value in info.items()}  # type: ignore[attr-defined]
    return report


class _Summary:
    """The NDJSON summary: one line per harness item, its phases folded into it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lines: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        info = getattr(report, "agtool_info", None)
        if info is None:
            return
        line = self.lines.setdefault(report.nodeid, {
            "source": info.get("source", ""), "tool": info.get("tool", ""),
            "property": info.get("property", ""), "case": info.get("case", ""),
            "outcome": "passed", "examples": 0, "failures": 0, "seed": None, "duration": 0.0})
        line["duration"] = round(line["duration"] + report.duration, 6)
        properties = dict(report.user_properties)
        for key in ("examples", "failures", "seed"):
            if key in properties:
                line[key] = properties[key]
        if "verdict" in info:  # an MCP item's own verdict: warned and inconclusive too
            line["verdict"] = info["verdict"]
        if report.failed:
            line["outcome"] = "failed" if report.when == "call" else "error"
            line["failures"] = max(1, int(line["failures"] or 0))
        elif report.skipped and line["outcome"] == "passed":
            line["outcome"] = "skipped"

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        Path(self.path).write_text("".join(json.dumps(line) + "\n"
                                           for line in self.lines.values()), "utf-8")
