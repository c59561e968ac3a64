"""What `agtool check` writes: finding lines, JUnit XML, NDJSON and the HTML matrix page.

Every item carries its case, verdict, seed and a replay command that selects
exactly that item with every flag its calls depend on; no printed line is cut
at a line separator inside server data; the HTML page is opened in a real
headless Chromium (the Debian ``chromium`` package) and read back from its DOM.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import _defect_server
import pytest
from hypothesis import settings
from mcp.client._memory import InMemoryTransport  # the SDK's own in-process transport

from agtool._cli import main
from agtool.harness._mcp_check import ItemResult, run_check
from agtool.harness._mcp_options import CheckOptions
from agtool.harness._mcp_report import (
    FindingLines,
    Run,
    html_page,
    junit_xml,
    ndjson_lines,
)

SMALL = settings(max_examples=3, database=None, deadline=None)
LAX = f"{sys.executable} {Path(__file__).resolve().parents[1] / '_lax_server.py'}"


def results_of(name: str, **options: Any) -> list[ItemResult]:
    return run_check(name, transport=lambda: InMemoryTransport(_defect_server.build(name)),
                     settings=SMALL, canary="agtool-canary-in-process", **options)


@pytest.fixture(scope="module")
def errors_run() -> tuple[Run, list[ItemResult]]:
    options = CheckOptions(allow_writes=True, allow_tools=("lookup",), env_names=("TOKEN",))
    return Run("python errors.py", 7, options), results_of("errors_as_successes")


def test_finding_lines_are_one_line_each_whatever_the_server_says(
        errors_run: tuple[Run, list[ItemResult]]) -> None:
    """A FAIL line quoting a server text with a U+2028 inside is one line, the separator
    escaped, and is followed by its replay command."""
    run, results = errors_run
    printer = FindingLines(run)
    lines = [line for result in results for line in printer(result)]
    fails = [line for line in lines if line.startswith("FAIL ")]
    assert fails
    assert all(len(line.splitlines()) == 1 for line in lines)
    assert any("\\u2028" in line for line in fails)
    replays = [line for line in lines if line.startswith("  replay: ")]
    assert len(replays) == len(fails)


def test_junit_and_ndjson_carry_case_verdict_seed_and_an_exact_replay(
        errors_run: tuple[Run, list[ItemResult]]) -> None:
    """One test case and one NDJSON line per item, each with its case, verdict, seed and a
    replay that names exactly that item and every flag the run had."""
    run, results = errors_run
    suite = ElementTree.fromstring(junit_xml(run, results))  # noqa: S314 - our own output
    cases = list(suite.iter("testcase"))
    assert len(cases) == len(results)
    assert suite.get("failures") == str(sum(result.outcome == "failed" for result in results))
    by_name = {}
    for case in cases:
        props = {prop.get("name"): prop.get("value") for prop in case.iter("property")}
        by_name[f"{case.get('classname', '').split('.', 1)[1]}::{case.get('name')}"] = props
        assert props["seed"] == "7"
    refused = by_name["lookup::refused[type:id]"]
    assert refused["case"] == "type:id"
    assert refused["verdict"] == "failed"
    words = shlex.split(refused["replay"] or "")
    assert words[:6] == ["agtool", "check", "--mcp", "python errors.py", "--seed", "7"]
    assert words[-2:] == ["--item", "lookup::refused[type:id]"]
    assert {"--allow-writes", "--allow-tool=lookup", "--env=TOKEN"} <= set(words)
    lines = [json.loads(line) for line in ndjson_lines(run, results)]
    assert [line["item"] for line in lines] == [result.item.name for result in results]
    assert all(line["case"] for line in lines if line["property"] in ("refused", "mistake"))
    assert {line["verdict"] for line in lines} >= {"failed", "passed"}


@pytest.mark.slow
def test_a_replay_command_sends_the_same_calls_for_that_item_alone(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The replay printed under a FAIL, run as printed, runs that one item and fails it with
    the same line."""
    assert main(["check", "--mcp", LAX, "--allow-writes", "--max-examples", "3",
                 "--seed", "9", "--ndjson", str(tmp_path / "run.ndjson")]) == 1
    out = capsys.readouterr().out.splitlines()
    at = next(index for index, line in enumerate(out)
              if line.startswith("FAIL delete_everything refused[type:confirm]"))
    replay = shlex.split(out[at + 1].split("replay: ", 1)[1])
    assert "--allow-writes" in replay
    assert main(replay[1:]) == 1
    again = capsys.readouterr().out.splitlines()
    assert [line for line in again if line.startswith(("FAIL", "WARN", "INCONCLUSIVE"))] == [
        out[at]]
    assert " 1 items: " in again[-1]


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("no chromium here: apt-get install chromium (the Debian package)")
    return found


@pytest.mark.slow
def test_the_html_page_renders_its_matrix_in_headless_chromium(tmp_path: Path) -> None:
    """The page is one file (no script, no link, no fetch); Chromium renders it, and its DOM
    holds a row per tool, a cell per property, each failure with its replay, and the seed;
    a screenshot of it is taken."""
    chromium = _chromium()
    options = CheckOptions()
    run = Run("python defects.py", 11, options)
    results = results_of("errors_as_successes") + results_of("too_strict")
    page = tmp_path / "check.html"
    page.write_text(html_page(run, results), "utf-8")
    text = page.read_text("utf-8")
    assert "<script" not in text
    assert "<link" not in text
    assert "http://" not in text
    assert "https://" not in text
    browser = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
               f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*browser, "--dump-dom", page.as_uri()], capture_output=True,  # noqa: S603
                         text=True, timeout=120, check=True).stdout
    assert 'id="matrix"' in dom
    tools = {result.item.tool for result in results}
    assert dom.count("<tr><th>") == len(tools) + 1  # and the header row
    assert dom.count('class="cell failed"') >= 1
    assert dom.count('class="cell warned"') >= 1
    assert dom.count('class="finding"') == sum(
        result.outcome in ("failed", "warned", "inconclusive") for result in results)
    assert "--item lookup::refused[type:id]" in dom or "--item 'lookup::refused[type:id]'" in dom
    assert '<code id="seed">11</code>' in dom
    shot = tmp_path / "check.png"
    subprocess.run([*browser, f"--screenshot={shot}", "--window-size=1280,900",  # noqa: S603
                    page.as_uri()], capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
