"""The seed's seven figures, measured by running ``agtool.tools``."""

from __future__ import annotations

from typing import Any

from agtool import tools

__all__ = ["BAD_REGION_ORDER", "EMPTY_ORDER", "REFUSED_CALLS", "measure_reference"]

#: One refused call per argument check the reference contract can fail, plus an unknown tool.
REFUSED_CALLS: list[tuple[str, object]] = [
    ("stock_lookup", {"sku": "A100", "region": "daegu", "limit": 1}),
    ("stock_lookup", {"sku": "A100", "region": "seoul", "limit": True}),
    ("stock_lookup", {"sku": "A100", "region": "seoul", "limit": "2"}),
    ("stock_lookup", {"sku": "A100", "region": "seoul", "limit": 1.0}),
    ("stock_lookup", {"sku": "A100", "region": "seoul", "limit": 0}),
    ("stock_lookup", {"sku": "A100", "region": "seoul", "limit": tools.MAX_ROWS + 1}),
    ("stock_lookup", {"sku": "A100", "region": "seoul"}),
    ("stock_lookup", {"sku_id": "A100", "region": "seoul", "limit": 1}),
    ("legacy_stock", {"sku": 100, "region": "seoul", "limit": 1}),
    ("legacy_stock", ["A100", "seoul", 1]),
    ("stock_lookpu", {"sku": "A100", "region": "seoul", "limit": 1}),
]
_GOOD_ROW = {"store": "Gangnam", "count": 3}
#: One returned value per result check, each wrong in exactly one way.
BAD_RESULTS: list[object] = [
    {"sku": "A100", "rows": [{"store": "Gangnam", "count": "4개"}]},
    {"sku": "A100", "rows": []},
    {"sku": "A100", "rows": [_GOOD_ROW] * (tools.MAX_ROWS + 1)},
    {"sku": "A100", "rows": [{"store": "Gangnam", "count": -1}]},
]
BAD_REGION_ORDER = {"sku": "A100", "region": "daegu", "limit": 2}
EMPTY_ORDER = {"sku": "B200", "region": "busan", "limit": 2}
_MEMO_ARGS = {"sku": "A100", "region": "jeju", "limit": 1}


def _refused_call(name: str, args: object) -> dict[str, Any]:
    before = tools.CALLS
    error = tools.call_tool(name, args)["error"]
    return {"tool": name, "args": repr(args), "error": error, "body_runs": tools.CALLS - before}


def measure_reference() -> dict[str, Any]:
    """Run the reference module and return the seed's figures, measured now."""
    tools.GATE.clear()
    refused = [_refused_call(name, args) for name, args in REFUSED_CALLS]
    if any(not call["error"] for call in refused):
        raise AssertionError("a call meant to be refused passed the gate")

    tools.call_tool("stock_lookup", _MEMO_ARGS)
    before = tools.CALLS
    tools.call_tool("stock_lookup", dict(reversed(_MEMO_ARGS.items())))
    memo_second_call_runs = tools.CALLS - before

    repaired = tools.handle(BAD_REGION_ORDER)
    gave_up = tools.handle(EMPTY_ORDER)
    return {
        "tools": sorted(tools.TOOLS),
        "blocked_before_call": sum(call["body_runs"] for call in refused),
        "refused_calls": refused,
        "bad_result_reasons": sorted(
            tools.validate_result("stock_lookup", value) for value in BAD_RESULTS
        ),
        "memo_second_call_runs": memo_second_call_runs,
        "repaired": repaired["ok"],
        "attempts": repaired["attempts"],
        "repair_fixes": repaired["fixes"],
        "gave_up": not gave_up["ok"],
        "gave_up_attempts": gave_up["attempts"],
        "gave_up_reason": gave_up["errors"][-1] if gave_up["errors"] else "",
        "max_attempts": tools.MAX_ATTEMPTS,
    }
