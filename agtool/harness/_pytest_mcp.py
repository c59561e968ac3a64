"""The harness on an MCP server, as pytest items: ``pytest --agtool-mcp="python server.py"``.

::

    pytest --agtool-mcp="python my_server.py"                 # a stdio server, started here
    pytest --agtool-mcp=http://127.0.0.1:8000/mcp             # a running streamable HTTP one
    pytest --agtool-mcp="python my_server.py" --agtool-allow-writes

Items, per tool of the server (see ``agtool.harness._mcp_check`` for what each checks)::

    agtool-mcp:python my_server.py::<tool>::refused[type:limit]   one per defect site
    agtool-mcp:python my_server.py::<tool>::mistake[bool-for-int] one per model mistake
    agtool-mcp:python my_server.py::<tool>::accepts               a valid call, its result
    agtool-mcp:python my_server.py::<tool>::contract              skipped: what the importer
                                                                  cannot enforce

Each item draws at most ``EXAMPLES_PER_ITEM`` examples of the profile's
(``--hypothesis-profile``), with the run's seed: ``--hypothesis-seed`` if
given, else a fixed one under a derandomized profile (``ci``), else a new one,
printed in the header. An item carries the ``agtool`` marker, ``agtool_info``
and, once run, the ``examples`` and ``seed`` user properties. A server that
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

    from ._mcp_check import CheckItem, McpTarget, ToolUnderTest

__all__ = ["McpItem", "McpServerCollector", "McpToolCollector"]

_TARGETS = pytest.StashKey[list["McpTarget"]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "agtool: an item of agtool's harness")
    config.stash[_TARGETS] = []
    # As agtool.harness._pytest_table does: the harness's profiles, dev or ci unless one was chosen.
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


class McpServerCollector(pytest.Collector):
    """The tools of one ``--agtool-mcp`` server, listed through the official client."""

    def __init__(self, *, target: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target = target

    def collect(self) -> Iterator[McpToolCollector]:
        from ._mcp_check import McpTarget, plan, tools_under_test

        server = McpTarget(self.target)
        self.config.stash[_TARGETS].append(server)
        tools = tools_under_test(server)
        items = plan(tools, allow_writes=options(self.config).allow_writes)
        for tool in tools:
            yield McpToolCollector.from_parent(
                self, name=tool.name, server=server, tool=tool,
                items=[item for item in items if item.tool == tool.name])

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
        self.agtool_info = {"source": target, "tool": check.tool, "property": check.prop}
        self._test: Any = None
        self._checks: Any = None

    @property
    def _collector(self) -> McpToolCollector:
        parent = self.parent
        if not isinstance(parent, McpToolCollector):  # pragma: no cover - built by collect()
            raise TypeError(f"an McpItem belongs to an McpToolCollector, not {parent!r}")
        return parent

    @property
    def obj(self) -> Any:
        """The Hypothesis test; Hypothesis's plugin reads it to report statistics."""
        if self._test is None and not self.check.skip:
            from hypothesis import settings

            from ._mcp_check import item_test

            collector = self._collector
            self._test, self._checks = item_test(collector.server, collector.tool, self.check,
                                                 settings(), run_seed(self.config))
        return self._test

    def runtest(self) -> None:
        seed = run_seed(self.config)
        if self.check.skip:
            self.user_properties += [("examples", 0), ("seed", seed)]
            pytest.skip(self.check.skip)
        try:
            self.obj()
        finally:
            sent = self._checks.sent if self._checks is not None else 0
            self.user_properties += [("examples", sent), ("seed", seed)]
            # Hypothesis would offer a patch adding @example to the harness's own test.
            self.__dict__.pop("_hypothesis_failing_examples", None)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"agtool mcp {self.check.label} {self.check.tool}"

    def repr_failure(self, excinfo: ExceptionInfo[BaseException],
                     style: Any = None) -> str | TerminalRepr:
        failures = getattr(excinfo.value, "exceptions", None) or [excinfo.value]
        if not all(isinstance(failure, (AssertionError, AgtoolError)) for failure in failures):
            return super().repr_failure(excinfo, style)  # a crash of the harness: traceback
        target = self._collector.server.target
        seed = run_seed(self.config)
        lines = [f"agtool mcp: {self.check.prop!r} does not hold for tool "
                 f"{self.check.tool!r} of {target}"]
        for failure in failures:
            lines += ["", str(failure), *getattr(failure, "__notes__", [])]
        lines += ["", f"replay: pytest --agtool-mcp={target!r} --hypothesis-seed={seed} "
                      f"-k {self.check.tool!r}"]
        return "\n".join(lines)
