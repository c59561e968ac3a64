"""agtool.keys_for: a write's run id and step id from the ids an engine already has."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from agtool import keys_for

WORKER = Path(__file__).resolve().parent.parent / "_dbos_worker.py"


def test_pydantic_ai_keys_a_call_by_its_conversation_and_tool_call() -> None:
    """The conversation id outlives a resumed run (a new run id), so it is the run id."""
    ctx = SimpleNamespace(conversation_id="conv-1", run_id="run-2", tool_call_id="call_3")
    assert keys_for.pydantic_ai(ctx) == {"run_id": "conv-1", "step_id": "call_3"}
    ctx = SimpleNamespace(conversation_id=None, run_id="run-2", tool_call_id="")
    assert keys_for.pydantic_ai(ctx) == {"run_id": "run-2", "step_id": None}


def test_openai_agents_keys_a_call_by_the_given_run_or_its_group() -> None:
    """``run_id`` wins; else the run config's ``group_id``; an empty id is no id."""
    ctx = SimpleNamespace(run_config=SimpleNamespace(group_id="group-1"), tool_call_id="c1")
    assert keys_for.openai_agents(ctx) == {"run_id": "group-1", "step_id": "c1"}
    assert keys_for.openai_agents(ctx, "run-9") == {"run_id": "run-9", "step_id": "c1"}
    assert keys_for.openai_agents(SimpleNamespace(run_config=None, tool_call_id=7)) == {
        "run_id": None, "step_id": "7"}


def test_temporal_keys_an_activity_by_its_workflow_and_activity_ids() -> None:
    """Inside a real Temporal activity (temporalio's test environment, no server), the ids
    are the activity's: the same on each of its retries."""
    import dataclasses

    from temporalio.testing import ActivityEnvironment

    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(environment.info, workflow_id="wf-9",
                                           activity_id="act-3", attempt=2)
    assert environment.run(keys_for.temporal) == {"run_id": "wf-9", "step_id": "act-3"}


@pytest.mark.parametrize(("function", "package", "install"), [
    pytest.param(keys_for.dbos, "dbos", "dbos", id="dbos"),
    pytest.param(keys_for.temporal, "temporalio", "temporalio", id="temporal"),
])
def test_a_missing_engine_package_is_a_one_line_error_naming_it(
        monkeypatch: pytest.MonkeyPatch, function: object, package: str, install: str) -> None:
    """Called outside an install of its engine, a key reader says what to install."""
    monkeypatch.setitem(sys.modules, package, None)  # what a missing package looks like
    with pytest.raises(ImportError) as caught:
        function()  # type: ignore[operator]
    assert str(caught.value) == (
        f"agtool.keys_for.{function.__name__} needs the {package} package: "  # type: ignore[attr-defined]
        f"pip install {install}")


def _run_worker(folder: Path, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(WORKER), str(folder), mode],  # noqa: S603
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "recovered_by"), [
    pytest.param("after-call", "replayed", id="killed-after-the-gate-answered"),
    pytest.param("in-body", "reconciled", id="killed-inside-the-body"),
])
def test_a_dbos_step_killed_after_its_effect_runs_the_body_once(
        tmp_path: Path, mode: str, recovered_by: str) -> None:
    """A real DBOS workflow (SQLite system database) whose step is SIGKILLed after the refund:
    DBOS recovers it and runs the step again under the same workflow and step id, and the
    gate answers it from the write store (or, when the kill left the outcome unknown, from
    the contract's reconcile), so the refund happened once."""
    killed = _run_worker(tmp_path, mode)
    assert killed.returncode == -9, killed.stderr
    recovered = _run_worker(tmp_path, mode)
    assert recovered.returncode == 0, recovered.stderr
    report = json.loads(recovered.stdout.strip().splitlines()[-1])
    assert report["result"] == {"ok": True, "value": {"refund_id": "R-O-7"}, "error": ""}
    assert report["runs"] == 0
    assert report[recovered_by] == 1
    assert (tmp_path / "effects.log").read_text() == "O-7\n"


@pytest.mark.slow
def test_without_the_gate_a_recovered_dbos_step_refunds_twice(tmp_path: Path) -> None:
    """The control: the same step running the refund itself is run again on recovery."""
    assert _run_worker(tmp_path, "ungated").returncode == -9
    assert _run_worker(tmp_path, "ungated").returncode == 0
    assert (tmp_path / "effects.log").read_text() == "O-7\nO-7\n"
