"""Pins of upstream MCP tools: a digest of what each tool said it was, and what differs from it.

A tool's pin is the SHA-256 of its name, description, input and output
schemas and annotations, in canonical JSON (``tool_digest``). A pins file
(``agtool mcp pin --pins FILE -- CMD`` writes one) maps each name to its
pin. ``hidden_by_pins`` is the one decision: which tools of a listing are not
served, and why. With a pins file, a tool that is not in it or differs from
its pin; without one, a tool that was not listed, or was listed otherwise,
when the proxy started (a "rug pull": vetted once, changed later).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

import mcp.types as types

__all__ = ["PINNED_KEYS", "hidden_by_pins", "read_pins", "tool_digest", "write_pins"]

#: What a pin covers: everything of a listed tool that a model reads or the gate enforces.
PINNED_KEYS = ("name", "description", "inputSchema", "outputSchema", "annotations")
_FORMAT = "agtool-mcp-pins/1"


def tool_digest(tool: types.Tool) -> str:
    """``sha256:<hex>`` of the tool's ``PINNED_KEYS``, in canonical JSON."""
    listing = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
    pinned = {key: listing.get(key) for key in PINNED_KEYS}
    text = json.dumps(pinned, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def read_pins(path: str) -> dict[str, str]:
    """The pins kept in ``path``; ``ValueError`` naming the file if it is not a pins file."""
    try:
        with open(path, encoding="utf-8") as kept:
            data: Any = json.load(kept)
    except (OSError, ValueError) as exc:
        raise ValueError(f"pins file {path}: {exc}") from None
    tools = data.get("tools") if isinstance(data, dict) else None
    if (not isinstance(data, dict) or data.get("format") != _FORMAT or not isinstance(tools, dict)
            or not all(isinstance(pin, str) for pin in tools.values())):
        raise ValueError(f"pins file {path}: not an agtool pins file (written by "
                         f"`agtool mcp pin`)")
    return dict(tools)


def write_pins(path: str, tools: Iterable[types.Tool]) -> dict[str, str]:
    """Pin every tool of ``tools`` in ``path`` (replaced whole, atomically); the pins written."""
    pins = {tool.name: tool_digest(tool) for tool in tools}
    text = json.dumps({"format": _FORMAT, "tools": pins}, indent=2, sort_keys=True,
                      ensure_ascii=False)
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as out:
        out.write(text + "\n")
    os.replace(temporary, path)
    return pins


def hidden_by_pins(tools: Iterable[types.Tool], pins: Mapping[str, str] | None,
                   at_start: Mapping[str, str] | None, pins_path: str = "") -> dict[str, str]:
    """Name -> why the tool is not served, for each tool of ``tools`` its pins do not allow.

    ``pins`` is the pins file's content (``None``: no pins file); ``at_start``
    the digests of the listing the proxy started with (``None``: this is it).
    """
    hidden: dict[str, str] = {}
    for tool in tools:
        digest = tool_digest(tool)
        if pins is not None:
            pin = pins.get(tool.name)
            if pin is None:
                hidden[tool.name] = f"it is not pinned in {pins_path}"
            elif pin != digest:
                hidden[tool.name] = f"it differs from its pin in {pins_path}"
        elif at_start is not None:
            first = at_start.get(tool.name)
            if first is None:
                hidden[tool.name] = "it was not listed when the proxy started"
            elif first != digest:
                hidden[tool.name] = "it changed since the proxy started"
    return hidden
