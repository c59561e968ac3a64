"""The ``agtool`` command: export and lint, their exit statuses, and report left as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from agtool._cli import main
from agtool.tools import TOOLS

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``agtool argv``; give the exit status, stdout and stderr."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def table_module(monkeypatch: pytest.MonkeyPatch) -> str:
    """An importable module ``cli_tables`` with a table ``TOOLS`` and a non-table ``BAD``."""
    module = types.ModuleType("cli_tables")
    module.TOOLS = {  # type: ignore[attr-defined]
        "lookup_ticket": {
            "fn": lambda **kwargs: {},
            "description": "Look up a ticket.",
            "args": {"ticket_id": {"type": "str", "pattern": r"T-[0-9]+", "echo": True},
                     "fields": {"type": "list", "required": False, "nullable": False,
                                "item": {"type": "str", "allowed": ["title", "status"]}}},
            "returns": {"title": {"type": "str"}},
        },
    }
    module.BAD = {"x": {"fn": None, "args": {}, "returns": {}}}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cli_tables", module)
    return "cli_tables"


# --- export ------------------------------------------------------------------------------


def test_export_openai_defaults_to_the_reference_tools(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """Without --table the reference tools are printed, strict, as valid JSON Schema."""
    status, out, err = run(capsys, "export", "--format", "openai")
    tools = json.loads(out)
    assert status == 0
    assert err == ""
    assert [tool["function"]["name"] for tool in tools] == list(TOOLS)
    for tool in tools:
        assert tool["function"]["strict"] is True
        Draft202012Validator.check_schema(tool["function"]["parameters"])


@pytest.mark.parametrize(("format_", "keys"), [
    ("anthropic", {"name", "description", "input_schema"}),
    ("mcp", {"name", "description", "inputSchema", "outputSchema", "annotations"}),
])
def test_export_other_formats_from_a_named_table(capsys: pytest.CaptureFixture[str],
                                                 table_module: str, format_: str,
                                                 keys: set[str]) -> None:
    """--table MODULE:NAME picks the table; each format has its own keys."""
    status, out, _ = run(capsys, "export", "--format", format_, "--table",
                         f"{table_module}:TOOLS")
    (tool,) = json.loads(out)
    assert status == 0
    assert set(tool) == keys
    schema = tool["input_schema" if format_ == "anthropic" else "inputSchema"]
    assert schema["properties"]["ticket_id"]["x-agtool-echo"] is True
    assert schema["required"] == ["ticket_id"]


def test_export_says_on_stderr_why_a_tool_is_not_strict(capsys: pytest.CaptureFixture[str],
                                                       table_module: str) -> None:
    """A tool exported with strict: false gets one note per reason, naming the argument."""
    status, out, err = run(capsys, "export", "--format", "openai", "--table",
                           f"{table_module}:TOOLS")
    assert status == 0
    assert json.loads(out)[0]["function"]["strict"] is False
    notes = err.splitlines()
    assert len(notes) == 2
    assert ("ticket_id" in notes[0], "echo" in notes[0]) == (True, True)
    assert ("fields" in notes[1], "nullable" in notes[1]) == (True, True)


def test_exported_file_loads_and_lints(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                       table_module: str) -> None:
    """What export prints is a tools file that lint (and the loader) read back."""
    _, out, _ = run(capsys, "export", "--format", "mcp", "--table", f"{table_module}:TOOLS")
    path = tmp_path / "tools.json"
    path.write_text(out)
    status, out, _ = run(capsys, "lint", str(path), "--json")
    assert status == 0
    # ticket_id is patterned and marked echo, fields is a closed list: nothing to review.
    assert json.loads(out) == []


@pytest.mark.parametrize(("table", "word"), [
    ("agtool.tools", "MODULE:NAME"),
    (":TOOLS", "MODULE:NAME"),
    ("no_such_module_here:TOOLS", "cannot import"),
    ("agtool.tools:NOPE", "has no 'NOPE'"),
])
def test_export_with_a_bad_table_option_exits_2(capsys: pytest.CaptureFixture[str],
                                                table: str, word: str) -> None:
    """A --table that names no table is a one-line error and exit status 2."""
    status, out, err = run(capsys, "export", "--format", "mcp", "--table", table)
    assert (status, out) == (2, "")
    assert err.startswith("agtool export: ")
    assert word in err


def test_export_of_a_malformed_table_names_the_field(capsys: pytest.CaptureFixture[str],
                                                     table_module: str) -> None:
    """A table that fails validation is reported as the ContractError says."""
    status, _, err = run(capsys, "export", "--format", "mcp", "--table", f"{table_module}:BAD")
    assert status == 2
    assert "tool 'x', field 'fn'" in err


def test_export_needs_a_known_format(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse refuses an unknown format before anything is loaded."""
    with pytest.raises(SystemExit) as caught:
        main(["export", "--format", "gemini"])
    assert caught.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


# --- lint --------------------------------------------------------------------------------


def test_lint_prints_a_table_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    """By default findings are a table, and finding something is not a failure."""
    status, out, _ = run(capsys, "lint", str(FIXTURES / "openai_tools.json"))
    assert status == 0
    assert out.splitlines()[0].split() == ["RULE", "TOOL", "LOCATION", "FINDING"]
    assert "/properties/notify_customer" in out
    assert out.splitlines()[-1].startswith("10 findings")


def test_lint_json_lists_findings_as_data(capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints a list of {rule, tool, location, message}."""
    status, out, _ = run(capsys, "lint", str(FIXTURES / "lint_walk.json"), "--json")
    findings = json.loads(out)
    assert status == 0
    assert {"rule": "R4", "tool": "update_ticket",
            "location": "/properties/assignee"} in [
        {key: finding[key] for key in ("rule", "tool", "location")} for finding in findings]
    assert all(set(finding) == {"rule", "tool", "location", "message"} for finding in findings)


def test_lint_strict_exits_1_on_findings_and_0_without(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    """--strict turns findings into exit status 1; a clean file still exits 0."""
    assert run(capsys, "lint", str(FIXTURES / "mcp_tools.json"), "--strict")[0] == 1
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps([{"name": "ping", "input_schema": {
        "type": "object", "properties": {"mode": {"type": "string", "enum": ["fast"]}},
        "required": ["mode"]}}]))
    status, out, _ = run(capsys, "lint", str(clean), "--strict")
    assert (status, out.strip()) == (0, "no findings")


def test_lint_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    """--table lints a contract table through its exported schema."""
    status, out, _ = run(capsys, "lint", "--table", "agtool.tools:TOOLS", "--json", "--strict")
    assert status == 1
    assert sorted((f["tool"], f["rule"], f["location"]) for f in json.loads(out)) == [
        ("legacy_stock", "R2", "/properties/sku"), ("stock_lookup", "R2", "/properties/sku")]


@pytest.mark.parametrize("argv", [
    pytest.param([], id="neither"),
    pytest.param(["x.json", "--table", "agtool.tools:TOOLS"], id="both"),
])
def test_lint_needs_exactly_one_source(capsys: pytest.CaptureFixture[str],
                                       argv: list[str]) -> None:
    """A FILE or --table, not both and not neither: exit status 2 with a message."""
    status, out, err = run(capsys, "lint", *argv)
    assert (status, out) == (2, "")
    assert "FILE or --table" in err


def test_lint_of_a_malformed_file_names_file_and_location(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    """A file agtool cannot read is exit status 2 and a message naming it."""
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([{"name": "refund", "input_schema": {
        "type": "object", "properties": {"a": {"$ref": "#/$defs/Gone"}}}}]))
    status, out, err = run(capsys, "lint", str(path))
    assert (status, out) == (2, "")
    assert err.startswith(f"agtool lint: {path}, tool 'refund', "
                          f"at '/0/input_schema/properties/a/$ref'")


def test_unknown_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """An option lint does not know is an argparse error, not silently ignored."""
    with pytest.raises(SystemExit) as caught:
        main(["lint", str(FIXTURES / "mcp_tools.json"), "--strikt"])
    assert caught.value.code == 2
    assert "--strikt" in capsys.readouterr().err


# --- report: repository tooling, not an installed command -------------------------------------


def test_report_is_not_an_installed_command(capsys: pytest.CaptureFixture[str]) -> None:
    """The report is regenerated from a checkout (python -m reports); agtool has no report."""
    with pytest.raises(SystemExit) as caught:
        main(["report", "--check"])
    assert caught.value.code == 2
    assert "invalid choice: 'report'" in capsys.readouterr().err


def test_a_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    """Bare agtool is a usage error listing the commands."""
    with pytest.raises(SystemExit):
        main([])
    err: Any = capsys.readouterr().err
    assert "{export,lint,mcp,writes,check}" in err


# --- where --table looks, and a reader that stops early -----------------------------------

ROOT = Path(__file__).resolve().parents[2]
DESK_TOOLS = '''
def search(status):
    return {}

TOOLS = {"search": {"fn": search, "args": {"status": {"type": "str", "allowed": ["open"]}},
                    "returns": {}}}
'''


def test_table_module_is_found_in_the_current_folder(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`agtool export --table desk_tools:TOOLS` run in the module's folder finds it."""
    (tmp_path / "desk_tools_cwd.py").write_text(DESK_TOOLS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry not in ("", ".")])
    monkeypatch.delitem(sys.modules, "desk_tools_cwd", raising=False)
    status, out, err = run(capsys, "export", "--format", "mcp", "--table", "desk_tools_cwd:TOOLS")
    assert (status, err) == (0, "")
    assert [tool["name"] for tool in json.loads(out)] == ["search"]
    sys.modules.pop("desk_tools_cwd", None)


def test_a_table_module_whose_own_import_fails_says_so(
        capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The current folder is not a second guess for a module that exists but is broken."""
    (tmp_path / "broken_tools_cwd.py").write_text("import no_such_dependency_here\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry not in ("", ".")])
    status, _, err = run(capsys, "export", "--format", "mcp", "--table", "broken_tools_cwd:TOOLS")
    assert status == 2
    assert "no_such_dependency_here" in err
    sys.modules.pop("broken_tools_cwd", None)


@pytest.mark.slow
def test_the_console_script_imports_from_the_current_folder(tmp_path: Path) -> None:
    """A real process whose sys.path lacks the folder (python -P) still finds the table there."""
    (tmp_path / "desk_tools.py").write_text(DESK_TOOLS)
    done = subprocess.run(
        [sys.executable, "-P", "-m", "agtool._cli", "export", "--format", "openai", "--table",
         "desk_tools:TOOLS"], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout)[0]["function"]["name"] == "search"


@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    pytest.param(["lint", "--table", "tests.fixtures.wide_table:TOOLS", "--json"], id="lint"),
    pytest.param(["export", "--format", "openai", "--table", "tests.fixtures.wide_table:TOOLS"],
                 id="export"),
])
def test_a_reader_that_stops_early_gets_no_traceback(argv: list[str]) -> None:
    """`agtool ... | head -1`: the command ends quietly, with SIGPIPE's status, not a traceback."""
    process = subprocess.Popen(  # noqa: S603 - this repository's own CLI
        [sys.executable, "-m", "agtool._cli", *argv], cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    first = process.stdout.readline()
    process.stdout.close()  # the reader stops: the rest of the output meets a closed pipe
    _, err = process.communicate(timeout=60)
    assert first.strip() == b"["
    assert (process.returncode, err) == (141, b"")


@pytest.mark.slow
def test_head_in_a_shell_pipeline_sees_no_error() -> None:
    """The shell form itself: `agtool lint --json | head -1` prints one line and no error."""
    command = (f"{sys.executable} -m agtool._cli lint --table tests.fixtures.wide_table:TOOLS "
               f"--json | head -1")
    done = subprocess.run(["bash", "-c", command], cwd=ROOT,  # noqa: S603, S607 - a fixed line
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=60, check=False)
    assert (done.stdout, done.stderr) == ("[\n", "")
