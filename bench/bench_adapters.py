"""Time each framework adapter against the same framework's plain tool call, side by side.

    python bench/bench_adapters.py             # full run, about a minute
    python bench/bench_adapters.py --quick     # a few seconds
    python bench/bench_adapters.py --json      # the figures as JSON
    python bench/bench_adapters.py --strict    # exit 1 if a target fails

Two kinds of case. A *run* is one whole agent run of the framework's own loop: a scripted model
makes one tool call with valid args (``search_tickets(status="open",
limit=2)``), the tool answers, the model ends the run. The plain case is the
framework's own tool over the same function (pydantic-ai ``Agent.tool_plain``;
OpenAI Agents ``function_tool``), so what differs is the door alone: the
framework's lax validation and call against the gate's checks, call and
answer. The scripted models do no work of their own beyond building their
reply (pydantic-ai's ``FunctionModel``; for OpenAI Agents a three-line
``Model``), so they dilute no ratio more than the frameworks themselves do.
An agent run costs milliseconds, so a *call* case times the door alone: the
one tool call as the framework makes it inside a run, given the model's JSON
(pydantic-ai: the tool's args validator, then the toolset's ``call_tool``, with
the capability's two hooks around it for ``GateCapability``; OpenAI Agents:
the tool's ``on_invoke_tool``, after the guardrail's check for
``gate_guardrail``).

As in ``bench_gate.py``: the cases run in rounds, each round times every case
once for one batch of runs, in an order rotated by one each round; a target is
the median over rounds of a ratio taken *within* a round. A gated read
remembers its answer, so the "miss" cases clear the gate's memo before each
run (the clear is included, against the gate) and the body runs every time;
the "hit" cases let the memo answer, as a repeated read does. Every case's
body runs are counted afterwards: a miss case and a plain case ran the body on
every run, a hit case on its first only.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agents import Agent as OpenAIAgent
from agents import RunConfig, Runner, function_tool
from agents.items import ModelResponse as OpenAIResponse
from agents.models.interface import Model
from agents.testing import assistant_message, function_call
from agents.tool import FunctionTool
from agents.tool_context import ToolContext
from agents.tool_guardrails import ToolInputGuardrailData
from agents.usage import Usage
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RunUsage

from agtool import Gate
from agtool.openai_agents import function_tools, gate_guardrail
from agtool.pydantic_ai import GateCapability, gated_toolset

__all__ = ["CASES", "TARGETS", "main", "measure", "render"]

ARGS = {"status": "open", "limit": 2}
ROWS = [{"id": "T-1", "title": "Refund not received"}, {"id": "T-2", "title": "Wrong size"}]


class Body:
    """The tool's body, counting its runs: every case calls this one function."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, status: str, limit: int) -> dict[str, Any]:
        self.runs += 1
        return {"tickets": ROWS[:limit]}


def _table(body: Body) -> dict[str, dict[str, Any]]:
    return {"search_tickets": {
        "fn": body, "description": "Tickets by status.",
        "args": {"status": {"type": "str", "allowed": ["open", "closed"]},
                 "limit": {"type": "int", "min": 1, "max": 20}},
        "returns": {"tickets": {"type": "list", "item": {"id": {"type": "str"},
                                                          "title": {"type": "str"}}}}}}


# -- pydantic-ai ---------------------------------------------------------------------------------

def _one_call(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Call the tool once, then end the run."""
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("search_tickets", dict(ARGS),
                                                 tool_call_id="c1")])
    return ModelResponse(parts=[TextPart("done")])


def _search_tool(body: Body) -> Callable[..., dict[str, Any]]:
    """The agent's own tool: a typed function over the body, as pydantic-ai reads one."""
    def search_tickets(status: str, limit: int) -> dict[str, Any]:
        """Tickets by status."""
        return body(status, limit)
    return search_tickets


def _pydantic_plain(body: Body) -> Agent[None, str]:
    return Agent(FunctionModel(_one_call), tools=[_search_tool(body)])


def _pydantic_toolset(body: Body) -> tuple[Agent[None, str], Gate]:
    gate = Gate(_table(body))
    return Agent(FunctionModel(_one_call), toolsets=[gated_toolset(gate)]), gate


def _pydantic_capability(body: Body) -> tuple[Agent[None, str], Gate]:
    capability = GateCapability(Gate(_table(Body())))  # its fn is never called
    agent = Agent(FunctionModel(_one_call), tools=[_search_tool(body)],
                  capabilities=[capability])
    return agent, capability.shadow


# -- OpenAI Agents -------------------------------------------------------------------------------

class _OneCall(Model):
    """Calls the tool once, then ends the run: no recording, no copies."""

    async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                           **kwargs: Any) -> OpenAIResponse:
        answered = isinstance(input, list) and any(
            isinstance(item, dict) and item.get("type") == "function_call_output"
            for item in input)
        output = ([assistant_message("done")] if answered
                  else [function_call("search_tickets", ARGS, call_id="c1")])
        return OpenAIResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def _openai_plain(body: Body) -> OpenAIAgent[Any]:
    tool = function_tool(body, name_override="search_tickets", strict_mode=False)
    return OpenAIAgent(name="desk", model=_OneCall(), tools=[tool])


def _openai_tools(body: Body) -> tuple[OpenAIAgent[Any], Gate]:
    gate = Gate(_table(body))
    return OpenAIAgent(name="desk", model=_OneCall(), tools=function_tools(gate)), gate


def _openai_guardrail(body: Body) -> tuple[OpenAIAgent[Any], Gate]:
    gate = Gate(_table(Body()))
    tool = function_tool(body, name_override="search_tickets", strict_mode=False,
                         tool_input_guardrails=[gate_guardrail(gate)])
    return OpenAIAgent(name="desk", model=_OneCall(), tools=[tool]), gate


_CONFIG = RunConfig(tracing_disabled=True, group_id="bench")


# -- Cases and targets ---------------------------------------------------------------------------

Run = Callable[[], Awaitable[Any]]


@dataclass
class Case:
    """One agent run to time, the body it calls and the gate whose memo a miss clears."""

    name: str
    run: Run
    body: Body
    hits: bool = False  # the gate's memo answers repeats: the body runs once


def _pydantic_run(agent: Agent[None, str], clear: Callable[[], None] | None = None) -> Run:
    async def run() -> Any:
        if clear is not None:
            clear()
        # One conversation for every run, as for OpenAI Agents' one group: a gated read's
        # memo is scoped to its run id, so only then can a repeat be a hit.
        return await agent.run("tickets?", conversation_id="bench")
    return run


def _openai_run(agent: OpenAIAgent[Any], clear: Callable[[], None] | None = None) -> Run:
    async def run() -> Any:
        if clear is not None:
            clear()
        return await Runner.run(agent, "tickets?", run_config=_CONFIG)
    return run


def _cases() -> list[Case]:
    cases = []
    body = Body()
    cases.append(Case("pydantic-ai plain tool", _pydantic_run(_pydantic_plain(body)), body))
    for label, make in (("gated_toolset", _pydantic_toolset),
                        ("GateCapability", _pydantic_capability)):
        body = Body()
        agent, gate = make(body)
        cases.append(Case(f"pydantic-ai {label}, miss", _pydantic_run(agent, gate.clear), body))
        body = Body()
        agent, gate = make(body)
        cases.append(Case(f"pydantic-ai {label}, hit", _pydantic_run(agent), body, hits=True))
    body = Body()
    cases.append(Case("openai-agents plain function_tool", _openai_run(_openai_plain(body)),
                      body))
    body = Body()
    openai_agent, gate = _openai_tools(body)
    cases.append(Case("openai-agents function_tools, miss",
                      _openai_run(openai_agent, gate.clear), body))
    body = Body()
    openai_agent, gate = _openai_tools(body)
    cases.append(Case("openai-agents function_tools, hit", _openai_run(openai_agent), body,
                      hits=True))
    body = Body()
    openai_agent, gate = _openai_guardrail(body)
    cases.append(Case("openai-agents function_tool + gate_guardrail",
                      _openai_run(openai_agent), body))
    return cases


# -- The door alone: one tool call, as each framework makes it inside a run ------------------

RAW = json.dumps(ARGS)


def _tool_ctx() -> RunContext[None]:
    return RunContext(deps=None, model=FunctionModel(_one_call), usage=RunUsage(),
                      run_id="bench-run", conversation_id="bench", tool_call_id="c1",
                      tool_name="search_tickets")


def _pydantic_call_plain(body: Body) -> Run:
    """What pydantic-ai does for a function tool: validate the JSON, call the function."""
    toolset: FunctionToolset[None] = FunctionToolset([_search_tool(body)])
    ctx = _tool_ctx()
    tool = asyncio.run(toolset.get_tools(ctx))["search_tickets"]

    async def run() -> Any:
        args = tool.args_validator.validate_json(RAW)
        return await toolset.call_tool("search_tickets", args, ctx, tool)
    return run


def _pydantic_call_toolset(body: Body, hits: bool) -> Run:
    gate = Gate(_table(body))
    toolset = gated_toolset(gate)
    ctx = _tool_ctx()
    tool = asyncio.run(toolset.get_tools(ctx))["search_tickets"]

    async def run() -> Any:
        if not hits:
            gate.clear()
        args = tool.args_validator.validate_json(RAW)
        return await toolset.call_tool("search_tickets", args, ctx, tool)
    return run


def _pydantic_call_capability(body: Body, hits: bool) -> Run:
    """The capability's two hooks around the same function tool's call."""
    toolset: FunctionToolset[None] = FunctionToolset([_search_tool(body)])
    ctx = _tool_ctx()
    tool = asyncio.run(toolset.get_tools(ctx))["search_tickets"]
    capability = GateCapability(Gate(_table(Body())))
    part = ToolCallPart("search_tickets", RAW, tool_call_id="c1")

    async def validate(args: Any) -> Any:  # never called: the capability skips validation
        raise AssertionError

    async def execute(args: dict[str, Any]) -> Any:
        return await toolset.call_tool("search_tickets", args, ctx, tool)

    async def run() -> Any:
        if not hits:
            capability.shadow.clear()
        args = await capability.wrap_tool_validate(ctx, call=part, tool_def=tool.tool_def,
                                                   args=RAW, handler=validate)
        return await capability.wrap_tool_execute(ctx, call=part, tool_def=tool.tool_def,
                                                  args=args, handler=execute)
    return run


def _openai_ctx() -> ToolContext[None]:
    return ToolContext(context=None, tool_name="search_tickets", tool_call_id="c1",
                       tool_arguments=RAW, run_config=_CONFIG)


def _openai_call(tool: FunctionTool, clear: Callable[[], None] | None = None) -> Run:
    ctx = _openai_ctx()

    async def run() -> Any:
        if clear is not None:
            clear()
        return await tool.on_invoke_tool(ctx, RAW)
    return run


def _openai_call_guarded(body: Body) -> Run:
    """The guardrail's check, then the plain tool's call, as the SDK runs them."""
    agent, _ = _openai_guardrail(body)
    tool = agent.tools[0]
    if not isinstance(tool, FunctionTool) or not tool.tool_input_guardrails:
        raise TypeError("the guarded agent's one tool is a FunctionTool with a guardrail")
    [guard] = tool.tool_input_guardrails
    ctx = _openai_ctx()
    data = ToolInputGuardrailData(context=ctx, agent=agent)

    async def run() -> Any:
        checked = await guard.run(data)
        if checked.behavior["type"] != "allow":
            raise AssertionError(checked.behavior)
        return await tool.on_invoke_tool(ctx, RAW)
    return run


def _call_cases() -> list[Case]:
    cases = []
    body = Body()
    cases.append(Case("call: pydantic-ai function tool", _pydantic_call_plain(body), body))
    for hits in (False, True):
        label = "hit" if hits else "miss"
        body = Body()
        cases.append(Case(f"call: pydantic-ai gated_toolset, {label}",
                          _pydantic_call_toolset(body, hits), body, hits=hits))
        body = Body()
        cases.append(Case(f"call: pydantic-ai GateCapability, {label}",
                          _pydantic_call_capability(body, hits), body, hits=hits))
    body = Body()
    plain = function_tool(body, name_override="search_tickets", strict_mode=False)
    cases.append(Case("call: openai-agents function_tool", _openai_call(plain), body))
    for hits in (False, True):
        body = Body()
        gate = Gate(_table(body))
        [gated] = function_tools(gate)
        if not isinstance(gated, FunctionTool):
            raise TypeError("function_tools makes FunctionTools")
        cases.append(Case(f"call: openai-agents function_tools, {'hit' if hits else 'miss'}",
                          _openai_call(gated, None if hits else gate.clear), body, hits=hits))
    body = Body()
    cases.append(Case("call: openai-agents function_tool + gate_guardrail",
                      _openai_call_guarded(body), body))
    return cases


@dataclass(frozen=True)
class Target:
    """``case`` must cost at most ``limit`` times ``plain``, within a round."""

    case: str
    plain: str
    limit: float = 1.0


RUN_CASES = [case.name for case in _cases()]
CALL_CASES = [case.name for case in _call_cases()]
CASES = RUN_CASES + CALL_CASES
#: The plain case of each framework, for a whole run and for the call alone.
PLAIN = {("pydantic-ai", False): "pydantic-ai plain tool",
         ("openai-agents", False): "openai-agents plain function_tool",
         ("pydantic-ai", True): "call: pydantic-ai function tool",
         ("openai-agents", True): "call: openai-agents function_tool"}


def _plain_for(name: str) -> str:
    """The same framework's plain case, of the same kind (a run or a call)."""
    call = name.startswith("call: ")
    return PLAIN[(name.removeprefix("call: ").split()[0], call)]


TARGETS = [Target(name, _plain_for(name)) for name in CASES if name not in PLAIN.values()]


# -- Timing --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    rounds: int
    batch: int  # agent runs per case per round
    call_batch: int  # tool calls per case per round


FULL = Plan(rounds=31, batch=20, call_batch=400)
QUICK = Plan(rounds=7, batch=5, call_batch=100)


async def _batch(run: Run, n: int) -> float:
    """Seconds per run of ``n`` runs in a row."""
    started = time.perf_counter()
    for _ in range(n):
        await run()
    return (time.perf_counter() - started) / n


def _batch_of(case: Case, plan: Plan) -> int:
    return plan.call_batch if case.name.startswith("call:") else plan.batch


async def _time_rounds(cases: list[Case], plan: Plan) -> list[dict[str, float]]:
    for case in cases:  # warm: first-run costs (schemas built, imports) out of the rounds
        await _batch(case.run, 3)
    rounds = []
    for index in range(plan.rounds):
        shift = index % len(cases)
        measured = {}
        # Rotated each round: every case runs early, late, and next to every other.
        for case in cases[shift:] + cases[:shift]:
            measured[case.name] = await _batch(case.run, _batch_of(case, plan))
        rounds.append(measured)
    return rounds


def _check_runs(cases: list[Case], plan: Plan) -> None:
    """Each plain and miss case ran its body on every run, each hit case on its first only."""
    for case in cases:
        expected = 1 if case.hits else 3 + plan.rounds * _batch_of(case, plan)
        if case.body.runs != expected:
            raise AssertionError(f"{case.name}: the body ran {case.body.runs} times, "
                                 f"not {expected}")


def measure(quick: bool = False) -> dict[str, Any]:
    """Time every case side by side; the µs per run and every target's ratio."""
    plan = QUICK if quick else FULL
    load_before = os.getloadavg()[0]
    log = logging.getLogger("agtool.calls")
    level = log.level
    log.setLevel(logging.WARNING)  # no call records: the gate's fast path, as in bench_gate
    cases = _cases() + _call_cases()
    gc.collect()
    try:
        rounds = asyncio.run(_time_rounds(cases, plan))
    finally:
        log.setLevel(level)
    _check_runs(cases, plan)
    targets = []
    for target in TARGETS:
        ratios = [r[target.case] / r[target.plain] for r in rounds]
        median = statistics.median(ratios)
        low, _, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (median,) * 3
        targets.append({"case": target.case, "plain": target.plain, "limit": target.limit,
                        "measured": round(median, 3), "quartiles": [round(low, 3),
                                                                    round(high, 3)],
                        "passed": median <= target.limit})
    return {"quick": quick, "rounds": plan.rounds, "batch": plan.batch,
            "call_batch": plan.call_batch,
            "load_before": round(load_before, 2),
            "us_per_run": {case.name: round(statistics.median(r[case.name] for r in rounds)
                                            * 1e6, 1) for case in cases},
            "targets": targets, "passed": all(t["passed"] for t in targets)}


def render(figures: dict[str, Any]) -> str:
    """The µs per agent run of every case, then one line per target."""
    width = max(map(len, figures["us_per_run"]))
    lines = [f"{'case (a run: one agent run with one tool call)':<{width}}  {'median us':>10}",
             "-" * (width + 12)]
    lines += [f"{name:<{width}}  {value:>10,.0f}" for name, value in
              figures["us_per_run"].items()]
    lines += ["", f"{figures['rounds']} rounds of {figures['batch']} runs and "
              f"{figures['call_batch']} calls per case"
              f"{' (quick)' if figures['quick'] else ''}; 1-minute load average "
              f"{figures['load_before']:g} before the run.", ""]
    width = max(len(target["case"]) for target in figures["targets"])
    for target in figures["targets"]:
        low, high = target["quartiles"]
        lines.append(f"{'PASS' if target['passed'] else 'FAIL'}  {target['case']:<{width}}  "
                     f"{target['measured']:>5.2f}x the plain call  "
                     f"target <= {target['limit']:g}x  (middle half: {low:.2f}-{high:.2f})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a run of a few seconds")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any target fails")
    options = parser.parse_args(argv)
    figures = measure(quick=options.quick)
    print(json.dumps(figures, indent=2) if options.json else render(figures))
    return 1 if options.strict and not figures["passed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
