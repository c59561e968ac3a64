"""What the rule graph and the model graph are both built from: state, shared nodes, skeleton.

``State`` and ``ModelState`` (the rule graph's and the model graph's state),
the attempt and retry limits, the gate call with the caller's authority
(``gated``), the rows of a result (``rows_of``), the answer built from the
results (``result_reply``) and ``giveup``, how a repaired call compares with
the calls already made (``was_tried``, ``changes``), the retry wait, and the
skeleton every graph has (``skeleton``, then ``with_repair`` for the repairing
ones). ``agtool.graph._build`` builds the rule graph on it and ``agtool.graph._model``
the model graph; this module imports neither.
"""

from __future__ import annotations

import json
import operator
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Annotated, Any, Protocol, TypedDict, TypeVar

from langchain_core.messages import AnyMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph

from .._authority import Approval
from .._contract import Spec, ToolContract
from .._gate import Gate
from .._memo import cache_key
from .._reasons import AGENT_STAGES, parse_reason
from .._records import REDACTED
from ._repairs import Call, Fix

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_RETRY_WAIT",
    "RETRY_BACKOFF",
    "STEP_ID",
    "AgentGraph",
    "ModelNode",
    "ModelState",
    "Node",
    "NodeOf",
    "State",
    "TurnCall",
    "Update",
    "changes",
    "contract_of",
    "fresh_run_id",
    "gated",
    "giveup",
    "last_error",
    "order_fields",
    "reason_of",
    "result_reply",
    "retry_wait",
    "rows_of",
    "skeleton",
    "was_tried",
    "with_repair",
]


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


def order_fields(order: object) -> dict[Any, Any] | None:
    """The order as a fresh dict, or ``None`` when it is not a mapping that can be read."""
    if not isinstance(order, Mapping):
        return None
    try:
        return dict(order.items())
    except Exception:  # a mapping whose items() raises cannot be an order
        return None


def fresh_run_id(state: Mapping[str, Any]) -> Update:
    """A fresh run id when the caller gave none, so that the run's writes are keyed."""
    return {} if state.get("run_id") else {"run_id": uuid.uuid4().hex}


def _keyed(node: NodeOf[S]) -> NodeOf[S]:
    """``node`` that also gives the run its fresh run id, whatever pick the caller wrote."""
    def pick(state: S) -> Update:
        update = node(state)
        return update if "run_id" in update else {**update, **fresh_run_id(state)}

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


def contract_of(gate: Gate, tool: object) -> ToolContract | None:
    return gate.contract(tool) if isinstance(tool, str) else None


def _echo_values(gate: Gate, tool: object, order: object) -> dict[str, object] | None:
    """The order's values for the tool's echo arguments: what the picker had to copy."""
    contract = contract_of(gate, tool)
    fields = order_fields(order)
    if contract is None or fields is None:
        return None
    return {name: fields[name] for name, spec in contract.args.items()
            if spec.echo and name in fields}


def gated(gate: Gate, state: Mapping[str, Any], tool: object, args: object,
          step_id: str) -> dict[str, Any]:
    """The gate's answer to one call, with the caller's authority from the state."""
    return gate.call_for_model(
        tool, args, _echo_values(gate, tool, state.get("order")), scope=state.get("scope"),
        run_id=state.get("run_id"), step_id=step_id, approvals=state.get("approvals") or ())


def reason_of(answer: Mapping[str, Any]) -> str:
    reason: str = answer["error"]["details"]["reason"]
    return reason


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
    contract = contract_of(gate, tool)
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
        parts = [_summary(contract_of(gate, tool), tool, answer.get("data"))
                 for tool, answer in _answered(state) if answer.get("ok")]
        fixes = _fixes_text(gate, state.get("tool"), state.get("fixes") or [])
        return {"ok": True, "answer": " ".join(parts) + fixes}

    return reply


def giveup(state: State) -> Update:
    """End without an answer: ``ok`` false, the last reason in ``answer``, no rows."""
    errors = state.get("errors") or []
    reason = errors[-1] if errors else "no reason recorded"
    return {"ok": False, "answer": f"No answer: {reason}.", "rows": []}


# --- comparing calls -------------------------------------------------------------------------


def _same(left: object, right: object) -> bool:
    # Typed: a model that sent True for 1 made a different call.
    try:
        return type(left) is type(right) and bool(left == right)
    except Exception:  # values that cannot be compared are taken as the same: no retry on doubt
        return True


def _call_key(call: Call) -> Hashable | None:
    tool = call["tool"]
    return cache_key(tool, call["args"]) if isinstance(tool, str) else None


def was_tried(call: Call, calls: Sequence[Call]) -> bool:
    key = _call_key(call)
    if key is not None:
        return any(_call_key(old) == key for old in calls)
    return any(_same(old["tool"], call["tool"]) and _same(old["args"], call["args"])
               for old in calls)


def changes(reason: str, before: Call, after: Call) -> list[Fix]:
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


# --- retry -----------------------------------------------------------------------------------


def retry_wait(details: Iterable[Mapping[str, Any]], retries: int) -> float:
    """The upstreams' longest ``retry_after``, else the doubled backoff; at most the cap."""
    asked = [item.get("retry_after_ms") for item in details]
    waits = [ms / 1000 for ms in asked if type(ms) is int and ms >= 0]
    return min(max(waits) if waits else RETRY_BACKOFF * 2 ** retries, MAX_RETRY_WAIT)


# --- routing and skeleton --------------------------------------------------------------------


def last_error(state: Mapping[str, Any]) -> str:
    errors = state.get("errors") or []
    return errors[-1] if errors else ""


def _stopped(state: Mapping[str, Any]) -> bool:
    return parse_reason(last_error(state)).stage in AGENT_STAGES


def _after_pick(state: State) -> str:
    return "giveup" if _stopped(state) else "fetch"


def _after_repair(state: State) -> str:
    return "giveup" if _stopped(state) else "fetch"


def skeleton(schema: type[S], pick_node: NodeOf[S], fetch_node: NodeOf[S],
             reply_node: Node) -> StateGraph[S]:
    """The nodes and edges both graphs share: ``pick`` to ``fetch`` or ``giveup``, then ``END``."""
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


def with_repair(graph: StateGraph[S], repair_node: NodeOf[S], retry_node: NodeOf[S],
                route: Callable[[S], str], name: str) -> AgentGraph:
    """``graph`` with ``repair`` and ``retry`` after ``fetch``, as ``route`` decides, compiled."""
    graph.add_node("repair", repair_node)
    graph.add_node("retry", retry_node)
    graph.add_conditional_edges("fetch", route, ["reply", "repair", "retry", "giveup"])
    graph.add_conditional_edges("repair", _after_repair, ["fetch", "giveup"])
    graph.add_edge("retry", "fetch")
    return graph.compile(name=name)
