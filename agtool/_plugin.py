"""The agtool pytest plugin: prove the gate's promises for your own contract table.

::

    pytest --agtool-table=package.module:TOOLS                 # real tool bodies
    pytest --agtool-table=package.module:TOOLS --agtool-stub-bodies

For every tool of the table this adds test items, one per property and case::

    agtool:package.module:TOOLS::<tool>::refused[min:limit]   refused with exactly that reason,
                                                              the body never run
    agtool:package.module:TOOLS::<tool>::memo                 a valid call runs once, its repeat
                                                              in any key order never
    agtool:package.module:TOOLS::<tool>::bad_result[range]    a bad result is refused and not
                                                              remembered
    agtool:package.module:TOOLS::<tool>::envelope             any name, any args: never raises,
                                                              one honest answer
    agtool:package.module:TOOLS::<tool>::returns              the real body takes every valid
                                                              call and keeps its return contract

Write tools (``"effect": "write"``) are always stubbed and have no
``returns`` item: the harness never acts on the world, and their ``memo``
item proves the idempotency key's promise instead. ``--agtool-stub-bodies``
replaces every other body with a recording stub too, returning a value drawn
from the return contract; ``returns`` is then not collected. Bodies are
always stubs for ``refused`` and ``bad_result``. Calls are made as a trusted
caller: every risk level in scope, an approval of each call's arguments. A
malformed table is a collection error naming the tool and the field.
Settings come from ``--hypothesis-profile`` (``dev``, ``ci``, ``thorough``,
see ``strategies.profiles``); ``--hypothesis-show-statistics`` shows what
each property drew.

This module is the plugin's body: ``pytest_agtool`` (the ``pytest11`` entry
point, outside this package) registers it only when ``--agtool-table`` is
given, so a plain pytest session imports neither agtool nor Hypothesis early.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agtool import STUB_OPTION, TABLE_OPTION

from ._contract import check_table
from ._errors import ContractError
from ._loader import TableError
from ._loader import load_table as _load_table

if TYPE_CHECKING:
    from _pytest._code.code import ExceptionInfo, TerminalRepr

    from strategies._properties import Case

__all__ = ["AgtoolItem", "TableCollector", "ToolCollector"]

def pytest_configure(config: pytest.Config) -> None:
    # pytest_agtool registers this module from its own tryfirst pytest_configure,
    # so this runs before Hypothesis's plugin loads --hypothesis-profile.
    from hypothesis import settings

    from strategies.profiles import load_default_profile, register_profiles

    register_profiles()
    if settings.get_current_profile_name() == "default":
        load_default_profile()  # no one chose: dev, or ci when CI is set


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    # tryfirst: added before -k and -m deselect, so they select agtool items too.
    for spec in config.getoption(TABLE_OPTION):
        # An explicit id: a child of the session would get a bare "::" before its name.
        name = f"agtool:{spec}"
        collector = TableCollector.from_parent(session, name=name, nodeid=name, spec=spec)
        items.extend(session.genitems(collector))


def load_table(spec: str, rootpath: Any = None) -> Mapping[str, Any]:
    """The object ``module:NAME`` names, looked for in ``rootpath`` too; else ``TableError``."""
    return _load_table(spec, rootpath, option="--agtool-table")


class TableCollector(pytest.Collector):
    """The tools of one ``--agtool-table``; each healthy tool is a ``ToolCollector``."""

    def __init__(self, *, spec: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec

    def collect(self) -> Iterator[ToolCollector]:
        table = load_table(self.spec, self.config.rootpath)
        problems: dict[str, ContractError] = {}
        for name in table:
            try:
                check_table({name: table[name]})
            except ContractError as exc:
                problems[str(name)] = exc
        if not table:
            raise TableError(f"--agtool-table={self.spec}: the table has no tools")
        # The healthy tools are tested among themselves; each broken one is its own error.
        healthy = {name: entry for name, entry in table.items() if str(name) not in problems}
        for name in table:
            yield ToolCollector.from_parent(self, name=str(name), table=healthy,
                                            problem=problems.get(str(name)))

    def repr_failure(self, excinfo: ExceptionInfo[BaseException],
                     style: Any = None) -> str | TerminalRepr:
        if isinstance(excinfo.value, (TableError, ContractError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class ToolCollector(pytest.Collector):
    """One tool's properties, one ``AgtoolItem`` per property and case."""

    def __init__(self, *, table: Mapping[str, Any], problem: ContractError | None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.problem = problem

    def collect(self) -> Iterator[AgtoolItem]:
        if self.problem is not None:
            raise self.problem
        from strategies import PROPERTIES, case_id, property_cases

        stub = bool(self.config.getoption(STUB_OPTION))
        for prop in PROPERTIES:
            for case in property_cases(prop, self.table, self.name, stub_bodies=stub):
                label = case_id(case)
                yield AgtoolItem.from_parent(self, name=f"{prop}[{label}]" if label else prop,
                                             prop=prop, case=case, stub=stub)

    def repr_failure(self, excinfo: ExceptionInfo[BaseException],
                     style: Any = None) -> str | TerminalRepr:
        if isinstance(excinfo.value, ContractError):
            return f"agtool table {self.parent.name if self.parent else ''}: {excinfo.value}"
        return super().repr_failure(excinfo)


class AgtoolItem(pytest.Item):
    """One property of one tool, run as a Hypothesis test."""

    def __init__(self, *, prop: str, case: Case, stub: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.prop = prop
        self.case = case
        self.stub = stub
        self._test: Any = None

    @property
    def tool(self) -> str:
        """The tool this item tests."""
        return self._collector.name

    @property
    def _collector(self) -> ToolCollector:
        parent = self.parent
        if not isinstance(parent, ToolCollector):  # pragma: no cover - built only by collect()
            raise TypeError(f"an AgtoolItem belongs to a ToolCollector, not {parent!r}")
        return parent

    @property
    def obj(self) -> Any:
        """The Hypothesis test; Hypothesis's plugin reads it to report statistics."""
        if self._test is None:
            from strategies import property_test

            self._test = property_test(self.prop, self._collector.table, self.tool, self.case,
                                       stub_bodies=self.stub)
        return self._test

    def runtest(self) -> None:
        try:
            self.obj()
        finally:
            # Hypothesis would offer a patch adding @example to the harness's own
            # test function, which is not where the user's failure lives.
            self.__dict__.pop("_hypothesis_failing_examples", None)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"agtool {self.prop} {self.tool}"

    def repr_failure(self, excinfo: ExceptionInfo[BaseException],
                     style: Any = None) -> str | TerminalRepr:
        failures = getattr(excinfo.value, "exceptions", None) or [excinfo.value]
        if not all(isinstance(failure, AssertionError) for failure in failures):
            return super().repr_failure(excinfo, style)  # a crash, not a verdict: traceback
        lines = [f"agtool property {self.prop!r} does not hold for tool {self.tool!r}"]
        for failure in failures:
            lines += ["", str(failure), *getattr(failure, "__notes__", [])]
        return "\n".join(lines)
