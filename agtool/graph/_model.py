"""The model path of the repair graph: a chat model picks the calls and repairs them.

``build_model_graph(model, gate=gate)`` (what ``build_graph(model, gate=gate)``
builds) binds the model to ``tool_specs(gate)`` and asks it, with a system
prompt made from the table, to carry out the order. Every tool call of its
turn goes through the gate (step id: its tool-call id) and gets its own
``ToolMessage``; a retryable failure is retried by the graph with the same
ids, and failures the model can fix (any argument reason, or
``result:too_big``) go back to it as ``status="error"`` messages carrying the
gate's structured error plus the tool or argument names it needs. A reply of
no tool call ends the run with ``model:no_tool_call``, a raising model with
``model:raised:<ExceptionClassName>``, a new call that already failed with
``repair:repeat``.

The state, the gate call, the reply and the skeleton are shared with the rule
graph (``agtool.graph._parts``); ``agtool.graph._build`` dispatches here, and this
module never imports it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable

from .._answers import is_retryable
from .._contract import check_table
from .._gate import Gate
from .._jsonschema import tool_spec as export_spec
from .._reasons import (
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
from ._parts import (
    MAX_ATTEMPTS,
    STEP_ID,
    AgentGraph,
    ModelNode,
    ModelState,
    Node,
    TurnCall,
    Update,
    changes,
    contract_of,
    gated,
    order_fields,
    reason_of,
    result_reply,
    retry_wait,
    rows_of,
    skeleton,
    was_tried,
    with_repair,
)
from ._repairs import Call

__all__ = ["build_model_graph", "tool_specs"]

_log = logging.getLogger("agtool")


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
        fields = order_fields(state.get("order"))
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
    contract = contract_of(gate, tool)
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
    reason = reason_of(answer)
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
            answer = gated(gate, state, entry["tool"], entry["args"], entry["id"])
            entry["answer"] = answer
            calls.append({"tool": entry["tool"], "args": entry["args"]})
            if not answer["ok"]:
                errors.append(reason_of(answer))
                if is_retryable(errors[-1]) and not last_round:
                    continue
            messages.append(_tool_message(gate, entry, answer))
        answered = [(entry, entry["answer"]) for entry in turn if entry["answer"] is not None]
        last = next((pair for pair in reversed(answered) if not pair[1]["ok"]), answered[-1])
        ok = all(answer["ok"] for _, answer in answered)
        rows = [row for entry, answer in answered if answer["ok"]
                for row in rows_of(contract_of(gate, entry["tool"]), answer["data"])]
        return {"turn": turn, "calls": calls, "errors": errors, "messages": messages,
                "attempts": 1, "ok": ok, "rows": rows if ok else [], "tool_reply": last[1],
                "tool": last[0]["tool"], "args": last[0]["args"]}

    return fetch


def _failed(state: ModelState) -> list[TurnCall]:
    return [entry for entry in state.get("turn") or []
            if entry["answer"] is not None and not entry["answer"]["ok"]]


def _after_turn(state: ModelState) -> str:
    failed = [reason_of(entry["answer"]) for entry in _failed(state) if entry["answer"]]
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
             and is_retryable(reason_of(entry["answer"]))}
    details = [entry["answer"]["error"]["details"] for entry in _failed(state)
               if entry["id"] in again and entry["answer"]]
    time.sleep(retry_wait(details, state.get("retries", 0)))
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
        if any(was_tried(_as_call(entry), refused) for entry in new):
            return {"messages": update["messages"], "errors": [REPAIR_REPEAT]}
        fixes = [fix for old, fixed in zip(failed, new, strict=False) if old["answer"]
                 for fix in changes(reason_of(old["answer"]), _as_call(old), _as_call(fixed))]
        kept = [entry for entry in state.get("turn") or [] if entry not in failed]
        return {**update, "turn": kept + new, "fixes": fixes,
                "refused": [_as_call(entry) for entry in failed]}

    return repair


# --- the graph -------------------------------------------------------------------------------


def build_model_graph(model: BaseChatModel, *, gate: Gate, reply: Node | None = None,
                      name: str | None = None) -> AgentGraph:
    """The repairing graph over ``gate`` with ``model`` bound to ``tool_specs(gate)``.

    What ``build_graph(model, gate=gate)`` builds (see there): the model picks
    and repairs over ``ModelState``, the graph gates and retries every call of
    its turn. ``reply`` defaults to ``result_reply(gate)``; ``bind_tools``
    raising (a model without tool calling) raises here.
    """
    bound = model.bind_tools(tool_specs(gate))
    asks = skeleton(ModelState, _model_pick(bound, gate), _turn_fetch(gate),
                    reply or result_reply(gate))
    return with_repair(asks, _model_repair(bound), _turn_retry, _after_turn,
                       name or "agtool_model_agent")
