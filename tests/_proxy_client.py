"""An MCP client of `agtool mcp proxy`, run as its own process so that a test can kill it.

``python tests/_proxy_client.py ROOT PROXY_ARGS...`` starts ``python -m agtool._cli
mcp proxy PROXY_ARGS`` through the SDK's ``stdio_client``, calls ``whoami`` and prints
its answer (the upstream's pid and its parent's, the proxy) as one JSON line, then calls
``note`` with ``text="block"``, which blocks the upstream, and waits there until it is
killed, interrupted, or the call ends.
"""

from __future__ import annotations

import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client


async def main(root: str, proxy_args: list[str]) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "agtool._cli", "mcp", "proxy", *proxy_args],
        cwd=root, env={"PYTHONPATH": root, "FAULT_RUNS": os.environ["FAULT_RUNS"]})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        who = await session.call_tool("whoami", {})
        print(json.dumps({key: who.structured_content[key] for key in ("pid", "ppid")}),
              flush=True)
        await session.call_tool("note", {"text": "block"})


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2:])
