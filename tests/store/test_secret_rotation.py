"""Secrets that rotate: a store records which secrets made its keys, refuses a gate without
them in one line, and, given the old ones (or after ``agtool writes rekey``), finds every
earlier key and approval while it makes new ones with the new secret."""

from __future__ import annotations

import pathlib
import sqlite3
import subprocess
import sys
from typing import Any

import pytest
from _pg import postgres_store, postgres_url

from agtool import Approver, Gate
from agtool._cli import main
from agtool._keys import (
    ENV_OLD_SECRETS,
    ENV_SECRET,
    SecretMismatch,
    StoreRefused,
    key_file_secret,
)
from agtool._store.postgres import PostgresStore

NEW = "the-new-secret-after-rotation-0123"
OTHER = "another-service-secret-456789abcd"
ARGS = {"order": "A-1", "qty": 1}


class Body:
    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, order: str, qty: int) -> dict[str, Any]:
        self.runs += 1
        return {"order": order, "serial": self.runs}


def table(body: Body, **entry: Any) -> dict[str, Any]:
    return {"place": {"fn": body, "args": {"order": {"type": "str"}, "qty": {"type": "int"}},
                      "returns": {"order": {"type": "str"}, "serial": {"type": "int"}},
                      "effect": "write", **entry}}


def place(gate: Gate, step: str = "step-1", **options: Any) -> dict[str, Any]:
    return dict(gate.call_tool("place", dict(ARGS), run_id="run-1", step_id=step, **options))


@pytest.fixture(autouse=True)
def no_secret_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_SECRET, raising=False)
    monkeypatch.delenv(ENV_OLD_SECRETS, raising=False)


def key_file_store(tmp_path: pathlib.Path, body: Body) -> tuple[pathlib.Path, dict[str, Any]]:
    """A SQLite store keyed by its key file, with one write done under it."""
    path = tmp_path / "writes.sqlite"
    before = Gate(table(body), scope={"reversible_write"}, store=path)
    first = place(before)
    assert first["ok"]
    before.store.close()
    return path, first


def test_a_secret_moved_from_the_key_file_to_the_environment_is_refused_in_one_line(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's advice followed half-way: ``AGTOOL_SECRET`` set over a store keyed by its
    key file. The gate is refused, naming both secrets' fingerprints and sources, and the
    done write is never run again."""
    body = Body()
    path, _ = key_file_store(tmp_path, body)
    monkeypatch.setenv(ENV_SECRET, NEW)
    with pytest.raises(SecretMismatch) as refused:
        Gate(table(body), scope={"reversible_write"}, store=path)
    message = str(refused.value)
    assert "\n" not in message
    assert "the key file" in message
    assert ENV_SECRET in message
    assert "old_secrets" in message
    assert body.runs == 1


def test_two_services_with_different_secrets_on_one_store_the_second_is_refused(
        tmp_path: pathlib.Path) -> None:
    """Two services configured with different secrets over one store: the second is refused,
    never let in to run the first one's writes again."""
    path = tmp_path / "writes.sqlite"
    body = Body()
    first = Gate(table(body), scope={"reversible_write"}, store=path, secret=NEW)
    assert place(first)["ok"]
    with pytest.raises(SecretMismatch):
        Gate(table(body), scope={"reversible_write"}, store=path, secret=OTHER)
    assert body.runs == 1


def test_two_services_with_different_secrets_on_postgres_the_second_is_refused() -> None:
    """The same on a PostgreSQL store several machines share."""
    url = postgres_url()
    with postgres_store(url) as store:
        body = Body()
        assert place(Gate(table(body), scope={"reversible_write"}, store=store,
                          secret=NEW))["ok"]
        other_object = PostgresStore(url, table=store.table)
        try:
            with pytest.raises(SecretMismatch):
                Gate(table(body), scope={"reversible_write"}, store=other_object,
                     secret=OTHER)
        finally:
            other_object.close()
        assert body.runs == 1


def read_key_file(path: pathlib.Path) -> bytes:
    return key_file_secret(f"{path}.key")


def test_given_the_old_secret_earlier_keys_are_found_and_new_ones_use_the_new(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``old_secrets=[the key file's]``: the done write replays (not run again), an
    unknown one stays unknown, and a new write is keyed with the new secret."""
    body = Body()
    path, first = key_file_store(tmp_path, body)
    old = read_key_file(path)
    monkeypatch.setenv(ENV_SECRET, NEW)
    gate = Gate(table(body), scope={"reversible_write"}, store=path, old_secrets=[old])
    assert place(gate) == first
    assert body.runs == 1
    assert place(gate, "step-2")["ok"]
    assert body.runs == 2
    new_key = gate.idempotency_key("place", ARGS, "run-1", "step-2")
    assert new_key is not None
    assert gate.store.lookup(new_key) is not None  # made with the new secret


def test_an_unknown_write_made_under_the_old_secret_stays_unknown(
        tmp_path: pathlib.Path) -> None:
    """An interrupted write under the old secret: after rotation it still answers
    ``write:unknown``, never runs a second time."""
    path = tmp_path / "writes.sqlite"

    def interrupted(order: str, qty: int) -> dict[str, Any]:
        raise KeyboardInterrupt

    before = Gate(table(Body()) | {"place": table(Body())["place"] | {"fn": interrupted}},
                  scope={"reversible_write"}, store=path, secret=OTHER)
    with pytest.raises(KeyboardInterrupt):
        place(before)
    body = Body()
    after = Gate(table(body), scope={"reversible_write"}, store=path, secret=NEW,
                 old_secrets=[OTHER])
    assert place(after)["error"] == "write:unknown"
    assert body.runs == 0


def test_old_secrets_from_the_environment(tmp_path: pathlib.Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``AGTOOL_OLD_SECRETS`` (comma-separated) is read as ``old_secrets=``."""
    path = tmp_path / "writes.sqlite"
    body = Body()
    first = place(Gate(table(body), scope={"reversible_write"}, store=path, secret=OTHER))
    monkeypatch.setenv(ENV_OLD_SECRETS, f"unrelated-secret-0123456789,{OTHER}")
    gate = Gate(table(body), scope={"reversible_write"}, store=path, secret=NEW)
    assert place(gate) == first
    assert body.runs == 1


def test_approvals_made_with_the_old_secret_are_honoured_once_and_bound_as_before(
        tmp_path: pathlib.Path) -> None:
    """An approval signed with the old secret still lets its exact call through after the
    rotation, once; for other args it is refused."""
    path = tmp_path / "writes.sqlite"
    body = Body()
    approve = Approver(OTHER).approve("place", ARGS, "alice", run_id="run-1",
                                      step_id="step-1", single_use=True)
    Gate(table(body), scope={"reversible_write"}, store=path, secret=OTHER).store.close()
    gate = Gate(table(body, risk="external_effect"), scope={"external_effect"}, store=path,
                secret=NEW, old_secrets=[OTHER])
    assert place(gate, approvals=[approve])["ok"]
    other_args = dict(gate.call_tool("place", {"order": "B-2", "qty": 1}, run_id="run-1",
                                     step_id="step-1", approvals=[approve]))
    assert other_args["error"] == "auth:approval"
    without_old = Gate(table(body, risk="external_effect"), scope={"external_effect"},
                       secret=NEW)
    assert place(without_old, approvals=[approve])["error"] == "auth:approval"


def test_rekey_moves_the_store_to_the_new_secret(tmp_path: pathlib.Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``agtool writes rekey``: afterwards the new secret alone opens the store and finds
    the write made with the key file's secret."""
    body = Body()
    path, first = key_file_store(tmp_path, body)
    monkeypatch.setenv(ENV_SECRET, NEW)
    assert main(["writes", "rekey", "--store", str(path)]) == 0
    assert "rekeyed" in capsys.readouterr().out
    pathlib.Path(f"{path}.key").unlink()  # the old secret is nowhere but sealed in the store
    gate = Gate(table(body), scope={"reversible_write"}, store=path)
    assert place(gate) == first
    assert body.runs == 1


def test_a_tampered_seal_opens_nothing(tmp_path: pathlib.Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A sealed old secret with one byte changed is not opened: the store is refused."""
    body = Body()
    path, _ = key_file_store(tmp_path, body)
    monkeypatch.setenv(ENV_SECRET, NEW)
    assert main(["writes", "rekey", "--store", str(path)]) == 0
    with sqlite3.connect(path) as db:
        name, value = db.execute(
            "SELECT name, value FROM agtool_marks WHERE name LIKE 'sealed:%'").fetchone()
        flipped = value[:40] + ("0" if value[40] != "0" else "1") + value[41:]
        db.execute("UPDATE agtool_marks SET value = ? WHERE name = ?", (flipped, name))
    with pytest.raises(SecretMismatch):
        Gate(table(body), scope={"reversible_write"}, store=path)


@pytest.mark.parametrize("content", [b"", b"short", b"x" * 15])
def test_a_malformed_key_file_is_one_line(tmp_path: pathlib.Path, content: bytes) -> None:
    """A key file under 16 bytes is refused in one line naming it."""
    path = tmp_path / "writes.sqlite"
    Gate({}, store=path).store.close()
    pathlib.Path(f"{path}.key").write_bytes(content)
    with pytest.raises(StoreRefused) as refused:
        Gate(table(Body()), scope={"reversible_write"}, store=path)
    assert "\n" not in str(refused.value)
    assert ".key" in str(refused.value)


def test_an_emptied_store_file_is_refused_never_opened_as_new(tmp_path: pathlib.Path) -> None:
    """A store file truncated to 0 bytes beside its key file: refused in one line (its key
    file keyed another store), and the done write never runs again."""
    body = Body()
    path, _ = key_file_store(tmp_path, body)
    path.write_bytes(b"")
    for suffix in ("-wal", "-shm"):
        pathlib.Path(f"{path}{suffix}").unlink(missing_ok=True)
    with pytest.raises(StoreRefused) as refused:
        Gate(table(body), scope={"reversible_write"}, store=path)
    assert "\n" not in str(refused.value)
    assert "emptied" in str(refused.value)
    assert body.runs == 1


def test_a_store_file_without_its_key_file_is_refused(tmp_path: pathlib.Path) -> None:
    """A store whose key file is gone: refused in one line, and no new key file is made."""
    body = Body()
    path, _ = key_file_store(tmp_path, body)
    pathlib.Path(f"{path}.key").unlink()
    with pytest.raises(StoreRefused) as refused:
        Gate(table(body), scope={"reversible_write"}, store=path)
    assert "missing" in str(refused.value)
    assert not pathlib.Path(f"{path}.key").exists()
    assert body.runs == 1


def test_an_operator_sees_the_refusal_as_one_line_and_exit_2(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``agtool writes rekey`` over a store whose key file is damaged: one line, status 2."""
    path, _ = key_file_store(tmp_path, Body())
    monkeypatch.setenv(ENV_SECRET, NEW)
    pathlib.Path(f"{path}.key").write_bytes(b"short")
    assert main(["writes", "rekey", "--store", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert ".key" in err


@pytest.mark.slow
def test_mcp_serve_over_a_damaged_key_file_is_one_line_and_exit_2(
        tmp_path: pathlib.Path) -> None:
    """``agtool mcp serve --store`` whose key file is under 16 bytes: one line, status 2,
    no traceback."""
    path, _ = key_file_store(tmp_path, Body())
    pathlib.Path(f"{path}.key").write_bytes(b"short")
    done = subprocess.run([sys.executable, "-m", "agtool._cli", "mcp", "serve",  # noqa: S603
                           "--table", "agtool.tools:TOOLS", "--store",
                           str(path)], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
