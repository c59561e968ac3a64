"""The agtool pytest plugin, run on tables that are not the reference one.

Each test writes a small ticket/refund table into a fresh directory and runs
pytest on it with ``--agtool-table``: a healthy table passes, a body that
breaks its return contract for some inputs fails with a readable report, a
malformed table is a collection error naming the tool and the field.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator

import pytest
from hypothesis import settings

pytest_plugins = ["pytester"]

# A table in the style of a helpdesk: tickets and refunds, with ``BODY`` swapped per test.
TABLE = '''
def ran(name):
    with open("bodies_ran.txt", "a") as log:  # a side effect the stubs must never cause
        log.write(name + "\\n")

def get_ticket(ticket_id, verbose=False):
    ran("get_ticket")
    return {"id": ticket_id, "status": "open" if ticket_id.endswith("1") else "closed"}

def refund(order_id, amount_cents, reason):
    ran("refund")
    return {"order_id": order_id, "refunded": BODY}

TOOLS = {
    "get_ticket": {
        "fn": get_ticket,
        "args": {"ticket_id": {"type": "str", "pattern": "T-[0-9]{4}"},
                 "verbose": {"type": "bool", "required": False}},
        "returns": {"id": {"type": "str"},
                    "status": {"type": "str", "allowed": ["open", "closed"]}},
    },
    "refund": {
        "fn": refund,
        "args": {"order_id": {"type": "str", "pattern": "ORD-[0-9]{10}"},
                 "amount_cents": {"type": "int", "min": 1, "MAX": 100000},
                 "reason": {"type": "str",
                            "allowed": ["duplicate", "service_failure", "customer_request"]}},
        "returns": {"order_id": {"type": "str"}, "refunded": {"type": "int", "min": 1}},
    },
}
EMPTY = {}
# An int between 0.5 and 0.7: a contract check_table accepts and no call can keep.
IMPOSSIBLE = {"count": {"fn": refund, "args": {"n": {"type": "int", "min": 0.5, "max": 0.7}},
                        "returns": {}}}
'''
HEALTHY = "amount_cents"
#: Refunds of 10 cents or more come back negative: wrong only for some inputs.
BROKEN = "amount_cents if amount_cents < 10 else -amount_cents"
#: A small fixed profile for the runs inside these tests: they test the plugin, not the gate.
PROFILE = """
from hypothesis import settings

settings.register_profile("plugin-test", max_examples=8, derandomize=True, database=None,
                          deadline=None)
"""
#: Every item the healthy table must produce, named per tool, property and case.
HEALTHY_ITEMS = {
    "get_ticket::refused[unexpected:*]", "get_ticket::refused[missing:ticket_id]",
    "get_ticket::refused[type:ticket_id]", "get_ticket::refused[pattern:ticket_id]",
    "get_ticket::refused[type:verbose]", "get_ticket::memo", "get_ticket::bad_result[shape]",
    "get_ticket::bad_result[range]", "get_ticket::envelope", "get_ticket::returns",
    "refund::refused[unexpected:*]", "refund::refused[missing:order_id]",
    "refund::refused[type:order_id]", "refund::refused[pattern:order_id]",
    "refund::refused[missing:amount_cents]", "refund::refused[type:amount_cents]",
    "refund::refused[min:amount_cents]", "refund::refused[max:amount_cents]",
    "refund::refused[missing:reason]", "refund::refused[type:reason]",
    "refund::refused[allowed:reason]", "refund::memo", "refund::bad_result[shape]",
    "refund::bad_result[range]", "refund::envelope", "refund::returns",
    "get_ticket::interrupted", "get_ticket::replaced", "refund::interrupted", "refund::replaced",
}


def write_table(pytester: pytest.Pytester, module: str, body: str = HEALTHY,
                max_value: str = "100000", *, on_path: bool = True) -> None:
    """A table module in the test's own directory, importable by the pytest run there."""
    source = TABLE.replace("BODY", body).replace('"MAX": 100000', f'"max": {max_value}')
    pytester.makepyfile(**{module: textwrap.dedent(source)})
    if on_path:
        pytester.makeconftest(PROFILE)
        pytester.syspathinsert()


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest in the test's directory: a small profile, no cache, the plugin's options."""
    return pytester.runpytest("-p", "no:cacheprovider", "--hypothesis-profile=plugin-test",
                              "-rA", *args)


@pytest.fixture(autouse=True)
def _keep_the_profile() -> Iterator[None]:
    # An in-process run loads its own profile into Hypothesis's global settings; put ours back.
    current = settings.get_current_profile_name()
    yield
    settings.load_profile(current)


def passed_items(result: pytest.RunResult, module: str) -> set[str]:
    """The items that passed, without their table prefix."""
    prefix = f"PASSED agtool:{module}:TOOLS::"
    return {line.removeprefix(prefix) for line in result.outlines if line.startswith(prefix)}


@pytest.mark.slow
def test_a_healthy_table_passes_every_property(pytester: pytest.Pytester) -> None:
    """Each tool gets refused/memo/bad_result/envelope/returns/interrupted/replaced items, and
    all of them pass (every hostile class and every argument edge among them)."""
    write_table(pytester, "healthy_tools")
    result = run(pytester, "--agtool-table=healthy_tools:TOOLS")
    result.assert_outcomes(passed=len(HEALTHY_ITEMS))
    assert passed_items(result, "healthy_tools") == HEALTHY_ITEMS
    ran = set((pytester.path / "bodies_ran.txt").read_text().split())
    assert ran == {"get_ticket", "refund"}  # memo and returns ran the real bodies


@pytest.mark.slow
def test_a_body_wrong_for_some_inputs_fails_with_a_readable_report(
        pytester: pytest.Pytester) -> None:
    """A refund body negative from 10 cents up: the returns item fails, naming reason and call."""
    write_table(pytester, "broken_tools", body=BROKEN)
    result = run(pytester, "--agtool-table=broken_tools:TOOLS")
    result.assert_outcomes(passed=len(HEALTHY_ITEMS) - 1, failed=1)
    result.stdout.fnmatch_lines([
        "*agtool: property 'returns' failed for tool 'refund' of broken_tools:TOOLS*",
        "*must never happen: the body raises, or breaks its return contract*",
        "*returned a value its return contract refuses (result:range)*",
        "*call:   refund({*",
        "*replay: pytest --agtool-table=broken_tools:TOOLS --agtool-only -k 'refund and returns'*",
        "FAILED agtool:broken_tools:TOOLS::refund::returns*",
    ])
    assert "git apply" not in result.stdout.str()  # no patch to the harness's own code


@pytest.mark.slow
def test_stub_bodies_never_run_the_real_functions(pytester: pytest.Pytester) -> None:
    """--agtool-stub-bodies: no real body runs (so the broken one cannot fail); no returns item."""
    write_table(pytester, "stubbed_tools", body=BROKEN)
    result = run(pytester, "--agtool-table=stubbed_tools:TOOLS", "--agtool-stub-bodies")
    expected = {item for item in HEALTHY_ITEMS if not item.endswith("::returns")}
    result.assert_outcomes(passed=len(expected))
    assert passed_items(result, "stubbed_tools") == expected
    assert not (pytester.path / "bodies_ran.txt").exists()


@pytest.mark.slow
def test_a_write_tool_is_proven_without_its_body_ever_running(
        pytester: pytest.Pytester) -> None:
    """An irreversible refund is stubbed, proven once per idempotency key, and never run for real.

    Its ``memo`` item checks the write's promise (a repeat of the key replays,
    the same key with other args is a conflict); it has no ``returns`` item.
    A read_sensitive tool is called with the harness's full scope.
    """
    write_table(pytester, "write_tools")
    module = pytester.path / "write_tools.py"
    module.write_text(module.read_text() + textwrap.dedent("""
        TOOLS["refund"].update(effect="write", risk="irreversible", key_args=["order_id"])
        TOOLS["get_ticket"]["risk"] = "read_sensitive"
        TOOLS["get_ticket"]["args"]["ticket_id"]["sensitive"] = True
    """))
    result = run(pytester, "--agtool-table=write_tools:TOOLS")
    expected = HEALTHY_ITEMS - {"refund::returns"}
    result.assert_outcomes(passed=len(expected))
    assert passed_items(result, "write_tools") == expected
    ran = set((pytester.path / "bodies_ran.txt").read_text().split())
    assert ran == {"get_ticket"}


@pytest.mark.parametrize(("max_value", "field"), [
    ('"ten"', "args.amount_cents.max"),
    ("float('nan')", "args.amount_cents.max"),
    ("-1", "args.amount_cents.min"),
])
def test_a_malformed_table_is_a_collection_error_naming_tool_and_field(
        pytester: pytest.Pytester, max_value: str, field: str) -> None:
    """A bad bound in one tool: a collection error that says which tool and which field."""
    write_table(pytester, "bad_tools", max_value=max_value)
    result = run(pytester, "--agtool-table=bad_tools:TOOLS")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([f"*tool 'refund', field '{field}'*"])
    result.assert_outcomes(errors=1)


@pytest.mark.parametrize(("spec", "message"), [
    ("no_such_module:TOOLS", "*cannot import 'no_such_module'*"),
    ("spec_tools:NOPE", "*module 'spec_tools' has no 'NOPE'*"),
    ("spec_tools", "*expected MODULE:NAME*"),
    ("spec_tools:refund", "*refund is a function, not a contract table*"),
    ("spec_tools:EMPTY", "*the table has no tools*"),
])
def test_a_table_that_cannot_be_loaded_says_why(pytester: pytest.Pytester, spec: str,
                                                message: str) -> None:
    """A wrong --agtool-table value is one collection error with the reason, not a traceback."""
    write_table(pytester, "spec_tools")
    result = run(pytester, f"--agtool-table={spec}")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([message])


@pytest.mark.slow
def test_a_table_module_in_the_rootdir_is_found_without_a_path_set_up(
        pytester: pytest.Pytester) -> None:
    """With no conftest and nothing on sys.path, the table module is looked up in the rootdir."""
    write_table(pytester, "rootdir_tools", on_path=False)
    result = pytester.runpytest("-p", "no:cacheprovider", "--hypothesis-profile=dev",
                                "--agtool-table=rootdir_tools:TOOLS", "-k", "missing")
    result.assert_outcomes(passed=4)  # one missing site per required argument


@pytest.mark.slow
def test_a_contract_no_call_can_keep_fails_naming_the_field(pytester: pytest.Pytester) -> None:
    """An int spec between 0.5 and 0.7 cannot be drawn: its items fail and say which argument."""
    write_table(pytester, "impossible_tools")
    result = run(pytester, "--agtool-table=impossible_tools:IMPOSSIBLE", "-k", "memo")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*required field 'n': no value keeps its spec*"])


@pytest.mark.slow
def test_statistics_show_the_mix_of_defects(pytester: pytest.Pytester) -> None:
    """--hypothesis-show-statistics lists what each property drew, labelled by the strategies."""
    write_table(pytester, "stats_tools")
    result = run(pytester, "--agtool-table=stats_tools:TOOLS", "--hypothesis-show-statistics",
                 "-k", "refund and (refused or bad_result or envelope)")
    result.stdout.fnmatch_lines([
        "*agtool:stats_tools:TOOLS::refund::refused?min:amount_cents?:*",
        "*defect kind: min*",
        "*bad result kind: range*",
        "*envelope: args:*",
        "*hostile: *",
    ])


@pytest.mark.slow
def test_the_plugin_runs_unchanged_under_xdist(pytester: pytest.Pytester) -> None:
    """Two workers collect the same items and reach the same verdicts as one process; the
    controller writes the summary, one line per item, every item drawn with one seed."""
    write_table(pytester, "xdist_tools", body=BROKEN)
    # Every item is collected by both workers (xdist compares them); the refund ones run.
    result = run(pytester, "--agtool-table=xdist_tools:TOOLS", "-n", "2", "-k", "refund",
                 "--agtool-summary=summary.ndjson")
    refund_items = {item for item in HEALTHY_ITEMS if item.startswith("refund::")}
    result.assert_outcomes(passed=len(refund_items) - 1, failed=1)
    result.stdout.fnmatch_lines(["*FAILED agtool:xdist_tools:TOOLS::refund::returns*"])
    lines = [json.loads(line) for line in
             (pytester.path / "summary.ndjson").read_text().splitlines()]
    assert len(lines) == len(refund_items)
    assert {line["tool"] for line in lines} == {"refund"}
    assert {line["outcome"] for line in lines} == {"passed", "failed"}


@pytest.mark.slow
def test_without_the_option_the_plugin_imports_no_hypothesis(pytester: pytest.Pytester) -> None:
    """Loaded in every session, the plugin adds no items and imports neither Hypothesis nor us."""
    pytester.makepyfile(test_modules=textwrap.dedent('''
        import sys

        def test_nothing_heavy_was_imported(request):
            assert request.config.pluginmanager.has_plugin("agtool")
            assert "agtool.harness.strategies" not in sys.modules
            assert "hypothesis" not in sys.modules
            assert "agtool" not in sys.modules  # so coverage can see agtool imported whole
    '''))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=1)
