"""The graph and retryable reasons: repeat what may succeed, never what cannot.

Each tool here counts its own body runs; the expected reasons are the ones the
test's bodies were written to cause (a timeout, a 503, a 429), and the waits are
read from a recorded ``time.sleep``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

import agtool.graph._build as graph_module
from agtool import Gate, UpstreamError
from agtool.graph._build import (
    MAX_ATTEMPTS,
    MAX_RETRY_WAIT,
    RETRY_BACKOFF,
    build_graph,
    build_naive,
)

ROW = {"store": "s1", "count": 3}
RETURNS = {"sku": {"type": "str"}, "rows": {"type": "list", "item": {"store": {"type": "str"},
                                                                     "count": {"type": "int"}}}}
ARGS = {"sku": {"type": "str"}}


class Body:
    """A tool body answering from a script: an exception to raise, or a value to return."""

    def __init__(self, *script: Any, delay: float = 0.0) -> None:
        self.script = list(script)
        self.delay = delay
        self.runs = 0

    def __call__(self, **kwargs: Any) -> Any:
        step = self.script[min(self.runs, len(self.script) - 1)]
        self.runs += 1
        if self.delay:
            time.sleep(self.delay)
        if isinstance(step, BaseException):
            raise step
        return step


def one_tool(body: Body, **entry: Any) -> Gate:
    table = {"t": {"fn": body, "args": ARGS, "returns": RETURNS, **entry}}
    return Gate(table, scope={"read_public", "reversible_write", "external_effect"})


OK = {"sku": "A100", "rows": [ROW]}
ORDER = {"tool": "t", "sku": "A100"}


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The retry node's waits, recorded instead of slept (bodies here sleep only with a delay)."""
    seen: list[float] = []
    monkeypatch.setattr(graph_module.time, "sleep", seen.append)
    return seen


def invoke(gate: Gate, **state: Any) -> dict[str, Any]:
    return build_graph(gate=gate).invoke({"order": ORDER, **state})


def test_an_upstream_503_is_retried_with_the_same_call(waits: list[float]) -> None:
    """A retryable upstream failure repeats the unchanged call; the second answer is used."""
    body = Body(UpstreamError(503, "busy"), OK)
    out = invoke(one_tool(body))
    assert out["ok"] is True
    assert body.runs == 2
    assert out["errors"] == ["upstream:503"]
    assert out["retries"] == 1
    assert out["calls"][0] == out["calls"][1]
    assert out["fixes"] == []
    assert waits == [RETRY_BACKOFF]


def test_retries_stop_at_max_attempts_with_growing_waits(waits: list[float]) -> None:
    """A tool that keeps timing out (builtin TimeoutError) is tried MAX_ATTEMPTS times, no more."""
    body = Body(TimeoutError())
    out = invoke(one_tool(body))
    assert out["ok"] is False
    assert body.runs == MAX_ATTEMPTS
    assert out["errors"] == ["timeout"] * MAX_ATTEMPTS
    assert waits == [RETRY_BACKOFF * 2 ** n for n in range(MAX_ATTEMPTS - 1)]


def test_a_rate_limit_waits_as_the_upstream_asks_within_the_cap(waits: list[float]) -> None:
    """``retry_after`` is honoured, but never beyond MAX_RETRY_WAIT."""
    body = Body(UpstreamError(429, retry_after=0.5), UpstreamError(429, retry_after=60), OK)
    out = invoke(one_tool(body))
    assert out["ok"] is True
    assert out["errors"] == ["upstream:429", "upstream:429"]
    assert waits == [0.5, MAX_RETRY_WAIT]


@pytest.mark.parametrize("failure", [
    pytest.param(UpstreamError(400, "bad request"), id="upstream-400"),
    pytest.param(UpstreamError(404), id="not-found"),
    pytest.param(ValueError("bug"), id="raised"),
    pytest.param({"sku": "A100", "rows": []}, id="empty-result"),
])
def test_a_reason_that_is_not_retryable_ends_the_run_at_once(failure: Any,
                                                             waits: list[float]) -> None:
    """An error the same call cannot escape is not repeated: one attempt, no wait."""
    body = Body(failure, OK)
    out = invoke(one_tool(body))
    assert out["ok"] is False
    assert body.runs == 1
    assert out["attempts"] == 1
    assert waits == []


def test_an_argument_error_is_never_retried_unchanged(waits: list[float]) -> None:
    """A refused argument with no repair rule ends the run; the same args are not sent again."""
    body = Body(OK)
    gate = one_tool(body)
    out = build_graph(gate=gate).invoke({"order": {"tool": "t", "sku": 7}})
    assert out["errors"] == ["args:type:sku"]
    assert out["attempts"] == 1
    assert body.runs == 0
    assert waits == []


def test_a_scope_the_caller_lacks_ends_the_run_without_a_body(waits: list[float]) -> None:
    """The state's scope is the caller's authority; the model or order cannot widen it."""
    body = Body(OK)
    gate = one_tool(body, risk="read_sensitive")
    out = invoke(gate, scope=["read_public"])
    assert out["errors"] == ["auth:scope:read_sensitive"]
    assert out["ok"] is False
    assert body.runs == 0
    assert invoke(gate, scope=["read_sensitive"])["ok"] is True
    assert body.runs == 1


def test_a_write_that_timed_out_is_looked_up_by_its_key_before_the_retry() -> None:
    """The retry of a timed-out write finds the stored outcome: the body ran once."""
    body = Body(OK, delay=0.2)
    gate = one_tool(body, effect="write", timeout=0.05)
    out = invoke(gate, run_id="run-1")
    assert out["ok"] is True
    assert out["errors"] == ["timeout"]
    assert out["rows"] == [ROW]
    assert body.runs == 1
    assert gate.stats("t").replayed == 1


def test_the_same_run_id_replays_a_finished_write_in_a_new_run() -> None:
    """A restarted run with the caller's run id does not write again; a new run id does."""
    body = Body(OK)
    gate = one_tool(body, effect="write")
    first = invoke(gate, run_id="run-1")
    again = invoke(gate, run_id="run-1")
    assert first["rows"] == again["rows"] == [ROW]
    assert body.runs == 1
    invoke(gate, run_id="run-2")
    assert body.runs == 2


def test_an_external_write_needs_the_callers_approval_of_these_args() -> None:
    """Approvals come with the state; one for other args does not let the body run."""
    body = Body(OK)
    gate = one_tool(body, effect="write", risk="external_effect")
    other = gate.approve("t", {"sku": "B200"})
    refused = invoke(gate, approvals=[other])
    assert refused["errors"] == ["auth:approval"]
    assert body.runs == 0
    approved = invoke(gate, approvals=[gate.approve("t", {"sku": "A100"})])
    assert approved["ok"] is True
    assert body.runs == 1


@pytest.mark.parametrize("build", [build_naive, build_graph], ids=["naive", "repairing"])
def test_the_graphs_hand_on_the_gates_model_answer(build: Callable[..., Any]) -> None:
    """``tool_reply`` is the structured answer, with source and trust marked."""
    body = Body(OK)
    gate = Gate({"t": {"fn": body, "args": ARGS, "returns": RETURNS, "source": "web"}})
    out = build(gate=gate).invoke({"order": ORDER})
    reply = out["tool_reply"]
    assert reply["ok"] is True
    assert reply["data"] == OK
    assert reply["source"]["trust"] == "untrusted"


def test_the_model_graph_retries_without_asking_the_model(waits: list[float]) -> None:
    """A retryable reason is repeated by the graph; the model, which cannot fix a 503, is asked
    only to pick. A model asked a second time would find its script empty and fail the run."""
    from test_model_pick import calling, scripted

    body = Body(UpstreamError(503), OK)
    gate = one_tool(body)
    model = scripted(calling("t", {"sku": "A100"}, "c1"))
    out = build_graph(model, gate=gate).invoke({"order": {"sku": "A100"}})
    assert out["ok"] is True
    assert out["errors"] == ["upstream:503"]
    assert body.runs == 2
    assert len(model.seen) == 1
