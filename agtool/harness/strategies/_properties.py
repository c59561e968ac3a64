"""Properties 1-4 (and the body's own contract) as runnable Hypothesis tests for any table.

``property_test`` builds one Hypothesis test for one property of one tool;
the pytest plugin runs it as an item, and ``run_property`` runs it directly
and counts examples and failures (the report uses this). Every example gets
a fresh gate over a one-tool copy of the table (``agtool.harness._checks.instrument``),
so no example, test or worker shares a memo or a counter with another.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, event, example, given, reject
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ..._contract import check_table
from ..._gate import Gate
from ..._jsonschema.export import to_json_schema
from ..._reasons import RESULT_CHECKS, parse_reason
from .._checks import (
    LastCall,
    body_of,
    check_bad_result,
    check_envelope,
    check_hostile,
    check_interrupted,
    check_memo,
    check_refused,
    check_replaced,
    check_returns,
    instrument,
    last_call,
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
from ._hostile import (
    _DICTS,
    INTERRUPTS,
    HostileCall,
    boundary_args,
    hostile_calls,
    hostile_examples,
)
from ._oracle import defect_count
from ._results import bad_results, result_sites, valid_results

__all__ = [
    "PROMISES",
    "PROPERTIES",
    "Case",
    "PropertyRun",
    "case_id",
    "property_cases",
    "property_test",
    "run_property",
]

#: The properties, in the order the plugin lists them.
PROPERTIES = ("refused", "memo", "bad_result", "envelope", "returns", "interrupted", "replaced")
#: What each property says must never happen, as a failure report states it.
PROMISES: Mapping[str, str] = {
    "refused": "a call with one defect in its arguments reaches the body, or is refused for "
               "another reason than that defect",
    "memo": "a repeated successful call runs the body again, or a failure is remembered",
    "bad_result": "a result that breaks the return contract is answered as a success, or "
                  "remembered",
    "envelope": "the gate raises, or answers a call (of any name, any args, any hostile "
                "input) with anything but one honest envelope",
    "returns": "the body raises, or breaks its return contract, on a call its contract "
               "accepts",
    "interrupted": "a KeyboardInterrupt, SystemExit or cancellation raised by the body is "
                   "swallowed, or leaves a memo entry or a claimed write key behind",
    "replaced": "the gate raises, or answers dishonestly, while the table is being replaced",
}
#: What a property is parametrized by: a defect site, a result kind, or nothing.
Case = DefectSite | str | None
#: Properties whose every example is a whole run of threads: past a few races, more
#: examples add time, not coverage (the race is in the interleavings, each example has many).
_EXAMPLE_CAPS = {"replaced": 10}
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
        try:
            check(drawn)
        except AssertionError as exc:
            # The call the check made last, kept for the report: the final replay of a
            # shrunk example is not the last call of the run when several bugs are found.
            last = last_call()
            exc.agtool_call = LastCall(last.name, last.args, last.envelope,  # type: ignore[attr-defined]
                                       last.raised, last.body_raised)
            raise

    for one in reversed(_EXAMPLES[prop](table, name, case, stub_bodies)):
        test = example(one)(test)
    wrapped = given(strategy)(test)
    base = settings if settings is not None else Settings()
    if prop in _EXAMPLE_CAPS:
        base = Settings(base, max_examples=min(base.max_examples, _EXAMPLE_CAPS[prop]))
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
    schema = to_json_schema(table, name)

    def check(call: Any) -> None:
        # An independent reading of the contract must see exactly one defect, or the
        # example proves nothing about that defect (shrinking must not lose it).
        defects = defect_count(schema, call.args)
        if call.site.check != "echo" and defects != 1:
            event(f"refused: rejected, jsonschema sees {defects} defect(s)")
            reject()
        gate = instrument(table, [name], stub=True)
        check_refused(gate, name, call.args, call.reason, call.echo)
        # The same items in every lying or raising dict get the same refusal, every example.
        for cls in _DICTS.values():
            check_refused(gate, name, cls(call.args), call.reason, call.echo)

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


@st.composite
def _hostile_with_value(draw: st.DrawFn, table: Table, name: str, stubbed: bool
                        ) -> tuple[HostileCall, Any]:
    call = draw(hostile_calls(table, name))
    return call, draw(valid_results(table, name)) if stubbed else None


def _envelope(table: Table, name: str, case: Case, stub_bodies: bool) -> Built:
    # Any name at all is called, so the gate holds the whole table; ``name`` only
    # names the test. The names any_calls draws are the table's own or not in it.
    # Hostile calls are built over ``name``'s arguments.
    stubbed = _stubbed_tools(table, stub_bodies)
    strategy = st.one_of(_envelope_calls(table, stubbed),
                         _hostile_with_value(table, name, name in stubbed))
    pair: list[Gate] = []  # built once: a gate costs more to build than all its hostile calls

    def check(drawn: Any) -> None:
        if isinstance(drawn[0], HostileCall):
            if not pair:
                pair.extend(instrument(table, [name], stub=stub_bodies) for _ in range(2))
            _check_hostile_call(pair, stubbed, *drawn)
            return
        called, args, value, echo = drawn
        gate = instrument(table, stub=stub_bodies)
        if isinstance(called, str) and called in stubbed:
            body_of(gate, called).value = value
        envelope = check_envelope(gate, called, args, echo)
        stage, check_name, _ = parse_reason(envelope["error"])
        event("envelope: " + (f"{stage}:{check_name}" if stage else "ok"))

    return strategy, check


def _check_hostile_call(pair: list[Gate], stubbed: frozenset[str], call: HostileCall,
                        value: Any) -> None:
    gate, twin = pair
    gate.clear()
    twin.clear()
    if call.tool in stubbed:
        # A stub answers a valid result: drawn, or (in an explicit example) a reason to refuse.
        body_of(gate, call.tool).value = body_of(twin, call.tool).value = value
    check_hostile(gate, twin, call.name, call.args, call.expected, call.plain, call.echo,
                  **call.given)


def _returns(table: Table, name: str, case: Case, stub_bodies: bool) -> Built:
    def check(args: Any) -> None:
        envelope = check_returns(instrument(table, [name]), name, args)
        event("returns: " + ("ok" if envelope["ok"] else envelope["error"]))

    return valid_args(table, name), check


def _interrupted(table: Table, name: str, case: Case, stub_bodies: bool) -> Built:
    def check(drawn: Any) -> None:
        args, value = drawn
        # Every kind, every example: the one a gate mishandles is never left to luck.
        for kind in INTERRUPTS:
            gate = instrument(table, [name], stub=True)
            check_interrupted(gate, name, args, kind("raised by the harness"), value)
        event("interrupted: every kind of interrupt")

    return st.tuples(valid_args(table, name), valid_results(table, name)), check


def _replaced(table: Table, name: str, case: Case, stub_bodies: bool) -> Built:
    def check(drawn: Any) -> None:
        args, values = drawn
        gate = instrument(table, [name], stub=True)
        check_replaced(gate, name, args, values)

    values = st.lists(valid_results(table, name), min_size=1, max_size=3)
    return st.tuples(valid_args(table, name), values), check


def _no_examples(table: Table, name: str, case: Case, stub_bodies: bool) -> list[Any]:
    return []


def _envelope_examples(table: Table, name: str, case: Case, stub_bodies: bool) -> list[Any]:
    """Every hostile class, over the simplest valid call (a stub answers a valid result)."""
    stubbed = name in _stubbed_tools(table, stub_bodies)
    value = _simplest_result(table, name) if stubbed else None
    return [(call, value) for call in _examples_or_none(hostile_examples, table, name)]


def _returns_examples(table: Table, name: str, case: Case, stub_bodies: bool) -> list[Any]:
    """Every allowed value and every bound of each argument, each on its own."""
    return _examples_or_none(boundary_args, table, name)


def _examples_or_none(build: Callable[[Table, str], list[Any]], table: Table, name: str
                      ) -> list[Any]:
    try:
        return build(table, name)
    except InvalidArgument:
        return []  # no call keeps the contract: the drawn examples say so, naming the field


def _simplest_result(table: Table, name: str) -> Any:
    from ._hostile import _simplest_of

    try:
        return _simplest_of(valid_results(table, name))
    except InvalidArgument:
        return None


_EXAMPLES: Mapping[str, Callable[[Table, str, Case, bool], list[Any]]] = {
    "refused": _no_examples,
    "memo": _no_examples,
    "bad_result": _no_examples,
    "envelope": _envelope_examples,
    "returns": _returns_examples,
    "interrupted": _no_examples,
    "replaced": _no_examples,
}


_PROPERTIES: Mapping[str, Callable[[Table, str, Case, bool], Built]] = {
    "refused": _refused,
    "memo": _memo,
    "bad_result": _bad_result,
    "envelope": _envelope,
    "returns": _returns,
    "interrupted": _interrupted,
    "replaced": _replaced,
}
