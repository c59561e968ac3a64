"""The repair graph for any table: a failed tool call is a path through the graph, not an exception.

Both graphs are LangGraph ``StateGraph`` s over the gate they are given, so
they can be invoked, streamed, embedded as subgraphs and drawn with
``get_graph().draw_mermaid()``::

    build_naive():  START -> pick -> fetch -> reply -> END
                               |        |
                               +--------+-> giveup -> END

    build_graph():  START -> pick -> fetch -> reply -> END
                               |      |  ^
                               |      v  |
                               |  repair | retry    (a repairable | retryable reason,
                               |      |              attempts left)
                               +------+-> giveup -> END

``pick`` chooses the tool and arguments: by rule (``order_pick``: the order's
``tool`` field names the tool, or the only tool of a one-tool table, and every
other field is an argument), or by asking a chat model (``build_graph(model,
gate=gate)``, see ``agtool.graph._model``), whose every tool call of a turn goes
through the gate and gets its own ``ToolMessage``. ``reply`` builds the answer from what the tool
returned (``result_reply``); ``repair`` applies the repairs table
(``default_repairs``: drop, clamp, exact conversion, declared fallback) or asks
the model again. Every failure appends a reason to ``errors``: the gate's
(``args:…``, ``result:…``, ``raised:…``) or the agent's own, built here:

- ``order:not_object``: the order is not a dict, so there is nothing to pick from.
- ``model:no_tool_call``, ``model:raised:<ExceptionClassName>``: the model did not choose.
- ``repair:none``: no rule fixes the last reason for this call.
- ``repair:repeat``: the fixed call was already made in this run.

An agent reason always ends the run. ``attempts`` counts rounds of gate
calls: one call per round by rule, every call of the model's turn per round
with a model; ``repair`` and ``retry`` run at most ``MAX_ATTEMPTS - 1`` times
between them, so ``attempts <= MAX_ATTEMPTS`` whatever the order, and no call
is tried more than ``MAX_ATTEMPTS`` times. ``retry`` repeats a call, with the
same idempotency key, only when the gate's reason is retryable
(``is_retryable``: a timeout, a rate limit, an upstream 5xx); an argument
error is repaired or ends the run, never repeated as it was.

The caller's authority comes in with the order, never from the model: invoke
with ``{"order": …, "scope": [...], "approvals": [...], "run_id": "…"}``; a
run without ``run_id`` gets a fresh one. A write is keyed by the run id and
the step id: ``STEP_ID`` for the rule graph's one call, the model's tool-call
id for each of its calls, the same across retries.

Three modules, layered so none imports one above it: ``agtool.graph._parts``
holds what both graphs share (the state, the gate call, the reply, the
skeleton); ``agtool.graph._model`` builds the model path on it; this module
builds the rule graph on it and is the entry point (``build_graph`` hands a
model to ``build_model_graph``; ``handle``, ``run_graph``). None knows a
table: the seed's stock agent is configured from them in
``agtool._stock_agent`` and bound to its gate in ``agtool.tools``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypedDict

from langchain_core.language_models import BaseChatModel

from .._answers import is_retryable
from .._authority import Approval
from .._gate import Gate
from .._reasons import (
    AGENT_STAGES,
    MODEL_NO_TOOL_CALL,
    MODEL_RAISED,
    ORDER_NOT_OBJECT,
    REPAIR_NONE,
    REPAIR_REPEAT,
    parse_reason,
)
from ._model import build_model_graph, tool_specs
from ._parts import (
    MAX_ATTEMPTS,
    MAX_RETRY_WAIT,
    RETRY_BACKOFF,
    STEP_ID,
    AgentGraph,
    ModelState,
    Node,
    State,
    TurnCall,
    Update,
    changes,
    contract_of,
    fresh_run_id,
    gated,
    giveup,
    last_error,
    order_fields,
    reason_of,
    result_reply,
    retry_wait,
    rows_of,
    skeleton,
    was_tried,
    with_repair,
)
from ._repairs import Call, Fix, RepairRule, default_repairs, rule_for

__all__ = [
    "AGENT_STAGES",
    "MAX_ATTEMPTS",
    "MAX_RETRY_WAIT",
    "MODEL_NO_TOOL_CALL",
    "MODEL_RAISED",
    "ORDER_NOT_OBJECT",
    "REPAIR_NONE",
    "REPAIR_REPEAT",
    "RETRY_BACKOFF",
    "STEP_ID",
    "AgentGraph",
    "Call",
    "Fix",
    "ModelState",
    "NaiveOutcome",
    "Node",
    "Outcome",
    "State",
    "TurnCall",
    "build_graph",
    "build_naive",
    "giveup",
    "handle",
    "make_fetch",
    "make_repair",
    "order_pick",
    "reasons_repaired_by",
    "result_reply",
    "retry",
    "rows_of",
    "run_graph",
    "tool_specs",
]

class NaiveOutcome(TypedDict):
    """What ``run_naive`` answers."""

    ok: bool
    answer: str
    rows: list[Any]
    errors: list[str]
    calls: list[Call]


class Outcome(NaiveOutcome):
    """What ``handle`` answers: ``NaiveOutcome`` plus how the run got there."""

    attempts: int
    fixes: list[Fix]
    tool_runs: int  #: tool bodies run during the call, read from the gate's counters


# --- pick ------------------------------------------------------------------------------------


def order_pick(default_tool: str | None = None, gate: Gate | None = None) -> Node:
    """A rule ``pick``: the order's ``tool`` field names the tool, every other field is an arg.

    An order naming no tool (or ``None``) goes to ``default_tool``, else to the
    only tool of ``gate``'s table; with several and no default, the gate
    answers ``args:unknown_tool``.
    """
    def pick(state: State) -> Update:
        """Choose the tool and arguments from the order, by rule.

        Every field but ``tool`` is passed through as an argument, unchecked: the
        gate refuses what is missing, mistyped or extra with its own reason, which
        is what ``repair`` reads. An order that is not a dict is refused here with
        ``order:not_object``.
        """
        fields = order_fields(state.get("order"))
        if fields is None:
            return {"errors": [ORDER_NOT_OBJECT]}
        tool = fields.pop("tool", None)
        if tool is None:
            tool = default_tool if default_tool is not None else _only_tool(gate)
        return {"tool": tool, "args": fields, **fresh_run_id(state)}

    return pick


def _only_tool(gate: Gate | None) -> str | None:
    names = list(gate.table) if gate is not None else []
    return names[0] if len(names) == 1 else None


# --- fetch -----------------------------------------------------------------------------------


def make_fetch(gate: Gate) -> Node:
    """The rule graph's ``fetch`` node over ``gate``."""
    def fetch(state: State) -> Update:
        """Call the gate once with the chosen tool and args; never raises.

        Appends the call to ``calls``, any reason to ``errors``, adds 1 to
        ``attempts``, and keeps the gate's answer in ``tool_reply`` (with
        sensitive values redacted). The order's values of echo arguments are
        what the chosen args must repeat; the state's scope, approvals and run
        id are the caller's authority and the idempotency key's run.
        """
        call: Call = {"tool": state.get("tool"), "args": state.get("args")}
        answer = gated(gate, state, call["tool"], call["args"], STEP_ID)
        update: Update = {"calls": [call], "attempts": 1, "ok": answer["ok"],
                          "tool_reply": answer}
        if answer["ok"]:
            update["rows"] = rows_of(contract_of(gate, call["tool"]), answer["data"])
        else:
            update["rows"] = []
            update["errors"] = [reason_of(answer)]
        return update

    return fetch


# --- repair by rule --------------------------------------------------------------------------


def _accept(reason: str, tried: Sequence[Call], fixed: Call) -> Update:
    """The update that sends ``fixed`` back to ``fetch``, or the reason it must not go."""
    if was_tried(fixed, tried):
        return {"errors": [REPAIR_REPEAT]}
    return {"tool": fixed["tool"], "args": fixed["args"],
            "fixes": changes(reason, tried[-1], fixed)}


def _proposed(gate: Gate, repairs: Mapping[str, RepairRule],
              state: Mapping[str, Any]) -> Call | None:
    """The call the repairs make of the last one for the last reason, or ``None``."""
    errors, tried = state.get("errors") or [], state.get("calls") or []
    rule = rule_for(repairs, errors[-1]) if errors and tried else None
    if rule is None:
        return None
    last = tried[-1]
    return rule(last, parse_reason(errors[-1]), contract_of(gate, last["tool"]))


def make_repair(gate: Gate, repairs: Mapping[str, RepairRule]) -> Node:
    """The rule graph's ``repair`` node: ``repairs`` applied to the last call."""
    def repair(state: State) -> Update:
        """Fix the last call as the repairs say for the last reason, unless already tried.

        Records the change in ``fixes`` and sets the new tool and args; otherwise
        appends ``repair:none`` or ``repair:repeat``, which ends the run.
        """
        fixed = _proposed(gate, repairs, state)
        if fixed is None:
            return {"errors": [REPAIR_NONE]}
        return _accept(state["errors"][-1], state["calls"], fixed)

    return repair


def reasons_repaired_by(repairs: Mapping[str, RepairRule]) -> Callable[[str], bool]:
    """Whether ``repairs`` holds a rule for a reason (not whether it fixes a given call)."""
    return lambda reason: rule_for(repairs, reason) is not None


# --- retry -----------------------------------------------------------------------------------


def retry(state: State) -> Update:
    """Wait, then send the same call back to ``fetch``: same args, same idempotency key.

    Entered only for a retryable reason. The wait doubles from ``RETRY_BACKOFF``
    with each retry, or is the upstream's ``retry_after``, never more than
    ``MAX_RETRY_WAIT``.
    """
    details = (state.get("tool_reply") or {}).get("error", {}).get("details", {})
    time.sleep(retry_wait([details], state.get("retries", 0)))
    return {"retries": 1}


# --- routing ---------------------------------------------------------------------------------


def _after_one_fetch(state: State) -> str:
    return "reply" if state.get("ok") else "giveup"


def _after_fetch(repairable: Callable[[State], bool]) -> Callable[[State], str]:
    def route(state: State) -> str:
        if state.get("ok"):
            return "reply"
        # ``<`` so that the fetch after this repair or retry is at most attempt MAX_ATTEMPTS.
        if state.get("attempts", 0) >= MAX_ATTEMPTS:
            return "giveup"
        if is_retryable(last_error(state)):
            return "retry"
        return "repair" if repairable(state) else "giveup"

    return route


# --- graphs ----------------------------------------------------------------------------------


def build_naive(*, gate: Gate, pick: Node | None = None, reply: Node | None = None,
                name: str = "agtool_naive") -> AgentGraph:
    """The one-call graph over ``gate``: ``pick``, one ``fetch``, then ``reply`` or ``giveup``.

    ``pick`` and ``reply`` default to ``order_pick(gate=gate)`` and ``result_reply(gate)``.
    """
    graph = skeleton(State, pick or order_pick(gate=gate), make_fetch(gate),
                     reply or result_reply(gate))
    graph.add_conditional_edges("fetch", _after_one_fetch, ["reply", "giveup"])
    return graph.compile(name=name)


def build_graph(model: BaseChatModel | None = None, *, gate: Gate, pick: Node | None = None,
                reply: Node | None = None, repairs: Mapping[str, RepairRule] | None = None,
                fallbacks: Mapping[str, object] | None = None,
                can_repair: Callable[[str], bool] | None = None,
                name: str | None = None) -> AgentGraph:
    """The repairing graph over ``gate``: with attempts left, ``retry`` a retryable reason,
    ``repair`` a repairable one, then ``fetch`` again.

    Without ``model``, ``pick`` (default ``order_pick(gate=gate)``) and the
    repairs (default ``default_repairs(fallbacks)``) are rules over ``State``.
    The graph goes to ``repair`` when the repairs have a fix for this call, or,
    given ``can_repair``, whenever it accepts the reason (the fix may then be
    ``repair:none``). ``reply`` defaults to ``result_reply(gate)``.

    With ``model`` (a chat model supporting ``bind_tools``), it is
    ``agtool.graph._model.build_model_graph``: the model is bound
    to ``tool_specs(gate)`` and picks and repairs, over ``ModelState``: every
    tool call of its turn is gated (step id: its tool-call id) and answered
    with its own ``ToolMessage``; a retryable failure is retried by the graph,
    and failures the model can fix go back to it as ``status="error"``
    messages with the structured error (the allowed values and bounds in
    ``details.fields``), while the calls that succeeded keep their results.

    Either way the gate checks every call, ``attempts <= MAX_ATTEMPTS``, a
    failed call is not made again, and ``result:empty`` ends the run at once.
    Raises ``ValueError`` for options that do not go together (a model with
    rule repairs or a rule pick, ``repairs`` with ``fallbacks``, a fallback
    for an argument no tool limits to ``allowed`` values); ``bind_tools``
    raising (a model without tool calling) raises here too.
    """
    if model is None:
        fixes = _repairs_of(gate, repairs, fallbacks)
        rules = skeleton(State, pick or order_pick(gate=gate), make_fetch(gate),
                         reply or result_reply(gate))
        repairable = (_has_fix(gate, fixes) if can_repair is None
                      else lambda state: can_repair(last_error(state)))
        return with_repair(rules, make_repair(gate, fixes), retry,
                           _after_fetch(repairable), name or "agtool_agent")
    if pick is not None or repairs is not None or fallbacks or can_repair is not None:
        raise ValueError("with a model, the model picks and repairs: pick, repairs, fallbacks "
                         "and can_repair are for the rule graph")
    return build_model_graph(model, gate=gate, reply=reply, name=name)


def _repairs_of(gate: Gate, repairs: Mapping[str, RepairRule] | None,
                fallbacks: Mapping[str, object] | None) -> Mapping[str, RepairRule]:
    if repairs is not None:
        if fallbacks:
            raise ValueError("give fallbacks to default_repairs(fallbacks) when passing repairs")
        return repairs
    limited = {arg for name in gate.table if (contract := gate.contract(name)) is not None
               for arg, spec in contract.args.items() if spec.allowed is not None}
    unknown = sorted(map(repr, set(fallbacks or ()) - limited))
    if unknown:  # a misspelt argument would silently never fall back
        raise ValueError(f"fallbacks name {', '.join(unknown)}: no tool of this gate has such "
                         "an argument with allowed values")
    return default_repairs(fallbacks)


def _has_fix(gate: Gate, repairs: Mapping[str, RepairRule]) -> Callable[[State], bool]:
    return lambda state: _proposed(gate, repairs, state) is not None


# --- runs ------------------------------------------------------------------------------------


def _body_runs(gate: Gate) -> int:
    return sum(gate.stats(name).runs for name in list(gate.table))


def _outcome(state: Mapping[str, Any]) -> NaiveOutcome:
    return {"ok": bool(state.get("ok")), "answer": state.get("answer", ""),
            "rows": state.get("rows", []), "errors": state.get("errors", []),
            "calls": state.get("calls", [])}


def run_graph(graph: AgentGraph, gate: Gate, order: object, *,
              scope: Iterable[str] | None = None, approvals: Iterable[Approval] = (),
              run_id: str | None = None) -> Outcome:
    """Invoke ``graph`` (built over ``gate``) on ``order`` with the caller's authority.

    ``tool_runs`` is the tool bodies ``gate`` ran meanwhile (memo hits,
    replayed writes and refused calls run none).
    """
    state: dict[str, Any] = {"order": order}
    if scope is not None:
        state["scope"] = list(scope)
    if approvals:
        state["approvals"] = list(approvals)
    if run_id is not None:
        state["run_id"] = run_id
    before = _body_runs(gate)
    final = graph.invoke(state)
    return {**_outcome(final), "attempts": final.get("attempts", 0),
            "fixes": final.get("fixes", []), "tool_runs": _body_runs(gate) - before}


def handle(order: object, model: BaseChatModel | None = None, *, gate: Gate,
           scope: Iterable[str] | None = None, approvals: Iterable[Approval] = (),
           run_id: str | None = None, **options: Any) -> Outcome:
    """Run ``build_graph(model, gate=gate, **options)`` on ``order``; never raises.

    (Only building can raise, as ``build_graph`` does.) ``scope``,
    ``approvals`` and ``run_id`` are the caller's authority, as in the state.
    The model's conversation is in the state of ``build_graph(...).invoke(...)``.
    """
    graph = build_graph(model, gate=gate, **options)
    return run_graph(graph, gate, order, scope=scope, approvals=approvals, run_id=run_id)
