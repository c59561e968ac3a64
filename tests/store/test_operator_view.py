"""``agtool writes list`` as an operator needs it: every open row, a damaged one shown as
damaged with its key, names escaped, and each stuck key with its owner and why."""

from __future__ import annotations

import json
import pathlib
import sqlite3
from typing import Any

import pytest
from _owners import exited_owner

from agtool._cli import main
from agtool._store import SqliteStore, new_owner


def listed(path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    assert main(["writes", "list", "--store", str(path), "--json"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


@pytest.fixture(scope="module")
def dead() -> str:
    return exited_owner()


@pytest.fixture
def path(tmp_path: pathlib.Path, dead: str) -> pathlib.Path:
    made = tmp_path / "writes.sqlite"
    store = SqliteStore(made)
    store.claim("alive", "place", "d", new_owner(), 300.0)
    store.claim("dead", "place", "d", dead, 300.0)
    store.claim("finished", "place", "d", new_owner(), 300.0)
    store.finish("finished", store.lookup("finished").owner,  # type: ignore[union-attr]
                 {"ok": True, "value": 1, "error": ""})
    store.close()
    return made


def damage(path: pathlib.Path, sql: str, *params: Any) -> None:
    with sqlite3.connect(path) as db:
        db.execute(sql, params)


def test_every_open_key_has_its_owner_and_why(path: pathlib.Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A live claim is pending, waiting on its owner; a dead owner's is unknown, saying its
    owner died; a done key is not listed."""
    rows = {row["key"]: row for row in listed(path, capsys)}
    assert set(rows) == {"alive", "dead"}
    assert rows["alive"]["state"] == "pending"
    assert "owner runs" in rows["alive"]["why"]
    assert rows["dead"]["state"] == "unknown"
    assert "died" in rows["dead"]["why"]
    assert rows["dead"]["owner"]


@pytest.mark.parametrize(("sql", "params"), [
    ("UPDATE agtool_writes SET outcome = ?, state = 'done' WHERE key = 'finished'",
     ("not json",)),
    ("UPDATE agtool_writes SET claimed_at = ? WHERE key = 'finished'", (1e300,)),
    ("UPDATE agtool_writes SET claimed_at = ? WHERE key = 'finished'", ("yesterday",)),
    ("UPDATE agtool_writes SET state = ? WHERE key = 'finished'", ("weird",)),
], ids=["outcome-not-json", "claimed-at-huge", "claimed-at-text", "state-unknown-word"])
def test_a_damaged_row_is_listed_as_damaged_with_its_key_and_the_rest_still_shown(
        path: pathlib.Path, capsys: pytest.CaptureFixture[str], sql: str,
        params: tuple[Any, ...]) -> None:
    """One damaged row never hides the others: it is shown as damaged, with its key."""
    damage(path, sql, *params)
    rows = {row["key"]: row for row in listed(path, capsys)}
    assert rows["finished"]["state"] == "damaged"
    assert {"alive", "dead"} <= set(rows)


def test_names_with_terminal_escapes_are_printed_escaped(
        path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A tool name or key holding escape codes cannot erase or move the operator's view."""
    damage(path, "UPDATE agtool_writes SET tool = ?, key = ? WHERE key = 'alive'",
           "evil\x1b[2K\x1b[1A\r", "k\x1b]0;title\x07")
    assert main(["writes", "list", "--store", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "\x07" not in out
    assert "\r" not in out
    assert "\\x1b[2K" in out
