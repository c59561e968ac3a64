"""A store row holds no sensitive value, in any spelling a body or its upstream echoed it in.

A write's row keeps its outcome, so a retry with the same key gets the same answer. Two
writes per encoder of ``tests/_spellings.py``: one whose upstream failed echoing the card,
and one whose result carries the card so spelled in a field declared sensitive (a receipt).
The rows on SQLite (and the file's raw bytes) and on PostgreSQL (as the server gives them)
are searched for every spelling of the card, with the failed write's answers.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _pg import postgres_store, postgres_url
from _spellings import ENCODERS, leaks
from _tables import EVERY_KIND, echoing_pay_table

from agtool import Gate

CARD = EVERY_KIND
WRITER = {"read_public", "reversible_write"}


def pay_table(encode: Callable[[str], str]) -> dict[str, Any]:
    """``echoing_pay_table``'s failing write, and one that keeps a receipt spelling the card."""
    def keep(card: str, amount: int) -> Any:
        return {"ok": True, "receipt": "paid with " + encode(card)}

    table = echoing_pay_table(encode, effect="write", risk="reversible_write")
    return {**table,
            "keep": {"fn": keep, "effect": "write", "risk": "reversible_write",
                     "args": table["pay"]["args"],
                     "returns": {"ok": {"type": "bool"},
                                 "receipt": {"type": "str", "sensitive": True}}}}


def failed_twice(gate: Gate) -> list[dict[str, Any]]:
    """The failing write twice (the first answer, and the one the store gives the retry),
    then the kept one twice: the retry is answered from its row."""
    args = {"card": CARD, "amount": 5}
    answers = [gate.call_tool("pay", args, run_id="run", step_id="step") for _ in range(2)]
    assert [answer["ok"] for answer in answers] == [False, False]
    kept = [gate.call_tool("keep", args, run_id="run", step_id="kept") for _ in range(2)]
    assert [answer["ok"] for answer in kept] == [True, True]
    return answers


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_a_sqlite_row_holds_no_spelling_of_the_card(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "writes.db"
    answers = failed_twice(Gate(pay_table(ENCODERS[encoding]), scope=WRITER, store=str(path)))
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT * FROM agtool_writes").fetchall()
    assert rows  # the write left a row: there is something to search
    # The database and its write-ahead log, whichever holds the row now.
    blob = "".join(file.read_bytes().decode("utf-8", "replace") for file in tmp_path.iterdir())
    assert leaks(CARD, rows, blob, *answers) == []


@pytest.mark.parametrize("encoding", sorted(ENCODERS))
def test_a_postgres_row_holds_no_spelling_of_the_card(encoding: str) -> None:
    import psycopg
    from psycopg import sql

    url = postgres_url()
    with postgres_store(url) as store:
        answers = failed_twice(Gate(pay_table(ENCODERS[encoding]), scope=WRITER, store=store,
                                      secret=b"s" * 32))
        with psycopg.connect(url) as db:
            rows = db.execute(sql.SQL("SELECT * FROM {}").format(
                sql.Identifier(store.table))).fetchall()
    assert rows
    assert leaks(CARD, rows, *answers) == []
