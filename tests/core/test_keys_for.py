"""agtool.keys_for: a write's run id and step id from the ids an engine already has."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from agtool import keys_for


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
