"""MCP error texts hold no sensitive value, in any spelling an upstream echoed it in.

A served tool whose upstream fails echoing the card (each encoder of
``tests/_spellings.py``) answers the official client with an ``isError`` result: its
text blocks, ``_meta`` and structured content, and the log lines of the call, are searched
for every spelling of the card.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from _capture import Captured, capturing
from _spellings import ENCODERS, leaks
from _tables import EVERY_KIND, echoing_pay_table
from mcp import Client

from agtool import Gate
from agtool.mcp import server


@pytest.fixture
def lines() -> Iterator[Captured]:
    with capturing() as handler:
        yield handler


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_an_mcp_error_text_holds_no_spelling_of_the_card(encoding: str,
                                                         lines: Captured) -> None:
    mcp_server = server(Gate(echoing_pay_table(ENCODERS[encoding])))

    async def call() -> Any:
        with anyio.fail_after(30):
            async with Client(mcp_server) as client:
                return await client.call_tool("pay", {"card": EVERY_KIND, "amount": 5})

    result = anyio.run(call)
    assert result.is_error is True
    texts = [getattr(block, "text", "") for block in result.content]
    assert any("UPSTREAM_ERROR" in text for text in texts)  # the upstream's answer is quoted
    assert leaks(EVERY_KIND, *texts, result.meta, result.structured_content, *lines.texts) == []
