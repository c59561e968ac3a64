"""The LangChain adapters' inner gate is the caller's gate's twin: the same secret (whatever
``AGTOOL_SECRET`` says), the same store, lease and workers, so one tool call answered through
``gated_tools`` and through ``GateMiddleware`` is one write."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _fake_chat import ScriptedChat, call, turn
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool

from agtool import Gate
from agtool._keys import ENV_SECRET
from agtool._store import SqliteStore
from agtool.langchain import GateMiddleware, GateWrapper, gated_tools

CALLER_SECRET = "the-callers-own-secret-0123456789"  # noqa: S105 - a test's own secret
ENV_ONE = "a-different-secret-in-the-env-9876"
WRITER = ["read_public", "reversible_write"]
THREAD = {"configurable": {"thread_id": "conv-1"}}
ARGS = {"order": "O-7", "amount": 20}


class Refunds:
    """A refund body counting its runs, and what its claim's lease was while it ran."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.orders: list[str] = []
        self.leases: list[float] = []

    def __call__(self, order: str, amount: int) -> dict[str, Any]:
        self.orders.append(order)
        for entry in self.store.pending():
            self.leases.append(round(entry.lease_until - entry.claimed_at))
        return {"refund_id": f"R-{len(self.orders)}"}

    def table(self) -> dict[str, Any]:
        return {"issue_refund": {"fn": self, "args": {"order": {"type": "str"},
                                                      "amount": {"type": "int"}},
                                 "returns": {"refund_id": {"type": "str"}},
                                 "effect": "write", "key_args": ["order"]}}

    def agent_tool(self) -> Any:
        @tool
        def issue_refund(order: str, amount: int) -> dict:
            """Refund an order."""
            return self(order, amount)
        return issue_refund


def answers(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m.content) for m in result["messages"] if isinstance(m, ToolMessage)]


def test_one_call_through_gated_tools_and_the_middleware_is_one_write(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``AGTOOL_SECRET`` set and ``secret=`` given, the same call (same thread, same
    call id) through ``gated_tools`` and then through ``GateMiddleware`` runs once."""
    monkeypatch.setenv(ENV_SECRET, ENV_ONE)
    store = SqliteStore()
    refunds = Refunds(store)
    gate = Gate(refunds.table(), scope=WRITER, store=store, secret=CALLER_SECRET)
    refund = call("issue_refund", ARGS, "w1")
    first = create_agent(ScriptedChat(turns=[turn(refund)]),
                         tools=gated_tools(gate, scope=WRITER)).invoke(
        {"messages": [("user", "refund")]}, THREAD)
    second = create_agent(ScriptedChat(turns=[turn(refund)]), tools=[refunds.agent_tool()],
                          middleware=[GateMiddleware(gate, scope=WRITER)]).invoke(
        {"messages": [("user", "refund")]}, THREAD)
    assert answers(first)[0]["data"] == answers(second)[0]["data"] == {"refund_id": "R-1"}
    assert refunds.orders == ["O-7"]


def test_the_inner_gate_keeps_the_callers_lease_and_workers() -> None:
    """A gate made with a lease of its own: the middleware's writes are claimed under that
    lease (not the 300 s default), and its keys are the caller's."""
    store = SqliteStore()
    refunds = Refunds(store)
    gate = Gate(refunds.table(), scope=WRITER, store=store, secret=CALLER_SECRET,
                lease=3600.0, workers=3)
    refund = call("issue_refund", ARGS, "w1")
    create_agent(ScriptedChat(turns=[turn(refund)]), tools=[refunds.agent_tool()],
                 middleware=[GateMiddleware(gate, scope=WRITER)]).invoke(
        {"messages": [("user", "refund")]}, THREAD)
    assert refunds.leases == [3600]
    inner = GateWrapper(gate).gate
    assert inner.idempotency_key("issue_refund", ARGS, "r", "s") == gate.idempotency_key(
        "issue_refund", ARGS, "r", "s")


def test_every_adapters_shadow_gate_keeps_the_callers_keys_lease_and_workers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """pydantic-ai's GateCapability gates through agtool._shadow.shadow, as LangChain does:
    with AGTOOL_SECRET saying otherwise, its keys are the caller's, and its lease and worker
    pool are the caller's own."""
    from agtool._shadow import shadow

    monkeypatch.setenv(ENV_SECRET, "another-secret-0123456789abcdef")
    store = SqliteStore()
    gate = Gate(Refunds(store).table(), scope=WRITER, store=store, secret=CALLER_SECRET,
                lease=3600.0, workers=3)
    inner = shadow(gate)
    assert inner.idempotency_key("issue_refund", ARGS, "r", "s") == gate.idempotency_key(
        "issue_refund", ARGS, "r", "s")
    assert inner._runtime.lease == 3600.0
    assert inner._runtime.pool is gate._runtime.pool
