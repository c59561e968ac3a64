"""A scripted chat model for driving real LangChain agents and LangGraph graphs in tests.

``ScriptedChat(turns=[...])`` answers each model call with the next scripted
``AIMessage`` (its tool calls are the mistakes a model makes), records the
tools it was bound with as the provider would receive them, and the messages
it was sent, so a test can read what the model was shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field


class ScriptedChat(BaseChatModel):
    """Replays ``turns`` in order; ``bound`` holds each ``bind_tools`` call's tools as sent."""

    turns: list[AIMessage]
    bound: list[list[dict[str, Any]]] = Field(default_factory=list)
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChat:  # type: ignore[override]
        self.bound.append([convert_to_openai_tool(tool) for tool in tools])
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        turn = len(self.seen) - 1
        message = self.turns[turn] if turn < len(self.turns) else AIMessage("done")
        return ChatResult(generations=[ChatGeneration(message=message)])


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    """One tool call, as a provider's answer is parsed into one."""
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def turn(*calls: dict[str, Any]) -> AIMessage:
    """A model turn that makes these tool calls, in parallel."""
    return AIMessage("", tool_calls=list(calls))
