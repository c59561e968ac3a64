"""LangChain tool messages hold no sensitive value, in any spelling an upstream echoed it in.

A gated tool whose upstream fails echoing the card (each encoder of ``tests/_spellings.py``)
is invoked as LangChain invokes a tool call; the ``ToolMessage`` (content, artifact,
status) is searched for every spelling of the card.
"""

from __future__ import annotations

import pytest
from _spellings import ENCODERS, leaks
from _tables import EVERY_KIND, echoing_pay_table
from langchain_core.messages import ToolMessage

from agtool import Gate
from agtool.langchain import gated_tools


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_a_tool_message_holds_no_spelling_of_the_card(encoding: str) -> None:
    (pay,) = gated_tools(Gate(echoing_pay_table(ENCODERS[encoding])))
    message = pay.invoke({"type": "tool_call", "name": "pay", "id": "c1",
                          "args": {"card": EVERY_KIND, "amount": 5}})
    assert isinstance(message, ToolMessage)
    assert message.status == "error"
    assert "UPSTREAM_ERROR" in str(message.content)  # the upstream's answer is quoted
    outputs = [str(message.content), repr(message.artifact), message.model_dump()]
    assert leaks(EVERY_KIND, *outputs) == []
