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
gate=gate)``), whose every tool call of a turn goes through the gate and gets
its own ``ToolMessage``. ``reply`` builds the answer from what the tool
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

This module knows no table: the seed's stock agent is configured from it in
``agtool._stock_agent`` and bound to its gate in ``agtool.tools``.
"""

from __future__ import annotations

import json
import logging
import operator
import time
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Annotated, Any, Protocol, TypedDict, TypeVar

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph

from ._answers import is_retryable
from ._authority import Approval
from ._contract import Spec, ToolContract, check_table
from ._gate import Gate
from ._jsonschema import tool_spec as export_spec
from ._memo import cache_key
from ._reasons import (
    AGENT_STAGES,
    BAD_CONTRACT,
    MODEL_NO_TOOL_CALL,
    MODEL_RAISED,
    ORDER_NOT_OBJECT,
    REPAIR_NONE,
    REPAIR_REPEAT,
    TOO_BIG,
    UNKNOWN_TOOL,
    parse_reason,
)
from ._records import REDACTED
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

_log = logging.getLogger("agtool")

#: Rounds of gate calls per run, the first included: ``repair`` is never entered once this
#: many were made.
MAX_ATTEMPTS = 3
#: Seconds ``retry`` waits before its first repeat, doubled for each one after.
RETRY_BACKOFF = 0.05
#: The longest ``retry`` waits, whatever an upstream's ``retry_after`` asks.
MAX_RETRY_WAIT = 2.0
#: The step id of the rule graph's one call: with the run id and the business key it makes
#: the idempotency key, the same for every retry and repair of the call.
STEP_ID = "call"


class TurnCall(TypedDict):
    """One tool call of the model's turn, with the gate's answer once it has one."""

    id: str  #: the model's tool-call id: the step id of its idempotency key
    tool: Any
    args: Any
    answer: dict[str, Any] | None  #: ``None`` until gated (again, for a retry)


class State(TypedDict, total=False):
    """The graph state; invoke a graph with ``{"order": order}``.

    ``errors``, ``calls`` and ``fixes`` only grow and ``attempts`` only adds up,
    so a node can never lose what an earlier one recorded.
    """

    order: Any  #: the caller's order, as given (never changed)
    tool: Any  #: the tool of the next (or last) call
    args: Any  #: the args of the next (or last) call
    rows: list[Any]  #: the rows of the last call, ``[]`` unless it succeeded (see ``rows_of``)
    answer: str
    ok: bool
    errors: Annotated[list[str], operator.add]  #: every reason met, in order
    calls: Annotated[list[Call], operator.add]  #: every call handed to the gate
    attempts: Annotated[int, operator.add]  #: rounds of gate calls made
    fixes: Annotated[list[Fix], operator.add]  #: what each repair changed
    retries: Annotated[int, operator.add]  #: rounds repeated unchanged on a retryable reason
    scope: list[str]  #: the risk levels the caller may use (default: the gate's)
    approvals: list[Approval]  #: the caller's approvals of exact calls
    run_id: str  #: keys the run's writes; a fresh one when not given
    tool_reply: dict[str, Any]  #: the gate's last answer, in the form handed to a model


class ModelState(State, total=False):
    """``State`` plus the conversation with the model that picks, and its turn's calls."""

    messages: Annotated[list[AnyMessage], add_messages]
    turn: list[TurnCall]  #: the calls whose answers make the reply (replaced, not added)
    refused: Annotated[list[Call], operator.add]  #: calls that failed: never made again


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


Update = dict[str, Any]
#: Either state schema: the rule graph's or the model graph's.
S = TypeVar("S", State, ModelState)
S_contra = TypeVar("S_contra", State, ModelState, contravariant=True)


class NodeOf(Protocol[S_contra]):
    """A graph node; a protocol, not a ``Callable``, so LangGraph's types see ``state``."""

    def __call__(self, state: S_contra) -> Update: ...


Node = NodeOf[State]
ModelNode = NodeOf[ModelState]
AgentGraph = CompiledStateGraph[Any, None, Any, Any]


# --- pick ------------------------------------------------------------------------------------


def _order_fields(order: object) -> dict[Any, Any] | None:
    """The order as a fresh dict, or ``None`` when it is not a mapping that can be read."""
    if not isinstance(order, Mapping):
        return None
    try:
        return dict(order.items())
    except Exception:  # a mapping whose items() raises cannot be an order
        return None


def _run_id(state: Mapping[str, Any]) -> Update:
    """A fresh run id when the caller gave none, so that the run's writes are keyed."""
    return {} if state.get("run_id") else {"run_id": uuid.uuid4().hex}


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
        fields = _order_fields(state.get("order"))
        if fields is None:
            return {"errors": [ORDER_NOT_OBJECT]}
        tool = fields.pop("tool", None)
        if tool is None:
            tool = default_tool if default_tool is not None else _only_tool(gate)
        return {"tool": tool, "args": fields, **_run_id(state)}

    return pick


def _only_tool(gate: Gate | None) -> str | None:
    names = list(gate.table) if gate is not None else []
    return names[0] if len(names) == 1 else None


def _keyed(node: NodeOf[S]) -> NodeOf[S]:
    """``node`` that also gives the run its fresh run id, whatever pick the caller wrote."""
    def pick(state: S) -> Update:
        update = node(state)
        return update if "run_id" in update else {**update, **_run_id(state)}

    return pick


# --- fetch -----------------------------------------------------------------------------------


def _listed_key(contract: ToolContract | None) -> str | None:
    """The first top-level list the return contract declares: the rows an answer reads."""
    if contract is None:
        return None
    return next((key for key, spec in contract.returns.items() if spec.type == "list"), None)


def rows_of(contract: ToolContract | None, data: object) -> list[Any]:
    """The rows of a successful result: the items of its first declared top-level list, or,
    when the contract declares none, the result itself as the one row."""
    key = _listed_key(contract)
    if key is None:
        return [data]
    rows = data.get(key) if isinstance(data, dict) else None
    return rows if isinstance(rows, list) else []


def _contract(gate: Gate, tool: object) -> ToolContract | None:
    return gate.contract(tool) if isinstance(tool, str) else None


def _echo_values(gate: Gate, tool: object, order: object) -> dict[str, object] | None:
    """The order's values for the tool's echo arguments: what the picker had to copy."""
    contract = _contract(gate, tool)
    fields = _order_fields(order)
    if contract is None or fields is None:
        return None
    return {name: fields[name] for name, spec in contract.args.items()
            if spec.echo and name in fields}


def _gated(gate: Gate, state: Mapping[str, Any], tool: object, args: object,
           step_id: str) -> dict[str, Any]:
    """The gate's answer to one call, with the caller's authority from the state."""
    return gate.call_for_model(
        tool, args, _echo_values(gate, tool, state.get("order")), scope=state.get("scope"),
        run_id=state.get("run_id"), step_id=step_id, approvals=state.get("approvals") or ())


def _reason(answer: Mapping[str, Any]) -> str:
    reason: str = answer["error"]["details"]["reason"]
    return reason


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
        answer = _gated(gate, state, call["tool"], call["args"], STEP_ID)
        update: Update = {"calls": [call], "attempts": 1, "ok": answer["ok"],
                          "tool_reply": answer}
        if answer["ok"]:
            update["rows"] = rows_of(_contract(gate, call["tool"]), answer["data"])
        else:
            update["rows"] = []
            update["errors"] = [_reason(answer)]
        return update

    return fetch


# --- reply and giveup ------------------------------------------------------------------------

#: Characters of one value quoted in an answer, and fields of one row.
_SHOWN_VALUE = 80
_SHOWN_FIELDS = 8


def _quoted(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):  # a cycle or non-str keys: a repr still reads
        text = repr(value)
    return text if len(text) <= _SHOWN_VALUE else text[:_SHOWN_VALUE - 3] + "..."


def _fields_text(value: object, specs: object) -> str:
    """``key=value`` for the keys the contract declares, in its order; any other value quoted."""
    if not isinstance(value, dict) or not isinstance(specs, dict):
        return _quoted(value)
    shown = [f"{key}={_quoted(value[key])}" for key in specs if key in value]
    return ", ".join(shown[:_SHOWN_FIELDS]) or "{}"


def _summary(contract: ToolContract | None, tool: object, data: object) -> str:
    """One sentence built from a result: how many rows and the first, or its fields."""
    name = contract.name if contract is not None else str(tool)
    key = _listed_key(contract)
    if contract is None or key is None:
        return f"{name}: {_fields_text(data, contract.returns if contract else None)}."
    rows = rows_of(contract, data)
    if not rows:
        return f"{name}: no {key}."
    item = contract.returns[key].item
    first = _fields_text(rows[0], item if isinstance(item, dict) else None)
    return f"{name}: {len(rows)} {key}; the first: {first}."


def _fix_text(fix: Fix, secret: bool) -> str:
    if fix["action"] == "drop":
        return f"{fix['field']} dropped"
    was, now = ((REDACTED, REDACTED) if secret
                else (_quoted(fix["was"]), _quoted(fix["now"])))
    return f"{fix['field']} {was} -> {now}"


def _fixes_text(gate: Gate, tool: object, fixes: Sequence[Fix]) -> str:
    """What the repairs changed, so an answer never hides that it is not what was asked."""
    if not fixes:
        return ""
    contract = _contract(gate, tool)
    specs: Mapping[str, Spec] = contract.args if contract is not None else {}
    changed = [_fix_text(fix, fix["field"] in specs and specs[fix["field"]].sensitive)
               for fix in fixes]
    return " Repaired: " + "; ".join(changed) + "."


def _answered(state: Mapping[str, Any]) -> list[tuple[Any, dict[str, Any]]]:
    """Each call the reply covers, with the gate's answer: the model's turn, or the one call."""
    turn = state.get("turn")
    if turn is not None:
        return [(entry["tool"], entry["answer"]) for entry in turn if entry["answer"]]
    answer = state.get("tool_reply")
    return [(state.get("tool"), answer)] if answer else []


def result_reply(gate: Gate) -> Node:
    """A ``reply`` that builds the answer from the results, as the return contract reads them.

    Each successful call gives ``<tool>: <n> <list>; the first: <k>=<v>, ...``
    (the first row's declared fields) or, for a result with no declared list,
    ``<tool>: <k>=<v>, ...``. Values are the gate's answer to a model, so
    sensitive ones are already redacted; repairs are listed after.
    """
    # ``Any``, not ``State``: LangGraph hands a node only the keys its annotation names,
    # and in the model graph the answers are in ``turn``.
    def reply(state: Any) -> Update:
        """Answer from what the tools returned, and say what a repair changed."""
        parts = [_summary(_contract(gate, tool), tool, answer.get("data"))
                 for tool, answer in _answered(state) if answer.get("ok")]
        fixes = _fixes_text(gate, state.get("tool"), state.get("fixes") or [])
        return {"ok": True, "answer": " ".join(parts) + fixes}

    return reply


def giveup(state: State) -> Update:
    """End without an answer: ``ok`` false, the last reason in ``answer``, no rows."""
    errors = state.get("errors") or []
    reason = errors[-1] if errors else "no reason recorded"
    return {"ok": False, "answer": f"No answer: {reason}.", "rows": []}


# --- repair by rule --------------------------------------------------------------------------


def _same(left: object, right: object) -> bool:
    # Typed: a model that sent True for 1 made a different call.
    try:
        return type(left) is type(right) and bool(left == right)
    except Exception:  # values that cannot be compared are taken as the same: no retry on doubt
        return True


def _call_key(call: Call) -> Hashable | None:
    tool = call["tool"]
    return cache_key(tool, call["args"]) if isinstance(tool, str) else None


def _was_tried(call: Call, calls: Sequence[Call]) -> bool:
    key = _call_key(call)
    if key is not None:
        return any(_call_key(old) == key for old in calls)
    return any(_same(old["tool"], call["tool"]) and _same(old["args"], call["args"])
               for old in calls)


def _changes(reason: str, before: Call, after: Call) -> list[Fix]:
    """What turned ``before`` into ``after``, field by field."""
    fixes: list[Fix] = []
    if not _same(before["tool"], after["tool"]):
        fixes.append(Fix(reason=reason, field="tool", action="set", was=before["tool"],
                         now=after["tool"]))
    old = before["args"] if isinstance(before["args"], dict) else {}
    new = after["args"] if isinstance(after["args"], dict) else {}
    for key, value in new.items():
        if key not in old or not _same(old[key], value):
            fixes.append(Fix(reason=reason, field=str(key), action="set", was=old.get(key),
                             now=value))
    fixes.extend(Fix(reason=reason, field=str(key), action="drop", was=value, now=None)
                 for key, value in old.items() if key not in new)
    return fixes


def _accept(reason: str, tried: Sequence[Call], fixed: Call) -> Update:
    """The update that sends ``fixed`` back to ``fetch``, or the reason it must not go."""
    if _was_tried(fixed, tried):
        return {"errors": [REPAIR_REPEAT]}
    return {"tool": fixed["tool"], "args": fixed["args"],
            "fixes": _changes(reason, tried[-1], fixed)}


def _proposed(gate: Gate, repairs: Mapping[str, RepairRule],
              state: Mapping[str, Any]) -> Call | None:
    """The call the repairs make of the last one for the last reason, or ``None``."""
    errors, tried = state.get("errors") or [], state.get("calls") or []
    rule = rule_for(repairs, errors[-1]) if errors and tried else None
    if rule is None:
        return None
    last = tried[-1]
    return rule(last, parse_reason(errors[-1]), _contract(gate, last["tool"]))


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


def _wait(details: Iterable[Mapping[str, Any]], retries: int) -> float:
    """The upstreams' longest ``retry_after``, else the doubled backoff; at most the cap."""
    asked = [item.get("retry_after_ms") for item in details]
    waits = [ms / 1000 for ms in asked if type(ms) is int and ms >= 0]
    return min(max(waits) if waits else RETRY_BACKOFF * 2 ** retries, MAX_RETRY_WAIT)


def retry(state: State) -> Update:
    """Wait, then send the same call back to ``fetch``: same args, same idempotency key.

    Entered only for a retryable reason. The wait doubles from ``RETRY_BACKOFF``
    with each retry, or is the upstream's ``retry_after``, never more than
    ``MAX_RETRY_WAIT``.
    """
    details = (state.get("tool_reply") or {}).get("error", {}).get("details", {})
    time.sleep(_wait([details], state.get("retries", 0)))
    return {"retries": 1}


# --- routing ---------------------------------------------------------------------------------


def _last_error(state: Mapping[str, Any]) -> str:
    errors = state.get("errors") or []
    return errors[-1] if errors else ""


def _stopped(state: Mapping[str, Any]) -> bool:
    return parse_reason(_last_error(state)).stage in AGENT_STAGES


def _after_pick(state: State) -> str:
    return "giveup" if _stopped(state) else "fetch"


def _after_one_fetch(state: State) -> str:
    return "reply" if state.get("ok") else "giveup"


def _after_fetch(repairable: Callable[[State], bool]) -> Callable[[State], str]:
    def route(state: State) -> str:
        if state.get("ok"):
            return "reply"
        # ``<`` so that the fetch after this repair or retry is at most attempt MAX_ATTEMPTS.
        if state.get("attempts", 0) >= MAX_ATTEMPTS:
            return "giveup"
        if is_retryable(_last_error(state)):
            return "retry"
        return "repair" if repairable(state) else "giveup"

    return route


def _after_repair(state: State) -> str:
    return "giveup" if _stopped(state) else "fetch"


# --- graphs ----------------------------------------------------------------------------------


def _skeleton(schema: type[S], pick_node: NodeOf[S], fetch_node: NodeOf[S],
              reply_node: Node) -> StateGraph[S]:
    graph: StateGraph[S] = StateGraph(schema)
    graph.add_node("pick", _keyed(pick_node))
    graph.add_node("fetch", fetch_node)
    graph.add_node("reply", reply_node)
    graph.add_node("giveup", giveup)
    graph.add_edge(START, "pick")
    graph.add_conditional_edges("pick", _after_pick, ["fetch", "giveup"])
    graph.add_edge("reply", END)
    graph.add_edge("giveup", END)
    return graph


def build_naive(*, gate: Gate, pick: Node | None = None, reply: Node | None = None,
                name: str = "agtool_naive") -> AgentGraph:
    """The one-call graph over ``gate``: ``pick``, one ``fetch``, then ``reply`` or ``giveup``.

    ``pick`` and ``reply`` default to ``order_pick(gate=gate)`` and ``result_reply(gate)``.
    """
    graph = _skeleton(State, pick or order_pick(gate=gate), make_fetch(gate),
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

    With ``model`` (a chat model supporting ``bind_tools``), the model is bound
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
        rules = _skeleton(State, pick or order_pick(gate=gate), make_fetch(gate),
                          reply or result_reply(gate))
        repairable = (_has_fix(gate, fixes) if can_repair is None
                      else lambda state: can_repair(_last_error(state)))
        return _with_repair(rules, make_repair(gate, fixes), retry,
                            _after_fetch(repairable), name or "agtool_agent")
    if pick is not None or repairs is not None or fallbacks or can_repair is not None:
        raise ValueError("with a model, the model picks and repairs: pick, repairs, fallbacks "
                         "and can_repair are for the rule graph")
    bound = model.bind_tools(tool_specs(gate))
    asks = _skeleton(ModelState, _model_pick(bound, gate), _turn_fetch(gate),
                     reply or result_reply(gate))
    return _with_repair(asks, _model_repair(bound), _turn_retry, _after_turn,
                        name or "agtool_model_agent")


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


def _with_repair(graph: StateGraph[S], repair_node: NodeOf[S], retry_node: NodeOf[S],
                 route: Callable[[S], str], name: str) -> AgentGraph:
    graph.add_node("repair", repair_node)
    graph.add_node("retry", retry_node)
    graph.add_conditional_edges("fetch", route, ["reply", "repair", "retry", "giveup"])
    graph.add_conditional_edges("repair", _after_repair, ["fetch", "giveup"])
    graph.add_edge("retry", "fetch")
    return graph.compile(name=name)


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


# --- tool specs for bind_tools ---------------------------------------------------------------

def tool_specs(source: Gate | Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-format tool specs for ``bind_tools``, exported from a gate's table or a table.

    They are ``agtool.tool_spec(table, name, "openai")``: the schema states what
    the gate enforces. A table is validated (``ContractError`` if malformed); a
    gate gives the tools it can call now.
    """
    if isinstance(source, Gate):
        names = [name for name in source.table if source.contract(name) is not None]
        return [export_spec(source.table, name, "openai") for name in names]
    return [export_spec(source, name, "openai") for name in check_table(source)]


# --- pick and repair by model ----------------------------------------------------------------

ToolModel = Runnable[LanguageModelInput, AIMessage]


def _instructions(gate: Gate) -> str:
    """The system prompt, from the table: what each tool is for, and how failures come back."""
    tools = [f"- {name}: {contract.description or 'no description'}"
             for name in list(gate.table) if (contract := gate.contract(name)) is not None]
    return "\n".join([
        "Carry out the order by calling these tools; make several calls at once when the "
        "order needs them.", *tools,
        "A call that fails is answered with an error code and details; call again with what "
        "they say fixed."])


def _order_text(fields: Mapping[Any, Any]) -> str:
    try:
        return "Order: " + json.dumps(fields, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):  # non-str keys or a cycle: the model still reads a repr
        return "Order: " + repr(fields)


def _ask(model: ToolModel, history: Sequence[BaseMessage], new: list[BaseMessage]) -> Update:
    """Ask the model; its tool calls become the turn, anything else a reason."""
    try:
        answer = model.invoke([*history, *new])
    except Exception as exc:  # the model's failure ends the run as a reason, never a crash
        _log.debug("model raised %s", type(exc).__name__, exc_info=True)
        return {"messages": new, "errors": [f"{MODEL_RAISED}:{type(exc).__name__}"]}
    if not isinstance(answer, AIMessage) or not answer.tool_calls:
        kept = [*new, answer] if isinstance(answer, BaseMessage) else new
        return {"messages": kept, "errors": [MODEL_NO_TOOL_CALL]}
    # A call without an id still needs a step id of its own within the turn.
    turn = [TurnCall(id=call.get("id") or f"{STEP_ID}-{index}", tool=call["name"],
                     args=call["args"], answer=None)
            for index, call in enumerate(answer.tool_calls)]
    return {"messages": [*new, answer], "turn": turn, "tool": turn[0]["tool"],
            "args": turn[0]["args"]}


def _model_pick(model: ToolModel, gate: Gate) -> ModelNode:
    def pick(state: ModelState) -> Update:
        """Ask the model which tools to call with which args; the gate checks its choice."""
        fields = _order_fields(state.get("order"))
        if fields is None:
            return {"errors": [ORDER_NOT_OBJECT]}
        return _ask(model, [], [SystemMessage(_instructions(gate)),
                                HumanMessage(_order_text(fields))])

    return pick


def _model_can_repair(reason: str) -> bool:
    # The model wrote the arguments, so any argument reason is its to fix; of
    # the result reasons only too_big is (by choosing another tool).
    stage, check, _ = parse_reason(reason)
    return (stage == "args" and check != BAD_CONTRACT) or (stage == "result" and check == TOO_BIG)


def _hints(reason: str, gate: Gate, tool: object) -> dict[str, Any]:
    """The names the model needs to fix ``reason``: the tools, or the tool's arguments."""
    stage, check, _ = parse_reason(reason)
    if (stage, check) in (("args", UNKNOWN_TOOL), ("result", TOO_BIG)):
        return {"tools": list(gate.table)}
    contract = _contract(gate, tool)
    if stage != "args" or contract is None:
        return {}
    if check in ("missing", "unexpected"):
        return {"arguments": list(contract.args)}
    return {}  # the allowed values and bounds are in ``details.fields``


def _tool_message(gate: Gate, entry: TurnCall, answer: dict[str, Any]) -> ToolMessage:
    """The answer to one tool call: its result, or its structured error with the names it needs.

    The error is the gate's (code, retryable, message, details); ``details``
    gains the tool or argument names when the reason asks for them.
    """
    if answer["ok"]:
        content = json.dumps(answer, ensure_ascii=False, default=repr)
        return ToolMessage(content, tool_call_id=entry["id"], name=str(entry["tool"]))
    reason = _reason(answer)
    error = dict(answer["error"])
    error["details"] = {**error["details"], **_hints(reason, gate, entry["tool"])}
    content = json.dumps({**answer, "error": error}, ensure_ascii=False, default=repr)
    return ToolMessage(content, tool_call_id=entry["id"], name=str(entry["tool"]),
                       status="error")


def _turn_fetch(gate: Gate) -> ModelNode:
    def fetch(state: ModelState) -> Update:
        """Gate every call of the turn not answered yet; answer each with its ToolMessage.

        A call failing with a retryable reason, with rounds left, is answered
        after its retry instead, so a tool call is answered once.
        """
        last_round = state.get("attempts", 0) + 1 >= MAX_ATTEMPTS
        turn = [TurnCall(**entry) for entry in state.get("turn") or []]
        calls: list[Call] = []
        errors: list[str] = []
        messages: list[BaseMessage] = []
        for entry in turn:
            if entry["answer"] is not None:
                continue
            answer = _gated(gate, state, entry["tool"], entry["args"], entry["id"])
            entry["answer"] = answer
            calls.append({"tool": entry["tool"], "args": entry["args"]})
            if not answer["ok"]:
                errors.append(_reason(answer))
                if is_retryable(errors[-1]) and not last_round:
                    continue
            messages.append(_tool_message(gate, entry, answer))
        answered = [(entry, entry["answer"]) for entry in turn if entry["answer"] is not None]
        last = next((pair for pair in reversed(answered) if not pair[1]["ok"]), answered[-1])
        ok = all(answer["ok"] for _, answer in answered)
        rows = [row for entry, answer in answered if answer["ok"]
                for row in rows_of(_contract(gate, entry["tool"]), answer["data"])]
        return {"turn": turn, "calls": calls, "errors": errors, "messages": messages,
                "attempts": 1, "ok": ok, "rows": rows if ok else [], "tool_reply": last[1],
                "tool": last[0]["tool"], "args": last[0]["args"]}

    return fetch


def _failed(state: ModelState) -> list[TurnCall]:
    return [entry for entry in state.get("turn") or []
            if entry["answer"] is not None and not entry["answer"]["ok"]]


def _after_turn(state: ModelState) -> str:
    failed = [_reason(entry["answer"]) for entry in _failed(state) if entry["answer"]]
    if not failed:
        return "reply"
    if state.get("attempts", 0) >= MAX_ATTEMPTS:
        return "giveup"
    if not all(is_retryable(reason) or _model_can_repair(reason) for reason in failed):
        return "giveup"  # one call can never succeed, so neither can the run
    return "retry" if any(map(is_retryable, failed)) else "repair"


def _turn_retry(state: ModelState) -> Update:
    """Wait, then send the turn's retryable failures back to ``fetch`` unchanged, same ids."""
    again = {entry["id"] for entry in _failed(state) if entry["answer"]
             and is_retryable(_reason(entry["answer"]))}
    details = [entry["answer"]["error"]["details"] for entry in _failed(state)
               if entry["id"] in again and entry["answer"]]
    time.sleep(_wait(details, state.get("retries", 0)))
    turn = [TurnCall(**{**entry, "answer": None}) if entry["id"] in again else entry
            for entry in state.get("turn") or []]
    return {"retries": 1, "turn": turn}


def _as_call(entry: TurnCall) -> Call:
    return {"tool": entry["tool"], "args": entry["args"]}


def _model_repair(model: ToolModel) -> ModelNode:
    def repair(state: ModelState) -> Update:
        """Ask the model again, its failed calls answered with their errors; take its new calls.

        The calls that succeeded stay in the turn. A new call the run already
        saw fail ends it with ``repair:repeat``; each new call is recorded in
        ``fixes`` against the failed call in the same place.
        """
        failed = _failed(state)
        history = state.get("messages") or []
        if not failed:
            return {"errors": [REPAIR_NONE]}
        update = _ask(model, history, [])
        if "errors" in update:
            return update
        new: list[TurnCall] = update.pop("turn")
        refused = [*(state.get("refused") or []), *map(_as_call, failed)]
        if any(_was_tried(_as_call(entry), refused) for entry in new):
            return {"messages": update["messages"], "errors": [REPAIR_REPEAT]}
        fixes = [fix for old, fixed in zip(failed, new, strict=False) if old["answer"]
                 for fix in _changes(_reason(old["answer"]), _as_call(old), _as_call(fixed))]
        kept = [entry for entry in state.get("turn") or [] if entry not in failed]
        return {**update, "turn": kept + new, "fixes": fixes,
                "refused": [_as_call(entry) for entry in failed]}

    return repair
