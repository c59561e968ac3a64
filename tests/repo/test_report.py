"""The measured report: its keys and headings come from a run of the module, and --check bites."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import reports
from agtool import RESULT_CHECKS, tools
from reports._reference import BAD_REGION_ORDER, EMPTY_ORDER, REFUSED_CALLS

# slow: every test here reads one report built from real runs (harness and bench), 4 to 5 s.
pytestmark = pytest.mark.slow

HEADINGS = [
    "## 도구 계약을 어디에 적었나",
    "## 부르기 전에 무엇을 막았나",
    "## 돌려준 결과를 어떻게 믿지 않았나",
    "## 실패를 어떤 경로로 다뤘나",
]
SEED_KEYS = {"tools", "blocked_before_call", "bad_result_reasons", "memo_second_call_runs",
             "repaired", "attempts", "gave_up"}
FEW = 3  # examples per property: enough to exercise the report, not to re-prove the harness


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return reports.build_report(lambda message: None, benchmark=False, real_servers=False,
                                examples=FEW)


def test_report_has_the_seed_keys_and_the_harness_section(report: dict[str, Any]) -> None:
    """The JSON carries the seed's seven keys and the harness's figures."""
    assert report.keys() >= SEED_KEYS | {"harness"}
    harness = report["harness"]
    assert {prop["name"] for prop in harness["properties"]} >= {
        "refused", "memo", "bad_result", "envelope", "graph"}


def test_seed_figures_agree_with_the_module(report: dict[str, Any]) -> None:
    """Each seed figure is what running agtool.tools independently gives."""
    assert report["tools"] == sorted(tools.TOOLS)
    assert report["blocked_before_call"] == 0
    assert len(report["refused_calls"]) == len(REFUSED_CALLS)
    assert report["bad_result_reasons"] == sorted(RESULT_CHECKS)
    assert report["memo_second_call_runs"] == 0
    repaired, gave_up = tools.handle(BAD_REGION_ORDER), tools.handle(EMPTY_ORDER)
    assert (report["repaired"], report["attempts"]) == (repaired["ok"], repaired["attempts"])
    assert report["gave_up"] is (not gave_up["ok"])
    assert report["max_attempts"] == tools.MAX_ATTEMPTS


def test_every_refused_call_is_refused_with_its_own_reason(report: dict[str, Any]) -> None:
    """Each refused call in the report names the reason validate_args gives for it."""
    for call, (name, args) in zip(report["refused_calls"], REFUSED_CALLS, strict=True):
        reason = tools.validate_args(name, args)
        assert reason
        assert call["error"] == "args:" + reason
        assert call["body_runs"] == 0


def test_harness_figures_count_examples_and_find_no_failure(report: dict[str, Any]) -> None:
    """Every property ran examples under the given profile and found nothing wrong."""
    harness = report["harness"]
    for prop in harness["properties"]:
        assert prop["examples"] >= FEW, prop
        assert prop["failures"] == 0, prop
    assert harness["body_runs_on_refused_args"] == 0
    assert harness["refused_calls"] > 0
    assert set(harness["defect_kinds"]) >= {"missing", "unexpected", "type", "allowed", "min",
                                            "max"}


def test_side_effects_figures_are_the_promises(report: dict[str, Any]) -> None:
    """Writes ran once per key however called; refused calls ran nothing; no secret was recorded."""
    figures = report["side_effects"]
    assert figures["retries"]["calls"] > 1
    assert figures["retries"]["body_runs"] == 1
    assert figures["threads"]["calls"] > 1
    assert figures["threads"]["body_runs"] == 1
    assert figures["restart"]["body_runs"] == 0
    assert figures["timeout"] == {"first": "timeout", "retry_ok": True, "body_runs": 1}
    assert figures["conflict"] == "write:conflict"
    assert figures["refused"] == {"scope": "auth:scope:external_effect",
                                  "approval": "auth:approval", "body_runs": 0}
    assert figures["records"]["count"] > 0
    assert figures["records"]["sensitive_values_found"] == 0
    assert figures["model_error"]["code"] == "INVALID_ARGUMENT"
    assert figures["model_error"]["message"].startswith(
        "region must be one of " + ", ".join(tools.REGIONS))


def test_markdown_has_the_four_seed_sections_in_order(report: dict[str, Any]) -> None:
    """The Markdown has the seed's four headings, in order, each followed by an English line."""
    lines = reports.render_markdown(report).splitlines()
    positions = [lines.index(heading) for heading in HEADINGS]
    assert positions == sorted(positions)
    for position in positions:
        assert lines[position + 1].startswith("_")
        assert lines[position + 1].endswith("._")


def test_last_seed_section_states_the_attempt_cap(report: dict[str, Any]) -> None:
    """The failure-path section states MAX_ATTEMPTS as a number."""
    text = reports.render_markdown(report)
    section = text.split(HEADINGS[3])[1].split("\n## ")[0]
    assert f"**{tools.MAX_ATTEMPTS}**" in section


def _written(report: dict[str, Any], folder: Path) -> Path:
    reports.write_report(report, folder)
    return folder / "tool_report.json"


def test_check_passes_on_a_fresh_report(report: dict[str, Any], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """--check exits 0 when the committed files match what the code measures."""
    _written(report, tmp_path)
    monkeypatch.setattr(reports, "build_report", lambda progress, **_: report)
    assert reports.main(["--check", "--out", str(tmp_path), "--quiet"]) == 0


def test_check_fails_with_a_diff_on_a_stale_number(
        report: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """--check exits 1 and prints a diff when a committed number no longer matches."""
    path = _written(report, tmp_path)
    stale = json.loads(path.read_text("utf-8"))
    stale["attempts"] = report["attempts"] + 1
    path.write_text(json.dumps(stale, indent=2, ensure_ascii=False) + "\n", "utf-8")
    monkeypatch.setattr(reports, "build_report", lambda progress, **_: report)
    assert reports.main(["--check", "--out", str(tmp_path), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert f'-  "attempts": {report["attempts"] + 1},' in out
    assert f'+  "attempts": {report["attempts"]},' in out


def test_check_ignores_the_benchmark_but_not_a_missing_file(
        report: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Timings may differ between runs; a missing Markdown file may not."""
    with_timings = {**report, "benchmark": {"ratios": {"bare call": 1.0}, "targets": []}}
    _written(with_timings, tmp_path)
    monkeypatch.setattr(reports, "build_report", lambda progress, **_: report)
    assert reports.main(["--check", "--out", str(tmp_path), "--quiet"]) == 0
    (tmp_path / "tool_report.md").unlink()
    assert reports.main(["--check", "--out", str(tmp_path), "--quiet"]) == 1


REAL_SERVERS = {"measured": True, "profile": "seed 0", "fail_items": ["git git_log::x"],
                "servers": [{"server": "git", "registry": "pypi", "tools": 12, "items": 141,
                             "failed": 1, "warned": 2, "inconclusive": 0, "skipped": 0,
                             "passed": 138, "seconds": 40.5}],
                "fails": 1, "true_fails": 1, "unknown_fails": [], "precision": 1.0, "defects": 7,
                "defects_reported": 5, "recall": 0.71, "missed": ["git x: y"]}


def test_check_ignores_the_real_servers_section(
        report: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real servers' counts vary with the machine: --check compares around them."""
    _written({**report, "real_servers": REAL_SERVERS}, tmp_path)
    text = (tmp_path / "tool_report.md").read_text("utf-8")
    assert "**Precision of FAIL: 1 / 1 = 1.00.** **Recall: 5 of the 7 defects" in text
    assert "| git | pypi | 12 | 141 | 1 | 2 | 0 | 0 | 138 | 40.5 |" in text
    monkeypatch.setattr(reports, "build_report", lambda progress, **_: report)
    assert reports.main(["--check", "--out", str(tmp_path), "--quiet"]) == 0


def test_committed_report_has_every_section() -> None:
    """The report committed in reports/ was generated with every section, benchmark included."""
    committed = json.loads((reports.REPORT_DIR / "tool_report.json").read_text("utf-8"))
    assert committed.keys() >= SEED_KEYS | {"harness", "benchmark", "side_effects",
                                            "real_servers"}
    assert committed["real_servers"]["measured"], committed["real_servers"]
    text = (reports.REPORT_DIR / "tool_report.md").read_text("utf-8")
    assert all(heading in text for heading in HEADINGS)


def test_a_target_in_nanoseconds_is_said_in_nanoseconds() -> None:
    """A per-item target's figure and limit carry its unit; a ratio's carry x."""
    targets = [{"name": "per item", "limit": 8.0, "unit": "ns", "available": True,
                "measured": 21.5, "passed": False},
               {"name": "ratio", "limit": 1.5, "unit": "x", "available": True,
                "measured": 1.2, "passed": True}]
    text = "\n".join(reports._render._benchmark_section({"ratios": {}, "targets": targets}))
    assert "| per item | 21.50 ns |  | <= 8 ns | **FAIL** |" in text
    assert "| ratio | 1.20x |  | <= 1.5x | PASS |" in text
