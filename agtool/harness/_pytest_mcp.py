"""The harness on an MCP server, as pytest items: ``pytest --agtool-mcp="python server.py"``.

::

    pytest --agtool-mcp="python my_server.py"                 # a stdio server, started here
    pytest --agtool-mcp=http://127.0.0.1:8000/mcp             # a running streamable HTTP one
    pytest --agtool-mcp="python my_server.py" --agtool-allow-writes

Items, per tool of the server (see ``agtool.harness._mcp_check`` for what each checks)::

    agtool-mcp:python my_server.py::<tool>::contract              skipped: what the importer
                                                                  cannot enforce
    agtool-mcp:python my_server.py::<tool>::accepts               valid calls, their results
    agtool-mcp:python my_server.py::<tool>::refused[type:limit]   one per defect site
    agtool-mcp:python my_server.py::<tool>::mistake[bool-for-int] one per model mistake
    agtool-mcp:python my_server.py::<tool>::secret                no answer holds the canary
    agtool-mcp:python my_server.py::<tool>::listing               the listing did not change

Verdicts map onto pytest's outcomes: a failure fails, a warning passes and is
listed in a closing section (``--agtool-strict`` fails it), an inconclusive
item is skipped saying why. ``--agtool-allow-tool``, ``--agtool-env``,
``--agtool-examples``, ``--agtool-timeout`` and ``--agtool-item`` are
``agtool check``'s ``--allow-tool``, ``--env``, ``--examples``, ``--timeout``
and ``--item``; a failure's replay line carries every one of them.

Each item draws at most ``EXAMPLES_PER_ITEM`` examples of the profile's
(``--hypothesis-profile``), with the run's seed: ``--hypothesis-seed`` if
given, else a fixed one under a derandomized profile (``ci``), else a new one,
printed in the header. An item carries the ``agtool`` marker, ``agtool_info``
and, once run, the ``examples``, ``seed`` and ``verdict`` user properties. A server that
does not start is a collection error of one line.

``pytest_agtool`` registers this module only when ``--agtool-mcp`` is given.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from .._errors import AgtoolError
from ._pytest_options import options

if TYPE_CHECKING:
    from _pytest._code.code import ExceptionInfo, TerminalRepr

    from ._mcp_check import CheckItem, ItemResult, McpTarget, ToolUnderTest
    from ._mcp_options import CheckOptions

__all__ = ["McpFinding", "McpItem", "McpServerCollector", "McpToolCollector"]

_TARGETS = pytest.StashKey[list["McpTarget"]]()
_WARNED = pytest.StashKey[list[str]]()
_OPTIONS = pytest.StashKey["CheckOptions"]()


class McpFinding(AssertionError):
    """An item's failure (or, under ``--agtool-strict``, its warning), already worded."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "agtool: an item of agtool's harness")
    config.stash[_TARGETS] = []
    config.stash[_WARNED] = []
    # As agtool.harness._pytest_table does: the harness's profiles, dev or ci unless one was
    # chosen.
    from hypothesis import settings

    from .strategies.profiles import load_default_profile, register_profiles

    register_profiles()
    if settings.get_current_profile_name() == "default":
        load_default_profile()


def pytest_unconfigure(config: pytest.Config) -> None:
    for target in config.stash.get(_TARGETS, []):
        target.close()


def run_seed(config: pytest.Config) -> int:
    """The seed of every MCP item of this run: the session's (the same in every xdist
    worker), or the fixed one of a derandomized profile when none was given."""
    from hypothesis import settings

    from ._mcp_check import DERANDOMIZED_SEED

    if settings().derandomize and options(config).given_seed is None:
        return DERANDOMIZED_SEED
    return options(config).seed


def check_options(config: pytest.Config) -> CheckOptions:
    """The run's options for every MCP server, read once."""
    from ._mcp_options import CheckOptions, parse_timeouts

    if _OPTIONS in config.stash:
        return config.stash[_OPTIONS]
    given = options(config)
    default, per_tool = parse_timeouts(given.mcp_timeouts, "--agtool-timeout")
    read = CheckOptions.read(
        allow_writes=given.allow_writes, allow_tools=given.mcp_allow_tools,
        env=given.mcp_env, examples_file=given.mcp_examples, timeout=default,
        tool_timeouts=[f"{tool}={seconds}" for tool, seconds in per_tool.items()],
        strict=given.mcp_strict)
    config.stash[_OPTIONS] = read
    return read


def pytest_report_header(config: pytest.Config) -> str:
    seed = run_seed(config)
    return f"agtool mcp: seed {seed} (the same calls again: --hypothesis-seed={seed})"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    # tryfirst: added before -k and -m deselect, so they select these items too.
    for target in options(config).mcp_targets:
        name = f"agtool-mcp:{target}"
        collector = McpServerCollector.from_parent(session, name=name, nodeid=name,
                                                   target=target)
        items.extend(session.genitems(collector))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    warned = config.stash.get(_WARNED, [])
    if warned:
        terminalreporter.section("agtool mcp warnings")
        for line in warned:
            terminalreporter.write_line(line)


class McpServerCollector(pytest.Collector):
    """The tools of one ``--agtool-mcp`` server, listed through the official client."""

    def __init__(self, *, target: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target = target

    def collect(self) -> Iterator[McpToolCollector]:
        from ._mcp_check import McpTarget, plan, tools_under_test

        given = check_options(self.config)
        server = McpTarget(self.target, env=given.env, timeout=given.timeout,
                           tool_timeouts=given.tool_timeouts)
        self.config.stash[_TARGETS].append(server)
        tools = tools_under_test(server, given.examples)
        only = set(options(self.config).mcp_items)
        items = [item for item in plan(tools, allow_writes=given.allow_writes,
                                       allow_tools=given.allow_tools)
                 if not only or item.name in only]
        for tool in tools:
            mine = [item for item in items if item.tool == tool.name]
            if mine:
                yield McpToolCollector.from_parent(self, name=tool.name, server=server,
                                                   tool=tool, items=mine)

    def repr_failure(self, excinfo: ExceptionInfo[BaseException],
                     style: Any = None) -> str | TerminalRepr:
        if isinstance(excinfo.value, (AgtoolError, ValueError)):
            return f"--agtool-mcp={self.target}: {excinfo.value}"
        return super().repr_failure(excinfo)


class McpToolCollector(pytest.Collector):
    """One tool's items."""

    def __init__(self, *, server: McpTarget, tool: ToolUnderTest, items: list[CheckItem],
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.server, self.tool, self.items = server, tool, items

    def collect(self) -> Iterator[McpItem]:
        for item in self.items:
            yield McpItem.from_parent(self, name=item.label, check=item)


class McpItem(pytest.Item):
    """One property of one MCP tool, run as a Hypothesis test against the live server."""

    def __init__(self, *, check: CheckItem, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check
        self.add_marker(pytest.mark.agtool)
        target = self._collector.server.target
        self.agtool_info = {"source": target, "tool": check.tool, "property": check.prop,
                            "case": check.case_label}
        self.result: ItemResult | None = None

    @property
    def _collector(self) -> McpToolCollector:
        parent = self.parent
        if not isinstance(parent, McpToolCollector):  # pragma: no cover - built by collect()
            raise TypeError(f"an McpItem belongs to an McpToolCollector, not {parent!r}")
        return parent

    def runtest(self) -> None:
        from hypothesis import settings

        from ._mcp_check import run_item

        seed = run_seed(self.config)
        collector = self._collector
        result = run_item(collector.server, collector.tool, self.check, settings(), seed)
        self.result = result
        self.agtool_info["verdict"] = result.outcome
        self.user_properties += [("examples", result.examples), ("seed", seed),
                                 ("verdict", result.outcome)]
        if result.outcome == "skipped":
            pytest.skip(result.message)
        if result.outcome == "inconclusive":
            pytest.skip(f"inconclusive: {result.message.splitlines()[0]}")
        strict = check_options(self.config).strict
        if result.outcome == "failed" or (result.outcome == "warned" and strict):
            raise McpFinding(result.message)
        if result.outcome == "warned":
            self.config.stash[_WARNED].append(
                f"WARN {self.check.tool} {self.check.label}: {result.message.splitlines()[0]}")

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"agtool mcp {self.check.label} {self.check.tool}"

    def replay(self) -> str:
        """The pytest command that runs this item alone, with the same calls."""
        from ._mcp_options import command_line

        target = self._collector.server.target
        return command_line(["pytest", f"--agtool-mcp={target}",
                             f"--hypothesis-seed={run_seed(self.config)}",
                             *check_options(self.config).replay_flags(pytest=True),
                             f"--agtool-item={self.check.name}"])

    def repr_failure(self, excinfo: ExceptionInfo[BaseException],
                     style: Any = None) -> str | TerminalRepr:
        if not isinstance(excinfo.value, (McpFinding, AgtoolError)):
            return super().repr_failure(excinfo, style)  # a crash of the harness: traceback
        target = self._collector.server.target
        lines = [f"agtool mcp: {self.check.prop!r} does not hold for tool "
                 f"{self.check.tool!r} of {target}", "", str(excinfo.value), "",
                 f"replay: {self.replay()}"]
        return "\n".join(lines)
