"""What a CI run of the harness hands back: a readable failure, only its items, JUnit XML,
an NDJSON summary, and a replay that reproduces the failure.

Each test runs pytest with the plugin over a small table written into a fresh directory.
"""

from __future__ import annotations

import json
import re
import shlex
import textwrap
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

pytest_plugins = ["pytester"]

TABLE = '''
def count(n):
    return {"count": BODY}

TOOLS = {"count": {"fn": count, "args": {"n": {"type": "int", "min": 1, "max": 50}},
                   "returns": {"count": {"type": "int", "min": 0}}}}
'''
PROFILE = '''
from hypothesis import settings

settings.register_profile("report-test", max_examples=10, deadline=None, database=None,
                          derandomize=False)
'''
#: Wrong strictly inside the range, right at both bounds: only a random draw can find it,
#: so the failure carries a blob to replay.
INSIDE = "n if n in (1, 50) else -n"


@pytest.fixture(autouse=True)
def _keep_the_profile() -> Iterator[None]:
    current = settings.get_current_profile_name()
    yield
    settings.load_profile(current)


def project(pytester: pytest.Pytester, body: str) -> None:
    """A table module, a project test of its own, and the test profile."""
    pytester.makepyfile(count_tools=textwrap.dedent(TABLE.replace("BODY", body)),
                        test_project="def test_the_projects_own():\n    assert True\n")
    pytester.makeconftest(PROFILE)
    pytester.syspathinsert()


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-p", "no:cacheprovider",
                                        "--hypothesis-profile=report-test",
                                        "--agtool-table=count_tools:TOOLS", *args)


def failure_section(result: pytest.RunResult) -> list[str]:
    text = result.stdout.str()
    start = text.index("agtool: property")
    # The item's own report ends where pytest's next section begins (warnings, summary).
    ends = [text.find(mark, start) for mark in ("warnings summary", "short test summary")]
    end = min(at for at in ends if at != -1)
    section = text[start:text.rindex("\n", start, end)]
    return section.strip().splitlines()


@pytest.mark.slow
def test_a_failure_reads_in_a_few_lines_and_replays(pytester: pytest.Pytester) -> None:
    """The report states the promise, the call, the answer and a replay command; the blob it
    prints, passed back with --agtool-reproduce, fails the same way."""
    project(pytester, INSIDE)
    result = run(pytester, "--agtool-only", "-k", "returns")
    result.assert_outcomes(failed=1)
    lines = failure_section(result)
    assert len(lines) < 15, "\n".join(lines)
    text = "\n".join(lines)
    assert "Traceback" not in text
    assert "hypothesis/core.py" not in text
    assert re.search(r"must never happen: the body raises, or breaks its return contract", text)
    call = re.search(r"call:   count\(\{'n': (-?\d+)\}\)", text)
    assert call is not None
    assert 1 < int(call.group(1)) < 50
    assert "answer: {'error': 'result:range', 'ok': False, 'value': None}" in text
    replay = re.search(r"replay: (pytest .*)", text)
    blob = re.search(r"--agtool-reproduce=(\S+)", text)
    assert replay is not None
    assert blob is not None
    argv = replay.group(1).split()
    assert argv[1:4] == ["--agtool-table=count_tools:TOOLS", "--agtool-only", "-k"]
    again = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--agtool-table=count_tools:TOOLS", "--agtool-only", "-k",
        "returns", f"--agtool-reproduce={blob.group(1)}")
    again.assert_outcomes(failed=1)
    assert call.group(0) in again.stdout.str()


@pytest.mark.slow
def test_only_junit_and_summary_describe_every_harness_item(pytester: pytest.Pytester) -> None:
    """--agtool-only deselects the project's test; JUnit and the NDJSON summary carry one
    entry per harness item with the examples run, the failures and the seed, and agree."""
    project(pytester, INSIDE)
    result = run(pytester, "--agtool-only", "--junitxml=junit.xml",
                 "--agtool-summary=summary.ndjson", "--hypothesis-seed=7", "-rA")
    outcomes = result.parseoutcomes()
    assert outcomes["deselected"] == 1
    assert "test_the_projects_own" not in result.stdout.str()
    lines = [json.loads(line) for line in
             (pytester.path / "summary.ndjson").read_text().splitlines()]
    ran = outcomes.get("passed", 0) + outcomes.get("failed", 0)
    assert len(lines) == ran
    assert {line["tool"] for line in lines} == {"count"}
    assert {line["source"] for line in lines} == {"count_tools:TOOLS"}
    assert {line["property"] for line in lines} >= {"refused", "memo", "envelope", "returns"}
    [returns] = [line for line in lines if line["property"] == "returns"]
    assert returns["outcome"] == "failed"
    assert returns["failures"] == 1
    assert all(line["seed"] == 7 for line in lines)
    assert all(line["outcome"] == "passed" and line["failures"] == 0
               for line in lines if line is not returns)
    assert all(line["examples"] > 0 and line["duration"] > 0 for line in lines)
    # S314: the file is the one this run wrote.
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")  # noqa: S314
    junit = {case.get("name"): {prop.get("name"): prop.get("value")
                                for prop in case.iter("property")} for case in cases}
    assert len(junit) == len(lines)
    by_name = {(line["property"] + (f"[{line['case']}]" if line["case"] else "")): line
               for line in lines}
    for name, properties in junit.items():
        assert properties["examples"] == str(by_name[name]["examples"])
        assert properties["seed"] == "7"


@pytest.mark.slow
def test_a_body_raising_what_its_contract_names_passes(pytester: pytest.Pytester) -> None:
    """A KeyError for some valid calls fails returns; declared in "raises", it passes."""
    project(pytester, "{}[n] if n > 25 else n")
    run(pytester, "--agtool-only", "-k", "returns").assert_outcomes(failed=1)
    module = pytester.path / "count_tools.py"
    module.write_text(module.read_text() + '\nTOOLS["count"]["raises"] = (LookupError,)\n')
    run(pytester, "--agtool-only", "-k", "returns").assert_outcomes(passed=1)


README = (Path(__file__).resolve().parents[2] / "README.md").read_text("utf-8")


def readme_pytest_commands() -> list[list[str]]:
    """Each ``$ pytest ...`` line of the README's console blocks, as argv after ``pytest``."""
    blocks = re.findall(r"```console\n(.*?)```", README, re.S)
    return [shlex.split(line[2:])[1:] for block in blocks for line in block.splitlines()
            if line.startswith("$ pytest ")]


def test_the_readme_pytest_commands_are_ones_pytest_takes(pytester: pytest.Pytester) -> None:
    """Every pytest command the README shows parses with the plugin's options, the CI step's
    --agtool-only, --junitxml and --agtool-summary among them."""
    commands = readme_pytest_commands()
    assert any("--agtool-only" in argv and "--agtool-summary=agtool.ndjson" in argv
               for argv in commands)
    for argv in commands:
        config = pytester.parseconfig(*argv)
        for option, dest in (("--agtool-table=", "agtool_table"), ("--agtool-mcp=", "agtool_mcp")):
            given = [arg[len(option):].strip("\"'") for arg in argv if arg.startswith(option)]
            assert config.getoption(dest) == given


@pytest.mark.slow
def test_an_item_whose_setup_breaks_is_an_error_in_the_summary(pytester: pytest.Pytester
                                                               ) -> None:
    """A harness item that never got to run (its setup raised) is "error", not "failed" nor
    "passed", with its failure counted: what a CI step reads from the summary."""
    project(pytester, INSIDE)
    pytester.makeconftest(PROFILE + textwrap.dedent("""
        def pytest_runtest_setup(item):
            if item.get_closest_marker("agtool") is not None and "memo" in item.name:
                raise RuntimeError("the setup of this item broke")
    """))
    result = run(pytester, "--agtool-only", "--agtool-summary=summary.ndjson", "-k", "memo")
    result.assert_outcomes(errors=1, deselected=result.parseoutcomes()["deselected"])
    lines = [json.loads(line) for line in
             (pytester.path / "summary.ndjson").read_text().splitlines()]
    assert [(line["property"], line["outcome"], line["failures"]) for line in lines] == [
        ("memo", "error", 1)]


@pytest.mark.slow
def test_a_text_seed_is_taken_as_hypothesis_takes_it(pytester: pytest.Pytester) -> None:
    """``--hypothesis-seed`` may be any text: the harness draws with one int made of it (it
    raised ValueError on a text seed before), and says which, so the run replays."""
    project(pytester, INSIDE)
    result = run(pytester, "--agtool-only", "--agtool-summary=summary.ndjson",
                 "--hypothesis-seed=release-7", "-k", "memo")
    result.assert_outcomes(passed=1, deselected=result.parseoutcomes()["deselected"])
    seed = zlib.crc32(b"release-7")
    assert f"--hypothesis-seed={seed}" in result.stdout.str()
    lines = [json.loads(line) for line in
             (pytester.path / "summary.ndjson").read_text().splitlines()]
    assert [line["seed"] for line in lines] == [seed]
