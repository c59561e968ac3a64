"""What ``agtool check`` prints and writes: finding lines, JUnit XML, NDJSON and an HTML page.

Every item carries its case, verdict, seed and a replay command that runs that
item alone (``--item TOOL::LABEL``) with every flag its calls depend on. A
line printed or written never holds a raw line break from server data:
messages are escaped where they are made (``_mcp_target.one_line``), and each
line is escaped again here, ``\\u2028`` and the other separators included.
The HTML page is one file with its style inline, no script and no fetch: a
tool by property matrix, then each finding's message and replay command.
"""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ._mcp_check import OUTCOMES, PROPERTIES, ItemResult
from ._mcp_options import CheckOptions, command_line
from ._mcp_target import one_line

__all__ = ["FindingLines", "Run", "html_page", "junit_xml", "ndjson_lines", "write_reports"]

#: The word a console line starts with, per outcome (passes print nothing).
_WORDS = {"failed": "FAIL", "warned": "WARN", "inconclusive": "INCONCLUSIVE", "skipped": "SKIP"}
@dataclass(frozen=True)
class Run:
    """One ``agtool check`` run: what it checked, with which seed and options."""

    target: str
    seed: int
    options: CheckOptions
    profile: str = ""
    max_examples: int | None = None

    def replay(self, result: ItemResult) -> str:
        """The command that runs ``result``'s item alone and sends the same calls."""
        words = ["agtool", "check", "--mcp", self.target, "--seed", str(self.seed)]
        if self.profile:
            words += ["--profile", self.profile]
        if self.max_examples is not None:
            words += ["--max-examples", str(self.max_examples)]
        words += [*self.options.replay_flags(), "--item", result.item.name]
        return command_line(words)


def _head(result: ItemResult) -> str:
    return one_line(result.message.splitlines()[0]) if result.message else ""


class FindingLines:
    """The console lines of each result of a run: ``FAIL tool label: ...`` and its replay
    command; a skip is said once per tool and reason (a write's items share one)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self._said: set[tuple[str, str]] = set()

    def __call__(self, result: ItemResult) -> list[str]:
        word = _WORDS.get(result.outcome)
        if word is None:
            return []
        head = _head(result)
        if result.outcome == "skipped":
            if (result.item.tool, head) in self._said:
                return []
            self._said.add((result.item.tool, head))
            return [f"SKIP {result.item.tool}: {head}"]
        lines = [f"{word} {result.item.tool} {result.item.label}: {head}"]
        if result.outcome == "failed":
            lines.append(f"  replay: {one_line(self.run.replay(result))}")
        return lines


def ndjson_lines(run: Run, results: Sequence[ItemResult]) -> Iterator[str]:
    """One JSON line per item (``json.dumps`` escapes every line break)."""
    for result in results:
        yield json.dumps({
            "source": run.target, "tool": result.item.tool, "property": result.item.prop,
            "case": result.item.case_label, "item": result.item.name,
            "verdict": result.outcome, "message": result.message,
            "examples": result.examples, "seed": run.seed, "duration": result.duration,
            "replay": run.replay(result)}) + "\n"


def junit_xml(run: Run, results: Sequence[ItemResult]) -> bytes:
    """JUnit XML: a test case per item; a failure fails, a skip and an inconclusive item are
    skipped, a warning passes with its message as system-out (a failure under --strict)."""
    suite = ElementTree.Element("testsuite", {
        "name": f"agtool check {run.target}", "tests": str(len(results)),
        "failures": str(sum(_fails(run, result) for result in results)),
        "skipped": str(sum(result.outcome in ("skipped", "inconclusive") for result in results)),
        "time": f"{sum(result.duration for result in results):.3f}"})
    for result in results:
        case = ElementTree.SubElement(suite, "testcase", {
            "classname": f"agtool-mcp.{result.item.tool}", "name": result.item.label,
            "time": f"{result.duration:.3f}"})
        props = ElementTree.SubElement(case, "properties")
        for name, value in (("case", result.item.case_label), ("verdict", result.outcome),
                            ("seed", run.seed), ("examples", result.examples),
                            ("replay", run.replay(result))):
            ElementTree.SubElement(props, "property", {"name": name, "value": str(value)})
        if _fails(run, result):
            failure = ElementTree.SubElement(case, "failure", {"message": _head(result)})
            failure.text = f"{result.message}\n\nreplay: {run.replay(result)}"
        elif result.outcome in ("skipped", "inconclusive"):
            ElementTree.SubElement(case, "skipped", {
                "message": f"{result.outcome}: {_head(result)}"})
        elif result.outcome == "warned":
            ElementTree.SubElement(case, "system-out").text = "WARN " + result.message
    return bytes(ElementTree.tostring(suite, encoding="utf-8", xml_declaration=True))


def _fails(run: Run, result: ItemResult) -> bool:
    return result.outcome == "failed" or (result.outcome == "warned" and run.options.strict)


_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
h1{font-size:1.4em} .banner{padding:.6em 1em;border-radius:6px;color:#fff;display:inline-block}
table{border-collapse:collapse;margin:1em 0} th,td{border:1px solid #ccc;padding:.3em .6em}
th{background:#f4f4f4;text-align:left} td.cell{text-align:center;white-space:nowrap}
.failed{background:#d9534f;color:#fff} .warned{background:#f0ad4e}
.inconclusive{background:#b8c2cc} .passed{background:#5cb85c;color:#fff}
.skipped{background:#eee;color:#777} .none{background:#fff}
pre{white-space:pre-wrap;word-break:break-all;background:#f8f8f8;padding:.6em;margin:.3em 0}
code{background:#f4f4f4;padding:0 .2em}
"""


def _cell(results: list[ItemResult]) -> tuple[str, str]:
    """A matrix cell's class and text: its worst outcome, and how many of each."""
    if not results:
        return "none", ""
    worst = min(results, key=lambda result: OUTCOMES.index(result.outcome)).outcome
    counts = {outcome: sum(result.outcome == outcome for result in results)
              for outcome in OUTCOMES}
    text = " ".join(f"{counts[outcome]} {outcome}" for outcome in OUTCOMES if counts[outcome])
    return worst, text


def html_page(run: Run, results: Sequence[ItemResult]) -> str:
    """The self-contained page: banner, tool by property matrix, findings, seed."""
    tools = list(dict.fromkeys(result.item.tool for result in results))
    counts = {outcome: sum(result.outcome == outcome for result in results)
              for outcome in OUTCOMES}
    verdict = "failed" if counts["failed"] else "warned" if counts["warned"] else "passed"
    esc = html.escape
    rows = []
    for tool in tools:
        cells = []
        for prop in PROPERTIES:
            kind, text = _cell([result for result in results
                                if result.item.tool == tool and result.item.prop == prop])
            cells.append(f'<td class="cell {kind}" title="{esc(prop)}">{esc(text)}</td>')
        rows.append(f"<tr><th>{esc(tool)}</th>{''.join(cells)}</tr>")
    findings = []
    for result in results:
        if result.outcome not in ("failed", "warned", "inconclusive"):
            continue
        findings.append(
            f'<section class="finding" id="{esc(result.item.name)}">'
            f'<h3><span class="banner {result.outcome}">{_WORDS[result.outcome]}</span> '
            f"<code>{esc(result.item.tool)}</code> <code>{esc(result.item.label)}</code></h3>"
            f"<pre>{esc(result.message)}</pre>"
            f"<p>replay: <code>{esc(run.replay(result))}</code></p></section>")
    summary = ", ".join(f"{counts[outcome]} {outcome}" for outcome in OUTCOMES)
    header = "".join(f"<th>{esc(prop)}</th>" for prop in PROPERTIES)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>agtool check {esc(run.target)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>agtool check <code>{esc(run.target)}</code></h1>"
        f'<p><span class="banner {verdict}" id="verdict">{verdict.upper()}</span> '
        f"{len(results)} items: {esc(summary)}</p>"
        f'<p>seed <code id="seed">{run.seed}</code> (the same calls again: '
        f"<code>--seed {run.seed}</code>)</p>"
        f'<table id="matrix"><tr><th>tool</th>{header}</tr>{"".join(rows)}</table>'
        f'<h2>Findings</h2>{"".join(findings) or "<p>none</p>"}'
        "</body></html>\n")


def write_reports(run: Run, results: Sequence[ItemResult], *, junit: str | None = None,
                  ndjson: str | None = None, html: str | None = None) -> None:
    """Write each report asked for."""
    if junit:
        Path(junit).write_bytes(junit_xml(run, results))
    if ndjson:
        Path(ndjson).write_text("".join(ndjson_lines(run, results)), "utf-8")
    if html:
        Path(html).write_text(html_page(run, results), "utf-8")
