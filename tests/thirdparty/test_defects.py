"""The ledger of real defects holds: each one shown again by hand, with the official client.

``defects.py`` is the oracle of the harness's precision and recall on real
servers (bench/bench_harness_real.py, the measured report). Here each entry's
calls are made with the official ``ClientSession`` against the pinned server
in a fresh sandbox, with a canary in its environment, and the answers must
show the defect; a new release that fixes one fails this test, and the ledger
is corrected, before any figure is published from it. The scoring itself is
checked on findings built by hand.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from thirdparty.defects import DEFECTS, Answer, Defect, Finding, score
from thirdparty.fixture import Started


def _answer(result: object) -> Answer:
    blocks = getattr(result, "content", [])
    return Answer(bool(getattr(result, "is_error", False)),
                  "".join(getattr(block, "text", "") for block in blocks))


async def _by_hand(defect: Defect, started: Started, canary: str) -> list[Answer]:
    argv, env, cwd = started
    params = StdioServerParameters(command=argv[0], args=argv[1:],
                                   env={**env, "AGTOOL_CANARY_TOKEN": canary}, cwd=cwd)
    answers = []
    with anyio.fail_after(60), open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(
                read, write) as session:
            await session.initialize()
            for tool, args in defect.by_hand(cwd.parent / "state"):
                answers.append(_answer(await session.call_tool(tool, args)))
    return answers


@pytest.mark.slow
@pytest.mark.parametrize("defect", DEFECTS,
                         ids=[f"{d.server}-{d.tool or 'all'}-{d.kind}" for d in DEFECTS])
def test_each_defect_shows_by_hand(defect: Defect,
                                   thirdparty_server: Callable[[str], Started]) -> None:
    canary = f"agtool-canary-{secrets.token_hex(8)}"
    answers = anyio.run(_by_hand, defect, thirdparty_server(defect.server), canary)
    assert defect.shows(answers, canary), (defect.what, answers)


def test_the_ledger_counts_each_tool_once() -> None:
    keys = [(d.server, d.tool, d.kind) for d in DEFECTS]
    assert len(keys) == len(set(keys))


def _finding(item: str, verdict: str, message: str) -> Finding:
    return {"item": item, "verdict": verdict, "message": message}


COERCION = ("tool 'git_log' accepted a call its own inputSchema refuses: "
            'git_log({"repo_path": "/r", "max_count": false})')


def test_a_fail_the_ledger_knows_is_true_and_one_it_does_not_costs_precision() -> None:
    known = _finding("git_log::mistake[bool-for-int]", "failed", COERCION)
    unknown = _finding("git_status::contract", "failed", "tool 'git_status' answered outside "
                       "its outputSchema")
    figures = score({"git": [known, unknown]})
    assert (figures["fails"], figures["true_fails"], figures["precision"]) == (2, 1, 0.5)
    assert figures["unknown_fails"] == ["git git_status::contract"]


def test_a_fail_is_true_only_on_its_own_server_and_tool() -> None:
    # The same words on another tool or another server report no defect of the ledger.
    elsewhere = _finding("git_status::mistake[bool-for-int]", "failed",
                         COERCION.replace("git_log", "git_status"))
    assert score({"git": [elsewhere]})["true_fails"] == 0
    assert score({"time": [_finding("git_log::x", "failed", COERCION)]})["true_fails"] == 0


def test_recall_counts_the_defects_of_the_servers_checked() -> None:
    warn = _finding("read_query::accepts", "warned", "tool 'read_query' answered read_query("
                    '{"query": ""}) with what reads as an error, with isError false: "Error"')
    figures = score({"sqlite": [warn]})
    sqlite = [d for d in DEFECTS if d.server == "sqlite"]
    assert figures["defects"] == len(sqlite)
    assert figures["defects_reported"] == 1
    assert figures["precision"] is None  # no FAIL: no precision to speak of
    assert len(figures["missed"]) == len(sqlite) - 1


def test_an_inconclusive_item_reports_nothing() -> None:
    maybe = _finding("read_query::accepts", "inconclusive",
                     "with what reads as an error, with isError false")
    assert score({"sqlite": [maybe]})["defects_reported"] == 0
