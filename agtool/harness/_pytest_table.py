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
    agtool:package.module:TOOLS::<tool>::returns              the real body answers every valid
                                                              call and keeps its return contract
    agtool:package.module:TOOLS::<tool>::interrupted          a BaseException from the body
                                                              propagates, leaving nothing behind
    agtool:package.module:TOOLS::<tool>::replaced             calls racing table replacement
                                                              answer honestly, never raise

Every run, whatever the profile, ``returns`` calls each argument's allowed values
and bounds and ``envelope`` makes one call of every hostile class
(``strategies.HOSTILE_CLASSES``), as explicit examples: a bug there is found on
every run, not on a lucky seed. A failure is reported in the harness's words
(``failure_report``): what must never happen, the call, its answer, and the
command that replays it (``--hypothesis-seed``, ``--agtool-reproduce``). Every
item is marked ``agtool`` and carries ``agtool_info`` (see ``pytest_agtool``
for ``--agtool-only`` and ``--agtool-summary``).

Write tools (``"effect": "write"``) are always stubbed and have no
``returns`` item: the harness never acts on the world, and their ``memo``
item proves the idempotency key's promise instead. ``--agtool-stub-bodies``
replaces every other body with a recording stub too, returning a value drawn
from the return contract; ``returns`` is then not collected. Bodies are
always stubs for ``refused`` and ``bad_result``. Calls are made as a trusted
caller: every risk level in scope, an approval of each call's arguments. A
malformed table is a collection error naming the tool and the field.
Settings come from ``--hypothesis-profile`` (``dev``, ``ci``, ``thorough``,
see ``agtool.harness.strategies.profiles``); ``--hypothesis-show-statistics`` shows what
each property drew.

This module is the plugin's body: ``pytest_agtool`` (the ``pytest11`` entry
point, outside this package) registers it only when ``--agtool-table`` is
given, so a plain pytest session imports neither agtool nor Hypothesis early.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from .._contract import check_table
from .._errors import ContractError, TableError
from .._loader import load_table as _load_table
from ._pytest_options import options

if TYPE_CHECKING:
    from _pytest._code.code import ExceptionInfo, TerminalRepr

    from .strategies._properties import Case

__all__ = ["AgtoolItem", "TableCollector", "ToolCollector", "failure_report", "item_seed"]



def pytest_configure(config: pytest.Config) -> None:
    # pytest_agtool registers this module from its own tryfirst pytest_configure,
    # so this runs before Hypothesis's plugin loads --hypothesis-profile.
    from hypothesis import settings

    from .strategies.profiles import load_default_profile, register_profiles

    register_profiles()
    if settings.get_current_profile_name() == "default":
        load_default_profile()  # no one chose: dev, or ci when CI is set


def item_seed(config: pytest.Config) -> int | None:
    """The seed the session's harness items draw with; ``None`` under a derandomized profile
    (the same examples on every run, so the same command replays a failure)."""
    from hypothesis import settings

    if settings().derandomize:
        return None
    return options(config).seed


def pytest_report_header(config: pytest.Config) -> str:
    seed = item_seed(config)
    replay = "derandomized profile" if seed is None else f"--hypothesis-seed={seed}"
    return f"agtool harness: {replay}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    # tryfirst: added before -k and -m deselect, so they select agtool items too.
    for spec in options(config).tables:
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
        from .strategies import PROPERTIES, case_id, property_cases

        stub = options(self.config).stub_bodies
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
    """One property of one tool, run as a Hypothesis test.

    Marked ``agtool``, with ``agtool_info`` and, once run, the examples,
    failures and seed in ``user_properties`` (see ``pytest_agtool``).
    """

    def __init__(self, *, prop: str, case: Case, stub: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        from .strategies import case_id

        self.prop = prop
        self.case = case
        self.stub = stub
        self._test: Any = None
        self._examples = [0]
        self.add_marker(options(self.config).marker)
        table = self._collector.parent
        self.agtool_info = {"source": table.spec if isinstance(table, TableCollector) else "",
                            "tool": self.tool, "property": prop, "case": case_id(case)}

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
            import hypothesis
            from hypothesis import settings

            from .strategies import property_test

            test: Any = property_test(self.prop, self._collector.table, self.tool, self.case,
                                 stub_bodies=self.stub, settings=settings(print_blob=True))
            seed = item_seed(self.config)
            if seed is not None:
                test = hypothesis.seed(seed)(test)
            blob = options(self.config).reproduce
            if blob:
                test = hypothesis.reproduce_failure(hypothesis.__version__, blob.encode())(test)
            inner = test.hypothesis.inner_test
            counted = self._examples

            def counting(*args: Any, **kwargs: Any) -> None:
                counted[0] += 1
                inner(*args, **kwargs)

            test.hypothesis.inner_test = counting
            self._test = test
        return self._test

    def runtest(self) -> None:
        failures = 0
        try:
            self.obj()
        except BaseException as exc:
            failures = len(getattr(exc, "exceptions", None) or [exc])
            raise
        finally:
            # Hypothesis would offer a patch adding @example to the harness's own
            # test function, which is not where the user's failure lives.
            self.__dict__.pop("_hypothesis_failing_examples", None)
            self.user_properties += [("examples", self._examples[0]), ("failures", failures),
                                     ("seed", item_seed(self.config))]

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"agtool {self.prop} {self.tool}"

    def repr_failure(self, excinfo: ExceptionInfo[BaseException],
                     style: Any = None) -> str | TerminalRepr:
        from hypothesis import settings

        failures = getattr(excinfo.value, "exceptions", None) or [excinfo.value]
        return failure_report(self.prop, self.tool, self.agtool_info["source"], self.name,
                              list(failures), item_seed(self.config),
                              settings.get_current_profile_name(), self.stub)


# --- the failure report -------------------------------------------------------------------------

_BLOB = re.compile(r"@reproduce_failure\('[^']*', b'([^']+)'\)")
#: Hypothesis's own notes that the report says in its own words, or that are a wall of repr.
_THEIRS = ("Falsifying", "Failing", "You can reproduce", "Explanation:", "The test ")
_NOTE_CHARS = 300


def failure_report(prop: str, tool: str, source: str, item: str, failures: list[BaseException],
                   seed: int | None, profile: str, stub: bool) -> str:
    """A failing harness item in a few lines: what must never happen, the call, what it came
    to, and the command that replays it."""
    from ._checks import raised_at, show
    from .strategies import PROMISES

    verdicts = all(isinstance(failure, AssertionError) for failure in failures)
    head = "failed" if verdicts else "could not be run"
    count = f" ({len(failures)} distinct failures)" if len(failures) > 1 else ""
    lines = [f"agtool: property {prop!r} {head} for tool {tool!r} of {source}{count}",
             f"  must never happen: {PROMISES.get(prop, prop)}"]
    blob = ""
    for failure in failures:
        notes = [str(note) for note in getattr(failure, "__notes__", [])]
        found = next((match.group(1) for note in notes for match in [_BLOB.search(note)]
                      if match), "")
        blob = blob or found
        lines += ["", *_indented("found:  ", str(failure) if verdicts or str(failure)
                                 else type(failure).__name__)]
        if not isinstance(failure, AssertionError):
            lines.append(f"  error:  {type(failure).__name__} at {raised_at(failure)}")
        call = getattr(failure, "agtool_call", None)
        if call is not None and call.name is not None:
            # A str name is shown escaped and bounded, without its quotes.
            called = show(call.name)[1:-1] if type(call.name) is str else show(call.name)
            lines.append(f"  call:   {called}({show(call.args)})")
            if call.envelope is not None:
                lines.append(f"  answer: {show(call.envelope)}")
            for label, exc in (("raised", call.raised), ("body raised", call.body_raised)):
                if exc is not None:
                    lines.append(f"  {label}: {show(exc)} at {raised_at(exc)}")
        lines += [f"  note:   {note[:_NOTE_CHARS]}" for note in notes
                  if note and not note.startswith(_THEIRS) and "@reproduce_failure" not in note]
    argv = ["pytest", f"--agtool-table={source}", "--agtool-only", "-k", f"{tool} and {item}"]
    if stub:
        argv.append("--agtool-stub-bodies")
    argv.append(f"--hypothesis-profile={profile}")
    if seed is not None:
        argv.append(f"--hypothesis-seed={seed}")
    lines += ["", f"  replay: {shlex.join(argv)}"]
    if blob:
        lines.append(f"          exactly this example: add --agtool-reproduce={blob}")
    return "\n".join(lines)


def _indented(label: str, text: str) -> list[str]:
    first, *rest = text.splitlines() or [""]
    return [f"  {label}{first}", *(f"  {' ' * len(label)}{line}" for line in rest)]
