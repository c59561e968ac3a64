"""A faulty MCP upstream for the proxy's fault tests: it dies, blocks, changes and tells.

Run as ``python tests/_fault_server.py``, a stdio MCP server on the SDK's
low-level ``Server``. Every call appends a JSON line (tool, args, instance) to the
file named by ``FAULT_RUNS`` before it does anything else, so a test can tell
whether a write happened. Its tools:

- ``note(text)``: a reversible write. ``text == "die"`` exits the process after
  the line is written (the write happened, no answer came); ``"block"`` blocks
  the whole process in a sleep, so it no longer reads its stdin either;
  ``"hang"`` awaits for ever (cancellable); anything else answers ``{"noted": text}``;
- ``whoami(nonce=...)``: a read answering ``{"pid", "ppid", "instance", "env", "fds"}``: its own
  and its parent's process ids, a random name of this process, its environment and what
  its open file descriptors point at;
- ``retitle(text)``: a read that changes ``whoami``'s description to ``text``
  and sends ``notifications/tools/list_changed``;
- ``grow()``: a read that adds a tool ``late`` to the listing and says so.

With ``FAULT_ONCE=PATH``, a start finding PATH exits at once (before the
handshake) and the first start creates it: the upstream cannot be restarted.
``FAULT_DESCRIPTION`` is ``whoami``'s description at start.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

READ = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = types.ToolAnnotations(read_only_hint=False, destructive_hint=False,
                              open_world_hint=False)
#: This process's own name: a pid may be given again to the next process.
INSTANCE = uuid.uuid4().hex
STATE: dict[str, Any] = {"description": os.environ.get("FAULT_DESCRIPTION", "Who runs me."),
                         "late": False}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def _tools() -> list[types.Tool]:
    text = {"text": {"type": "string"}}
    tools = [
        types.Tool(name="note", description="Write a note.", input_schema=_object(text),
                   output_schema={"type": "object", "properties": {"noted": {"type": "string"}},
                                  "required": ["noted"]},
                   annotations=WRITE),
        # ``nonce``: any value, so that a gate remembering reads still asks each time.
        types.Tool(name="whoami", description=STATE["description"],
                   input_schema={**_object({"nonce": {"type": "string"}}), "required": []},
                   annotations=READ),
        types.Tool(name="retitle", description="Change whoami's description.",
                   input_schema=_object(text), annotations=READ),
        types.Tool(name="grow", description="List one more tool.", input_schema=_object({}),
                   annotations=READ),
    ]
    if STATE["late"]:
        tools.append(types.Tool(name="late", description="Listed late.",
                                input_schema=_object({}), annotations=READ))
    return tools


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=_tools())


def _answer(value: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(value))],
                                structured_content=value)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    with open(os.environ["FAULT_RUNS"], "a") as runs:
        runs.write(json.dumps({"tool": params.name, "args": arguments, "instance": INSTANCE})
                   + "\n")
    text = arguments.get("text")
    if params.name == "note" and text == "die":
        os._exit(3)
    if params.name == "note" and text == "block":
        time.sleep(3600)  # the whole process, its stdin reader included
    if params.name == "note" and text == "hang":
        await anyio.sleep_forever()
    if params.name == "whoami":
        return _answer({"pid": os.getpid(), "ppid": os.getppid(), "instance": INSTANCE,
                        "env": dict(os.environ), "fds": _open_files()})
    if params.name in ("retitle", "grow"):
        if params.name == "retitle":
            STATE["description"] = text
        else:
            STATE["late"] = True
        await ctx.session.send_tool_list_changed()
        return _answer({"changed": True})
    return _answer({"noted": text})


def _open_files() -> list[str]:
    """What this process's open file descriptors point at (Linux), to see what it inherited."""
    found = []
    for fd in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else []:
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return found


async def main() -> None:
    once = os.environ.get("FAULT_ONCE")
    if once and os.path.exists(once):
        sys.exit(5)
    if once:
        open(once, "w").close()
    app: Server[Any] = Server("fault", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await app.run(read, write, app.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
