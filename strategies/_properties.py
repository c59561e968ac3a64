"""Properties 1-4 (and the body's own contract) as runnable Hypothesis tests for any table.

``property_test`` builds one Hypothesis test for one property of one tool;
the pytest plugin runs it as an item, and ``run_property`` runs it directly
and counts examples and failures (the report uses this). Every example gets
a fresh gate over a one-tool copy of the table (``agtool._harness.instrument``),
so no example, test or worker shares a memo or a counter with another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, event, given
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from agtool import RESULT_CHECKS, check_table, parse_reason
from agtool._harness import (
    body_of,
    check_bad_result,
    check_envelope,
    check_memo,
    check_refused,
    check_returns,
    instrument,
    writes,
)

from ._args import (
    DefectSite,
    Table,
    any_calls,
    defect_sites,
    echo_values,
    one_defect_args,
    permuted,
    valid_args,
)
from ._results import bad_results, result_sites, valid_results

__all__ = [
    "PROPERTIES",
    "Case",
    "PropertyRun",
    "case_id",
    "property_cases",
    "property_test",
    "run_property",
]

#: The properties, in the order the plugin lists them.
PROPERTIES = ("refused", "memo", "bad_result", "envelope", "returns")
#: What a property is parametrized by: a defect site, a result kind, or nothing.
Case = DefectSite | str | None
# Health checks the plugin's items cannot take part in: they read pytest
# fixtures of a function item, and an agtool item has none.
_ITEM_CHECKS = (HealthCheck.function_scoped_fixture, HealthCheck.differing_executors)


@dataclass(frozen=True)
class PropertyRun:
    """What ``run_property`` measured: examples run, and distinct failures found."""

    prop: str
    tool: str
    examples: int
    failures: int
    messages: tuple[str, ...] = ()


def property_cases(prop: str, table: Table, name: str, *, stub_bodies: bool = False
                   ) -> list[Case]:
    """What ``prop`` is run over for ``name``, each run separately so every one runs each time.

    ``refused``: every defect site; ``bad_result``: every result kind the
    return contract can break; ``returns``: nothing with stubbed bodies or
    for a write tool (there is no body of the tool's own to check, and the
    harness never acts on the world); otherwise one run.
    """
    _check_prop(prop)
    if prop == "refused":
        return list(defect_sites(table, name))
    if prop == "bad_result":
        kinds = {site.kind for site in result_sites(table, name)}
        return [kind for kind in RESULT_CHECKS if kind in kinds]
    if prop == "returns" and name in _stubbed_tools(table, stub_bodies):
        return []
    return [None]


def case_id(case: Case) -> str:
    """The readable id of a case: ``min:limit``, ``range``, or ``""``."""
    return "" if case is None else str(case)


def _check_prop(prop: str) -> None:
    if prop not in PROPERTIES:
        raise InvalidArgument(f"prop={prop!r}; expected one of {list(PROPERTIES)}")


def property_test(prop: str, table: Table, name: str, case: Case = None, *,
                  stub_bodies: bool = False, settings: Settings | None = None
                  ) -> Callable[[], None]:
    """A Hypothesis test checking ``prop`` for tool ``name`` of ``table``: call it to run it.

    ``case`` narrows it (a ``DefectSite`` for ``refused``, a result kind for
    ``bad_result``). ``stub_bodies`` keeps the tool's real function from ever
    running: bodies return values drawn from the return contract. Bodies are
    always stubbed for ``refused`` and ``bad_result``, which must not run a
    body or choose what it returns.
    """
    _check_prop(prop)
    check_table(table)  # a malformed table is a ContractError here, not in every example
    strategy, check = _PROPERTIES[prop](table, name, case, stub_bodies)

    def test(drawn: Any) -> None:
        check(drawn)

    wrapped = given(strategy)(test)
    base = settings if settings is not None else Settings()
    wrapped = Settings(base, suppress_health_check=(*base.suppress_health_check, *_ITEM_CHECKS))(
        wrapped)
    # One example-database key per property, tool and case, not one for all of them.
    wrapped.hypothesis.inner_test._hypothesis_internal_add_digest = (  # type: ignore[attr-defined]
        f"agtool:{prop}:{name}:{case_id(case)}".encode())
    return wrapped


def run_property(prop: str, table: Table, name: str, settings: Settings | None = None, *,
                 case: Case = None, all_cases: bool = True, stub_bodies: bool = False
                 ) -> PropertyRun:
    """Run ``prop`` for ``name`` and count examples run and failures found; never raises on one.

    With ``all_cases`` (the default, when ``case`` is ``None``) every case of
    ``property_cases`` is run with ``settings`` and the counts are summed.
    ``examples`` counts every example the test body ran, shrinking included;
    ``failures`` counts distinct failures (Hypothesis reports each distinct
    bug once). Do not call it from inside a running Hypothesis test.
    """
    cases = (property_cases(prop, table, name, stub_bodies=stub_bodies)
             if case is None and all_cases else [case])
    examples = failures = 0
    messages: list[str] = []
    for one in cases:
        test = property_test(prop, table, name, one, stub_bodies=stub_bodies, settings=settings)
        inner = test.hypothesis.inner_test  # type: ignore[attr-defined]
        counted = [0]

        def counting(drawn: Any, inner: Callable[[Any], None] = inner,
                     counted: list[int] = counted) -> None:
            counted[0] += 1
            inner(drawn)

        test.hypothesis.inner_test = counting  # type: ignore[attr-defined]
        try:
            test()
        except Exception as exc:
            # Several distinct bugs come as an ExceptionGroup, one exception each.
            found = getattr(exc, "exceptions", None) or [exc]
            failures += len(found)
            messages += [f"{case_id(one)}: {type(one_exc).__name__}: {one_exc}"
                         for one_exc in found]
        examples += counted[0]
    return PropertyRun(prop, name, examples, failures, tuple(messages))


# --- the properties -------------------------------------------------------------------------------


def _stubbed_tools(table: Table, stub_bodies: bool) -> frozenset[str]:
    """The tools whose bodies ``instrument`` stubs: all when asked, else the write tools.

    Worked out once per property, not per example: it reads the whole table.
    """
    contracts = check_table(table)
    return frozenset(name for name, contract in contracts.items()
                     if stub_bodies or writes(contract))


Check = Callable[[Any], None]
Built = tuple[st.SearchStrategy[Any], Check]


def _refused(table: Table, name: str, case: Case, stub_bodies: bool) -> Built:
    site = case if isinstance(case, DefectSite) else None
    strategy = (one_defect_args(table, name) if site is None
                else one_defect_args(table, name, site.kind, site.arg, site.path))

    def check(call: Any) -> None:
        check_refused(instrument(table, [name], stub=True), name, call.args, call.reason,
                      call.echo)

    return strategy, check


@st.composite
def _memo_calls(draw: st.DrawFn, table: Table, name: str, stubbed: bool
                ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], Any]:
    args = draw(valid_args(table, name))
    reordered = draw(permuted(args))
    other = draw(valid_args(table, name))
    value = draw(valid_results(table, name)) if stubbed else None
    return args, reordered, other, value


def _memo(table: Table, name: str, case: Case, stub_bodies: bool) -> Built:
    stubbed = name in _stubbed_tools(table, stub_bodies)

    def check(drawn: Any) -> None:
        args, reordered, other, value = drawn
        gate = instrument(table, [name], stub=stub_bodies)
        if stubbed:
            body_of(gate, name).value = value
        first = check_memo(gate, name, args, reordered, other)
        event("memo: first call " + ("answered" if first["ok"] else first["error"]))

    return _memo_calls(table, name, stubbed), check


def _bad_result(table: Table, name: str, case: Case, stub_bodies: bool) -> Built:
    kind = case if isinstance(case, str) else None
    strategy = st.tuples(valid_args(table, name), bad_results(table, name, kind))

    def check(drawn: Any) -> None:
        args, bad = drawn
        gate = instrument(table, [name], stub=True)
        check_bad_result(gate, name, args, bad.value, bad.reason)

    return strategy, check


@st.composite
def _envelope_calls(draw: st.DrawFn, table: Table, stubbed: frozenset[str]
                    ) -> tuple[Any, Any, Any, Any]:
    name, args = draw(any_calls(table))
    value = echo = None
    known = isinstance(name, str) and name in table
    if known and name in stubbed:
        value = draw(valid_results(table, name))
    if known and type(args) is dict and draw(st.booleans()):
        echo = echo_values(check_table(table)[name].args, args)  # a faithful copier
    return name, args, value, echo


def _envelope(table: Table, name: str, case: Case, stub_bodies: bool) -> Built:
    # Any name at all is called, so the gate holds the whole table; ``name`` only
    # names the test. The names any_calls draws are the table's own or not in it.
    stubbed = _stubbed_tools(table, stub_bodies)

    def check(drawn: Any) -> None:
        called, args, value, echo = drawn
        gate = instrument(table, stub=stub_bodies)
        if isinstance(called, str) and called in stubbed:
            body_of(gate, called).value = value
        envelope = check_envelope(gate, called, args, echo)
        stage, check_name, _ = parse_reason(envelope["error"])
        event("envelope: " + (f"{stage}:{check_name}" if stage else "ok"))

    return _envelope_calls(table, stubbed), check


def _returns(table: Table, name: str, case: Case, stub_bodies: bool) -> Built:
    def check(args: Any) -> None:
        envelope = check_returns(instrument(table, [name]), name, args)
        event("returns: " + ("ok" if envelope["ok"] else envelope["error"]))

    return valid_args(table, name), check


_PROPERTIES: Mapping[str, Callable[[Table, str, Case, bool], Built]] = {
    "refused": _refused,
    "memo": _memo,
    "bad_result": _bad_result,
    "envelope": _envelope,
    "returns": _returns,
}
