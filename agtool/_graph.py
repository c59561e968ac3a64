"""The agent graphs: a failed tool call is a path through the graph, not an exception.

Both graphs are LangGraph ``StateGraph`` s over one gate (the reference
``agtool.tools.GATE`` unless another is given), so they can be invoked,
streamed, embedded as subgraphs and drawn with ``get_graph().draw_mermaid()``::

    build_naive():  START -> pick -> fetch -> reply -> END
                               |        |
                               +--------+-> giveup -> END

    build_graph():  START -> pick -> fetch -> reply -> END
                               |      |  ^
                               |      v  |
                               |  repair | retry    (a repairable | retryable reason,
                               |      |              attempts left)
                               +------+-> giveup -> END

``pick`` chooses the tool and arguments: by rule by default, or by asking a
chat model (``build_graph(model)``). Whatever it chooses goes through the same
gate. Every failure appends a reason to ``errors``: the gate's reasons
(``args:…``, ``result:…``, ``raised:…``) or the agent's own, built here:

- ``order:not_object``: the order is not a dict, so there is nothing to pick from.
- ``model:no_tool_call``, ``model:raised:<ExceptionClassName>``: the model did not choose.
- ``repair:none``: no rule fixes the last reason for this call.
- ``repair:repeat``: the fixed call was already made in this run.

An agent reason always ends the run; ``repair`` and ``retry`` run at most
``MAX_ATTEMPTS - 1`` times between them, so ``attempts <= MAX_ATTEMPTS``
whatever the order. ``retry`` repeats the same call, with the same idempotency
key, only when the gate's reason is retryable (``is_retryable``: a timeout, a
rate limit, an upstream 5xx); an argument error is repaired or ends the run,
never repeated as it was.

The caller's authority comes in with the order, never from the model: invoke
with ``{"order": …, "scope": [...], "approvals": [...], "run_id": "…"}``; a
run without ``run_id`` gets a fresh one, which keys its writes.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import operator
import time
import uuid
from collections.abc import Callable, Hashable, Mapping, Sequence
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
from ._contract import ToolContract, check_table
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
    Reason,
    named,
    parse_reason,
)

__all__ = [
    "AGENT_STAGES",
    "DEFAULT_TOOL",
    "FALLBACK_REGION",
    "MAX_ATTEMPTS",
    "MAX_RETRY_WAIT",
    "MODEL_NO_TOOL_CALL",
    "MODEL_RAISED",
    "ORDER_NOT_OBJECT",
    "REPAIRS",
    "REPAIR_NONE",
    "REPAIR_REPEAT",
    "RETRY_BACKOFF",
    "STEP_ID",
    "SUCCESSORS",
    "Call",
    "Fix",
    "ModelState",
    "NaiveOutcome",
    "Outcome",
    "State",
    "build_graph",
    "build_naive",
    "can_repair",
    "fetch",
    "giveup",
    "handle",
    "pick",
    "repair",
    "reply",
    "retry",
    "run_naive",
    "tool_specs",
]

_log = logging.getLogger("agtool")

#: Gate calls per run, the first included: ``repair`` is never entered once this many were made.
MAX_ATTEMPTS = 3
#: The region searched instead of one the contract does not allow; one of ``tools.REGIONS``.
FALLBACK_REGION = "seoul"
#: The tool ``pick`` chooses when the order names none (or names ``None``).
DEFAULT_TOOL = "stock_lookup"
#: Tool -> the tool that replaces it when its result is ``too_big``.
SUCCESSORS: dict[str, str] = {"legacy_stock": "stock_lookup"}
#: Seconds ``retry`` waits before its first repeat, doubled for each one after.
RETRY_BACKOFF = 0.05
#: The longest ``retry`` waits, whatever an upstream's ``retry_after`` asks.
MAX_RETRY_WAIT = 2.0
#: The step id of the graph's one tool call: with the run id and the business key it makes
#: the idempotency key, the same for every retry of the call.
STEP_ID = "call"



class Call(TypedDict):
    """One call handed to the gate, exactly as it was handed."""

    tool: Any
    args: Any


class Fix(TypedDict):
    """One change a repair made to the call, and the reason that asked for it."""

    reason: str
    field: str  #: ``"tool"`` or an argument name
    action: str  #: ``"set"`` or ``"drop"``
    was: Any  #: ``None`` when the argument was absent
    now: Any  #: ``None`` when the argument was dropped


class State(TypedDict, total=False):
    """The graph state; invoke a graph with ``{"order": order}``.

    ``errors``, ``calls`` and ``fixes`` only grow and ``attempts`` only adds up,
    so a node can never lose what an earlier one recorded.
    """

    order: Any  #: the caller's order, as given (never changed)
    tool: Any  #: the tool of the next (or last) call
    args: Any  #: the args of the next (or last) call
    rows: list[Any]  #: the rows of the last call, ``[]`` unless it succeeded
    answer: str
    ok: bool
    errors: Annotated[list[str], operator.add]  #: every reason met, in order
    calls: Annotated[list[Call], operator.add]  #: every call handed to the gate
    attempts: Annotated[int, operator.add]  #: gate calls made
    fixes: Annotated[list[Fix], operator.add]  #: what each repair changed
    retries: Annotated[int, operator.add]  #: calls repeated unchanged on a retryable reason
    scope: list[str]  #: the risk levels the caller may use (default: the gate's)
    approvals: list[Approval]  #: the caller's approvals of exact calls
    run_id: str  #: keys the run's writes; a fresh one when not given
    tool_reply: dict[str, Any]  #: the gate's last answer, in the form handed to a model


class ModelState(State, total=False):
    """``State`` plus the conversation with the model that picks."""

    messages: Annotated[list[AnyMessage], add_messages]


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
    tool_runs: int  #: tool bodies run during the call, read from ``tools.CALLS``


Update = dict[str, Any]
#: Either state schema: the rule graph's or the model graph's.
S = TypeVar("S", State, ModelState)
S_contra = TypeVar("S_contra", State, ModelState, contravariant=True)


class NodeOf(Protocol[S_contra]):
    """A graph node; a protocol, not a ``Callable``, so LangGraph's types see ``state``."""

    def __call__(self, state: S_contra) -> Update: ...


Node = NodeOf[State]
ModelNode = NodeOf[ModelState]
#: ``(failed call, its reason, the tool's contract) -> fixed call``, or ``None`` for no fix.
RepairRule = Callable[[Call, Reason, ToolContract | None], Call | None]
AgentGraph = CompiledStateGraph[Any, None, Any, Any]


def _reference_gate() -> Gate:
    # Late: tools imports this module at its end, once GATE exists.
    from . import tools

    return tools.GATE


def _gate_or_reference(gate: Gate | None) -> Gate:
    return _reference_gate() if gate is None else gate


# --- pick ------------------------------------------------------------------------------------


def _order_fields(order: object) -> dict[Any, Any] | None:
    """The order as a fresh dict, or ``None`` when it is not a mapping that can be read."""
    if not isinstance(order, Mapping):
        return None
    try:
        return dict(order.items())
    except Exception:  # a mapping whose items() raises cannot be an order
        return None


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
    return {"tool": DEFAULT_TOOL if tool is None else tool, "args": fields, **_run_id(state)}


def _run_id(state: State) -> Update:
    """A fresh run id when the caller gave none, so that the run's writes are keyed."""
    return {} if state.get("run_id") else {"run_id": uuid.uuid4().hex}


# --- fetch -----------------------------------------------------------------------------------


def _rows_of(value: object) -> list[Any]:
    rows = value.get("rows") if isinstance(value, dict) else None
    return rows if isinstance(rows, list) else []


def _echo_values(gate: Gate, tool: object, order: object) -> dict[str, object] | None:
    """The order's values for the tool's echo arguments: what the picker had to copy."""
    contract = gate.contract(tool) if isinstance(tool, str) else None
    fields = _order_fields(order)
    if contract is None or fields is None:
        return None
    return {name: fields[name] for name, spec in contract.args.items()
            if spec.echo and name in fields}


def _make_fetch(gate: Gate | None) -> Node:
    def fetch(state: State) -> Update:
        """Call the gate once with the chosen tool and args; never raises.

        Appends the call to ``calls``, any reason to ``errors``, adds 1 to
        ``attempts``, and keeps the gate's answer in ``tool_reply`` (with
        sensitive values redacted). The order's values of echo arguments are
        what the chosen args must repeat; the state's scope, approvals and run
        id are the caller's authority and the idempotency key's run.
        """
        call: Call = {"tool": state.get("tool"), "args": state.get("args")}
        current = _gate_or_reference(gate)
        echo = _echo_values(current, call["tool"], state.get("order"))
        answer = current.call_for_model(
            call["tool"], call["args"], echo, scope=state.get("scope"),
            run_id=state.get("run_id"), step_id=STEP_ID, approvals=state.get("approvals") or ())
        update: Update = {"calls": [call], "attempts": 1, "ok": answer["ok"],
                          "tool_reply": answer}
        if answer["ok"]:
            update["rows"] = _rows_of(answer["data"])
        else:
            update["rows"] = []
            update["errors"] = [answer["error"]["details"]["reason"]]
        return update

    return fetch


fetch = _make_fetch(None)


# --- reply and giveup ------------------------------------------------------------------------


def _arg(args: object, name: str) -> object:
    return args.get(name) if isinstance(args, dict) else None


def _first_stock(rows: Sequence[Any]) -> tuple[str, int] | None:
    """The first row's store and count, or ``None`` when it does not show both."""
    first = rows[0] if rows else None
    if not isinstance(first, dict):
        return None
    store, count = first.get("store"), first.get("count")
    if not isinstance(store, str) or type(count) is not int:
        return None
    return store, count


def _stock_sentence(sku: object, region: object, rows: Sequence[Any]) -> str:
    stock = _first_stock(rows)
    if stock is None:
        return f"{sku}: no stock shown in {region}."
    store, count = stock
    if count > 0:
        return f"{sku}: {count} in stock at {store} ({region})."
    # A row with count 0 names a store, not stock: say so rather than imply any.
    return f"{sku}: none in stock at {store} ({region})."


def reply(state: State) -> Update:
    """Answer from the first row of ``rows``; claims stock only where that row shows a count > 0.

    When a repair searched another region than the order asked for, the
    answer says so.
    """
    args = state.get("args")
    sku, region = _arg(args, "sku"), _arg(args, "region")
    answer = _stock_sentence(sku, region, state.get("rows") or [])
    asked = _arg(state.get("order"), "region")
    if asked is not None and not _same(region, asked):
        answer += f" Searched {region} instead of {asked!r}."
    return {"ok": True, "answer": answer}


def giveup(state: State) -> Update:
    """End without an answer: ``ok`` false, the last reason in ``answer``, no rows."""
    errors = state.get("errors") or []
    reason = errors[-1] if errors else "no reason recorded"
    return {"ok": False, "answer": f"No answer: {reason}.", "rows": []}


# --- repair by rule --------------------------------------------------------------------------


def _with_args(call: Call, args: dict[Any, Any]) -> Call:
    return {"tool": call["tool"], "args": args}


def _set_arg(call: Call, arg: str, value: object) -> Call | None:
    if not isinstance(call["args"], dict):
        return None
    return _with_args(call, {**call["args"], arg: value})


def _bound(contract: ToolContract | None, arg: str, which: str) -> float | None:
    """The contract's ``min`` or ``max`` for ``arg``, as an int when the argument is one."""
    spec = contract.args.get(arg) if contract is not None else None
    bound: float | None = getattr(spec, which, None)
    if bound is None or spec is None or spec.type != "int":
        return bound
    return math.ceil(bound) if which == "min" else math.floor(bound)


def _use_fallback_region(call: Call, reason: Reason, contract: ToolContract | None) -> Call | None:
    return _set_arg(call, reason.arg, FALLBACK_REGION)


def _use_lowest(call: Call, reason: Reason, contract: ToolContract | None) -> Call | None:
    bound = _bound(contract, reason.arg, "min")
    return None if bound is None else _set_arg(call, reason.arg, bound)


def _use_highest(call: Call, reason: Reason, contract: ToolContract | None) -> Call | None:
    # The largest valid value: ``limit`` is an upper bound, so this loses no row
    # the caller could have wanted, and a mistyped value is not guessed at.
    bound = _bound(contract, reason.arg, "max")
    return None if bound is None else _set_arg(call, reason.arg, bound)


def _drop_arg(call: Call, reason: Reason, contract: ToolContract | None) -> Call | None:
    args = call["args"]
    if not isinstance(args, dict):
        return None
    # The reason names the argument as ``shown`` echoes it (escaped, bounded).
    dropped = named(args, reason.arg)
    if dropped is None:
        return _with_args(call, dict(args))  # nothing by that name: the repeat check ends it
    return _with_args(call, {key: value for key, value in args.items() if key != dropped})


def _use_successor(call: Call, reason: Reason, contract: ToolContract | None) -> Call | None:
    tool = call["tool"]
    successor = SUCCESSORS.get(tool) if isinstance(tool, str) else None
    return None if successor is None else {"tool": successor, "args": call["args"]}


#: Reason -> rule. ``*`` as the argument matches any argument. What a rule
#: returns is checked by the gate again like any other call.
REPAIRS: dict[str, RepairRule] = {
    "args:allowed:region": _use_fallback_region,
    "result:too_big": _use_successor,
    "args:type:limit": _use_highest,
    "args:min:limit": _use_lowest,
    "args:max:limit": _use_highest,
    "args:missing:limit": _use_highest,
    "args:unexpected:*": _drop_arg,
}


def _rule_for(reason: str) -> RepairRule | None:
    stage, check, _ = parse_reason(reason)
    return REPAIRS.get(reason) or REPAIRS.get(f"{stage}:{check}:*")


def can_repair(reason: str) -> bool:
    """Whether ``REPAIRS`` has a rule for ``reason`` (empty results, raised bodies never do)."""
    return _rule_for(reason) is not None


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


def _make_repair(gate: Gate | None) -> Node:
    def repair(state: State) -> Update:
        """Fix the last call as ``REPAIRS`` says for the last reason, unless already tried.

        Records the change in ``fixes`` and sets the new tool and args; otherwise
        appends ``repair:none`` or ``repair:repeat``, which ends the run.
        """
        errors, tried = state.get("errors") or [], state.get("calls") or []
        rule = _rule_for(errors[-1]) if errors and tried else None
        if rule is None:
            return {"errors": [REPAIR_NONE]}
        last = tried[-1]
        tool = last["tool"]
        contract = _gate_or_reference(gate).contract(tool) if isinstance(tool, str) else None
        fixed = rule(last, parse_reason(errors[-1]), contract)
        return {"errors": [REPAIR_NONE]} if fixed is None else _accept(errors[-1], tried, fixed)

    return repair


repair = _make_repair(None)


# --- retry -----------------------------------------------------------------------------------


def retry(state: State) -> Update:
    """Wait, then send the same call back to ``fetch``: same args, same idempotency key.

    Entered only for a retryable reason. The wait doubles from ``RETRY_BACKOFF``
    with each retry, or is the upstream's ``retry_after``, never more than
    ``MAX_RETRY_WAIT``.
    """
    details = (state.get("tool_reply") or {}).get("error", {}).get("details", {})
    asked = details.get("retry_after_ms")
    wait = (asked / 1000 if type(asked) is int and asked >= 0
            else RETRY_BACKOFF * 2 ** state.get("retries", 0))
    time.sleep(min(wait, MAX_RETRY_WAIT))
    return {"retries": 1}


# --- routing ---------------------------------------------------------------------------------


def _last_error(state: State) -> str:
    errors = state.get("errors") or []
    return errors[-1] if errors else ""


def _stopped(state: State) -> bool:
    return parse_reason(_last_error(state)).stage in AGENT_STAGES


def _after_pick(state: State) -> str:
    return "giveup" if _stopped(state) else "fetch"


def _after_one_fetch(state: State) -> str:
    return "reply" if state.get("ok") else "giveup"


def _after_fetch(repairable: Callable[[str], bool]) -> Callable[[State], str]:
    def route(state: State) -> str:
        if state.get("ok"):
            return "reply"
        # ``<`` so that the fetch after this repair or retry is at most attempt MAX_ATTEMPTS.
        if state.get("attempts", 0) >= MAX_ATTEMPTS:
            return "giveup"
        if is_retryable(_last_error(state)):
            return "retry"
        return "repair" if repairable(_last_error(state)) else "giveup"

    return route


def _after_repair(state: State) -> str:
    return "giveup" if _stopped(state) else "fetch"


# --- graphs ----------------------------------------------------------------------------------


def _skeleton(schema: type[S], pick_node: NodeOf[S], gate: Gate | None) -> StateGraph[S]:
    graph: StateGraph[S] = StateGraph(schema)
    graph.add_node("pick", pick_node)
    graph.add_node("fetch", _make_fetch(gate))
    graph.add_node("reply", reply)
    graph.add_node("giveup", giveup)
    graph.add_edge(START, "pick")
    graph.add_conditional_edges("pick", _after_pick, ["fetch", "giveup"])
    graph.add_edge("reply", END)
    graph.add_edge("giveup", END)
    return graph


def build_naive(*, gate: Gate | None = None) -> AgentGraph:
    """The one-call graph: ``pick``, one ``fetch``, then ``reply`` or straight to ``giveup``.

    ``gate`` defaults to ``agtool.tools.GATE``, looked up when a call is made.
    """
    graph = _skeleton(State, pick, gate)
    graph.add_conditional_edges("fetch", _after_one_fetch, ["reply", "giveup"])
    return graph.compile(name="agtool_naive")


def build_graph(model: BaseChatModel | None = None, *, gate: Gate | None = None) -> AgentGraph:
    """The repairing graph: with attempts left, ``retry`` a retryable reason, ``repair`` a
    repairable one, then ``fetch`` again.

    Without ``model``, ``pick`` and ``repair`` are rules (``pick``, ``REPAIRS``)
    over ``State``. With ``model`` (a chat model supporting ``bind_tools``), the
    model is bound to ``tool_specs(gate)`` and both pick and repair ask it, over
    ``ModelState``: a failed call goes back to it as a ``ToolMessage`` with
    ``status="error"`` and the reason. Either way the gate checks every call,
    ``attempts <= MAX_ATTEMPTS``, a call already made is not made again, and
    ``result:empty`` ends the run at once. ``bind_tools`` raising (a model
    without tool calling) is a programming mistake and raises here.
    """
    if model is None:
        rules = _skeleton(State, pick, gate)
        return _with_repair(rules, _make_repair(gate), can_repair, "agtool_agent")
    bound = model.bind_tools(tool_specs(_gate_or_reference(gate)))
    asks = _skeleton(ModelState, _make_model_pick(bound), gate)
    return _with_repair(asks, _make_model_repair(bound, gate), _model_can_repair,
                        "agtool_model_agent")


def _with_repair(graph: StateGraph[S], repair_node: NodeOf[S],
                 repairable: Callable[[str], bool], name: str) -> AgentGraph:
    graph.add_node("repair", repair_node)
    graph.add_node("retry", retry)
    graph.add_conditional_edges("fetch", _after_fetch(repairable),
                                ["reply", "repair", "retry", "giveup"])
    graph.add_conditional_edges("repair", _after_repair, ["fetch", "giveup"])
    graph.add_edge("retry", "fetch")
    return graph.compile(name=name)


@functools.cache
def _reference_graph(naive: bool) -> AgentGraph:
    return build_naive() if naive else build_graph()


def _outcome(state: Mapping[str, Any]) -> NaiveOutcome:
    return {"ok": bool(state.get("ok")), "answer": state.get("answer", ""),
            "rows": state.get("rows", []), "errors": state.get("errors", []),
            "calls": state.get("calls", [])}


def run_naive(order: object) -> NaiveOutcome:
    """Run ``build_naive()`` on ``order`` against the reference tools; never raises."""
    return _outcome(_reference_graph(True).invoke({"order": order}))


def handle(order: object, model: BaseChatModel | None = None) -> Outcome:
    """Run ``build_graph(model)`` on ``order`` against the reference tools; never raises.

    (Only ``build_graph`` itself can raise, when ``model`` cannot bind tools.)
    ``tool_runs`` is ``agtool.tools.CALLS`` after minus before: the tool
    bodies this run ran (memo hits and refused calls run none). The model's
    conversation is in the state of ``build_graph(model).invoke(...)``.
    """
    from . import tools

    graph = _reference_graph(False) if model is None else build_graph(model)
    before = tools.CALLS
    state = graph.invoke({"order": order})
    return {**_outcome(state), "attempts": state.get("attempts", 0),
            "fixes": state.get("fixes", []), "tool_runs": tools.CALLS - before}


# --- tool specs for bind_tools ---------------------------------------------------------------

def tool_specs(
    source: Gate | Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """OpenAI-format tool specs for ``bind_tools``, exported from a gate's table or a table.

    They are ``agtool.tool_spec(table, name, "openai")``: the schema states what
    the gate enforces. A table is validated (``ContractError`` if malformed); a
    gate gives the tools it can call now. ``None`` means ``agtool.tools.GATE``.
    """
    if source is None or not isinstance(source, Mapping):
        gate = _gate_or_reference(source)
        names = [name for name in gate.table if gate.contract(name) is not None]
        return [export_spec(gate.table, name, "openai") for name in names]
    return [export_spec(source, name, "openai") for name in check_table(source)]


# --- pick and repair by model ----------------------------------------------------------------

_INSTRUCTIONS = (
    "You look up store stock for an order by calling exactly one of the tools. "
    "If a call fails, the tool answers with an error code; call again with what it says fixed."
)
_SKIPPED = json.dumps({"error": "skipped: one tool call per turn"})

ToolModel = Runnable[LanguageModelInput, AIMessage]


def _order_text(fields: Mapping[Any, Any]) -> str:
    try:
        return "Order: " + json.dumps(fields, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):  # non-str keys or a cycle: the model still reads a repr
        return "Order: " + repr(fields)


def _ask(model: ToolModel, history: Sequence[BaseMessage], new: list[BaseMessage]) -> Update:
    """Ask the model; its first tool call becomes the tool and args, anything else a reason."""
    try:
        answer = model.invoke([*history, *new])
    except Exception as exc:  # the model's failure ends the run as a reason, never a crash
        _log.debug("model raised %s", type(exc).__name__, exc_info=True)
        return {"messages": new, "errors": [f"{MODEL_RAISED}:{type(exc).__name__}"]}
    if not isinstance(answer, AIMessage) or not answer.tool_calls:
        kept = [*new, answer] if isinstance(answer, BaseMessage) else new
        return {"messages": kept, "errors": [MODEL_NO_TOOL_CALL]}
    chosen = answer.tool_calls[0]
    return {"messages": [*new, answer], "tool": chosen["name"], "args": chosen["args"]}


def _make_model_pick(model: ToolModel) -> ModelNode:
    def pick(state: ModelState) -> Update:
        """Ask the model which tool to call with which args; the gate checks its choice."""
        fields = _order_fields(state.get("order"))
        if fields is None:
            return {"errors": [ORDER_NOT_OBJECT]}
        return _ask(model, [], [SystemMessage(_INSTRUCTIONS), HumanMessage(_order_text(fields))])

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
    contract = gate.contract(tool) if isinstance(tool, str) else None
    if stage != "args" or contract is None:
        return {}
    if check in ("missing", "unexpected"):
        return {"arguments": list(contract.args)}
    return {}  # the allowed values and bounds are in ``details.fields``


def _error_reply(reason: str, answer: Mapping[str, Any], gate: Gate,
                 failed: AIMessage) -> list[BaseMessage]:
    """The tool messages answering every call of ``failed``: the gate's answer for the first.

    The answer is the structured error (code, retryable, message, details);
    ``details`` gains the tool or argument names when the reason asks for them.
    """
    first, *others = failed.tool_calls
    error = dict(answer.get("error") or {})
    error["details"] = {**error.get("details", {"reason": reason}),
                        **_hints(reason, gate, first["name"])}
    content = json.dumps({**answer, "error": error}, ensure_ascii=False, default=repr)
    replies: list[BaseMessage] = [ToolMessage(content, tool_call_id=first["id"] or "",
                                              name=first["name"], status="error")]
    # Chat APIs want every tool call answered, even those not run.
    replies.extend(ToolMessage(_SKIPPED, tool_call_id=other["id"] or "", name=other["name"],
                               status="error") for other in others)
    return replies


def _last_tool_request(messages: Sequence[BaseMessage]) -> AIMessage | None:
    for message in reversed(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            return message
    return None


def _make_model_repair(model: ToolModel, gate: Gate | None) -> ModelNode:
    def repair(state: ModelState) -> Update:
        """Hand the model the last reason as an error ``ToolMessage`` and take its new call."""
        errors, tried = state.get("errors") or [], state.get("calls") or []
        history = state.get("messages") or []
        failed = _last_tool_request(history)
        if not errors or not tried or failed is None:
            return {"errors": [REPAIR_NONE]}
        update = _ask(model, history, _error_reply(errors[-1], state.get("tool_reply") or {},
                                                   _gate_or_reference(gate), failed))
        if "errors" in update:
            return update
        fixed: Call = {"tool": update.pop("tool"), "args": update.pop("args")}
        return {**update, **_accept(errors[-1], tried, fixed)}

    return repair
