"""``agtool writes`` refusing what it cannot do: a missing or foreign store file, values a
store cannot keep, empty reasons, keys that are not there, a rekey without a secret.

Each refusal is one line on stderr and an exit status (2 for input the command could
not use, 1 for a key that is not there), and the store is left as it was: the key an
operator failed to resolve is still listed, unknown.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from agtool._cli import main
from agtool._store import SqliteStore


def agtool(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def store(tmp_path: pathlib.Path) -> pathlib.Path:
    """A store holding one key whose outcome is unknown (its write was interrupted)."""
    path = tmp_path / "writes.sqlite"
    made = SqliteStore(path)
    made.claim("k-unknown", "pay", "d", "someone", 300.0)
    made.mark_unknown("k-unknown", "someone")
    made.close()
    return path


def states(path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["writes", "list", "--json", "--store", str(path)]) == 0
    return {row["key"]: row for row in map(json.loads, capsys.readouterr().out.splitlines())}


@pytest.mark.parametrize("command", [["list"], ["forget", "k"], ["resolve", "k", "--error", "x"],
                                     ["rekey"]])
def test_a_store_file_that_is_not_there_is_refused_and_not_made(
        capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path,
        monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    """An operator's typo is not answered by a new, empty store that lists nothing."""
    monkeypatch.setenv("AGTOOL_SECRET", "n" * 32)
    missing = tmp_path / "wirtes.sqlite"
    status, out, err = agtool(capsys, "writes", command[0], "--store", str(missing),
                              *command[1:])
    assert status == 2
    assert err == f"agtool writes: --store {missing}: no such store file\n"
    assert out == ""
    assert not missing.exists()


def test_a_file_that_is_not_a_store_is_a_one_line_error(
        capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database, " * 100)
    status, _, err = agtool(capsys, "writes", "list", "--store", str(notes))
    assert status == 2
    assert err.startswith(f"agtool writes: --store {notes}: ")
    assert err.count("\n") == 1
    assert notes.read_text() == "not a database, " * 100


def test_a_value_that_is_not_json_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                                   store: pathlib.Path) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["writes", "resolve", "--store", str(store), "k-unknown", "--value", "{receipt"])
    assert exited.value.code == 2
    assert "not JSON: '{receipt'" in capsys.readouterr().err
    assert states(store, capsys)["k-unknown"]["state"] == "unknown"


@pytest.mark.parametrize(("answer", "said"), [
    (["--value", "NaN"], "agtool writes resolve: "),
    (["--error", "   "], "agtool writes resolve: --error needs a reason\n"),
])
def test_an_answer_the_store_cannot_keep_is_refused_and_the_key_stays_unknown(
        capsys: pytest.CaptureFixture[str], store: pathlib.Path, answer: list[str],
        said: str) -> None:
    status, out, err = agtool(capsys, "writes", "resolve", "--store", str(store), "k-unknown",
                              *answer)
    assert status == 2
    assert err.startswith(said)
    assert err.count("\n") == 1
    assert out == ""
    assert states(store, capsys)["k-unknown"]["state"] == "unknown"


@pytest.mark.parametrize(("command", "said"), [
    (["resolve", "k-other", "--value", "1"], "agtool writes resolve: no pending or unknown "
                                             "key k-other\n"),
    (["forget", "k-other"], "agtool writes forget: no key k-other\n"),
])
def test_a_key_that_is_not_there_exits_1(capsys: pytest.CaptureFixture[str],
                                         store: pathlib.Path, command: list[str],
                                         said: str) -> None:
    status, out, err = agtool(capsys, "writes", command[0], "--store", str(store),
                              *command[1:])
    assert (status, out, err) == (1, "", said)
    assert set(states(store, capsys)) == {"k-unknown"}


def test_a_key_held_by_an_owner_elsewhere_waits_for_its_lease(
        capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    """A claim this machine cannot see the owner of: pending until its lease ends, and the
    listing says when that is."""
    path = tmp_path / "writes.sqlite"
    made = SqliteStore(path)
    made.claim("k-elsewhere", "pay", "d", "other-host:41:p:c:boot:ns:1", 3600.0)
    made.close()
    rows = states(path, capsys)
    assert rows["k-elsewhere"]["state"] == "pending"
    assert rows["k-elsewhere"]["why"] == ("held by an owner elsewhere until its lease ends "
                                          f"({rows['k-elsewhere']['lease_until']})")
    assert rows["k-elsewhere"]["lease_until"].endswith("+00:00")
    assert rows["k-elsewhere"]["owner"] == "other-host:41:p:c:boot:ns:1"


def test_rekey_without_the_new_secret_exits_2_and_changes_nothing(
        capsys: pytest.CaptureFixture[str], store: pathlib.Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGTOOL_SECRET", raising=False)
    before = store.read_bytes()
    status, out, err = agtool(capsys, "writes", "rekey", "--store", str(store))
    assert (status, out) == (2, "")
    assert err == "agtool writes rekey: set AGTOOL_SECRET to the new secret\n"
    assert store.read_bytes() == before
