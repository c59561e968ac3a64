"""PostgresStore as separate machines use it: processes racing on one database, each with
its own connection, a process killed inside a body, a connection cut under the store.

The races and the kill go through a real ``Gate(store=PostgresStore(url, table=...))`` in
each process; an owner on another host, which a gate on this machine cannot be, is played
on the store directly with the gate's protocol (claim, run the body, finish). Bodies
append one line to a file before they answer, so body runs are counted from the file,
not asked of the gate or the store.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
import random
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest
from _pg import drop_table, new_table, own_table, postgres_url
from _race import race

import agtool
from agtool import Gate
from agtool._store import new_owner
from agtool._store.postgres import PostgresStore

#: The secret of every gate on the test database, in every process: digests must agree.
SECRET = "test-postgres-secret-0123456789"  # noqa: S105 - a test's own secret
#: What a gate over a shared store is given: a server store needs an explicit secret.
GATE_OPTIONS: dict[str, Any] = {"secret": SECRET}

SPAWN = multiprocessing.get_context("spawn")
WAIT = 60.0  # how long a worker or the test waits for something that must happen


@pytest.fixture(scope="module")
def url() -> str:
    return postgres_url()


@pytest.fixture
def table(url: str) -> Any:
    with own_table(url) as name:
        yield name


def body_runs(log: pathlib.Path) -> list[list[str]]:
    """The body runs the log holds, one ``[key, pid]`` per run."""
    return [line.split() for line in log.read_text("utf-8").splitlines()] if log.exists() else []


# -- In worker processes (spawned: they import only this module's imports) ------------------


def write_once(store: PostgresStore, key: str, owner: str, log: str, hang: bool = False,
               lease: float = 60.0) -> dict[str, Any]:
    """What the gate does for one write call: own the key and run the body, or wait for
    the owner's outcome. The body logs its run first; ``hang`` keeps it running."""
    deadline = time.monotonic() + WAIT
    while True:
        claim = store.claim(key, "place", "digest-1", owner, lease)
        if claim.state == "run":
            with open(log, "a", encoding="utf-8") as out:
                out.write(f"{key} {os.getpid()}\n")
            while hang:
                time.sleep(1)
            outcome = {"ok": True, "value": {"key": key, "pid": os.getpid()}, "error": ""}
            if not store.finish(key, owner, outcome):
                return {"ok": False, "value": None, "error": "write:not_recorded"}
            return outcome
        if claim.state == "done":
            assert claim.outcome is not None
            return claim.outcome
        if claim.state != "pending" or time.monotonic() > deadline:
            return {"ok": False, "value": None, "error": f"write:{claim.state}"}
        time.sleep(0.01)  # another owner's body is running: wait for its outcome


def _gate(url: str, table: str, log: str, hang: bool = False) -> agtool.Gate:
    """A gate over the shared table whose write body logs its run (and may hang in it)."""

    def place_order(order: str, qty: int) -> dict[str, Any]:
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"{order} {os.getpid()}\n")
        while hang:
            time.sleep(1)
        time.sleep(0.02)  # long enough that racers find the key pending
        return {"order": order, "qty": qty, "pid": os.getpid()}

    tools = {"place_order": {
        "fn": place_order,
        "args": {"order": {"type": "str"}, "qty": {"type": "int", "min": 1}},
        "returns": {"order": {"type": "str"}, "qty": {"type": "int"}, "pid": {"type": "int"}},
        "effect": "write", "key_args": ["order"]}}
    return agtool.Gate(tools, scope={"reversible_write"}, pending_wait=WAIT,
                       store=PostgresStore(url, table=table), **GATE_OPTIONS)


def order(gate: agtool.Gate, name: str) -> dict[str, Any]:
    return dict(gate.call_tool("place_order", {"order": name, "qty": 1}, run_id="run-pg",
                               step_id="step-1"))


def race_worker(url: str, table: str, keys: list[str], log: str, barrier: Any,
                results: Any) -> None:
    try:
        gate = _gate(url, table, log)  # its own connections, as another machine's
        random.shuffle(keys)
        barrier.wait(timeout=WAIT)
        results.put({key: order(gate, key) for key in keys})
        gate.store.close()
    except BaseException as exc:  # the test must hear of it, not wait for it
        barrier.abort()
        results.put({"crash": f"{type(exc).__name__}: {exc}"})


def gate_hang_worker(url: str, table: str, key: str, log: str) -> None:
    order(_gate(url, table, log, hang=True), key)


def gate_worker(url: str, table: str, key: str, log: str, results: Any) -> None:
    gate = _gate(url, table, log)
    results.put(order(gate, key))
    gate.store.close()


def hang_worker(url: str, table: str, key: str, log: str, owner: str, lease: float) -> None:
    """Claim ``key`` (as ``owner``, or as this process) and hang in its body."""
    store = PostgresStore(url, table=table)
    write_once(store, key, owner or new_owner(), log, hang=True, lease=lease)


def in_new_process(url: str, table: str, key: str, log: pathlib.Path) -> dict[str, Any]:
    """One gate call writing ``key`` from a fresh process: the envelope it answered."""
    results = SPAWN.Queue()
    process = SPAWN.Process(target=gate_worker, args=(url, table, key, str(log), results))
    process.start()
    answer: dict[str, Any] = results.get(timeout=WAIT)
    process.join(WAIT)
    return answer


# -- Races --------------------------------------------------------------------------------


@pytest.mark.slow
def test_processes_racing_on_one_database_run_each_body_once(url: str, table: str,
                                                             tmp_path: pathlib.Path) -> None:
    """Four processes, each with its own gate and connections, make the same ten writes in
    their own orders at once: each body runs exactly once, and every process's gate answers
    that run's outcome."""
    processes, keys = 4, [f"order-{i}" for i in range(10)]
    log = tmp_path / "bodies.log"
    PostgresStore(url, table=table).close()  # the table exists before the race
    barrier, results = SPAWN.Barrier(processes), SPAWN.Queue()
    workers = [SPAWN.Process(target=race_worker,
                             args=(url, table, list(keys), str(log), barrier, results))
               for _ in range(processes)]
    for worker in workers:
        worker.start()
    answers = [results.get(timeout=2 * WAIT) for _ in workers]
    for worker in workers:
        worker.join(WAIT)
    assert [answer.get("crash") for answer in answers] == [None] * processes

    runs = body_runs(log)
    assert sorted(key for key, _ in runs) == sorted(keys)  # one run per key, no more
    ran_in = {key: int(pid) for key, pid in runs}
    for answer in answers:
        assert {key: (answer[key]["ok"], answer[key]["value"]) for key in keys} == {
            key: (True, {"order": key, "qty": 1, "pid": ran_in[key]}) for key in keys}


def test_threads_sharing_one_store_run_each_body_once(url: str, table: str,
                                                      tmp_path: pathlib.Path) -> None:
    """Sixteen threads on one store with a pool of two connections: one body run per key."""
    store = PostgresStore(url, table=table, pool_size=2)
    log, keys = tmp_path / "bodies.log", [f"k{i}" for i in range(5)]
    owners = [new_owner() for _ in range(16)]
    answers = race(16, lambda i: {key: write_once(store, key, owners[i], str(log))
                                  for key in keys})
    store.close()
    assert sorted(key for key, _ in body_runs(log)) == keys
    assert len(answers) == 16
    assert all(answer == answers[0] for answer in answers)
    assert all(outcome["ok"] for outcome in answers[0].values())


def test_stores_open_their_table_at_once_without_failing(url: str) -> None:
    """Eight stores made at the same moment on a table that does not exist yet all open it
    (``CREATE TABLE IF NOT EXISTS`` alone fails for some of them)."""
    name = new_table()
    opened: list[PostgresStore] = []
    try:
        race(8, lambda _: opened.append(PostgresStore(url, table=name)))  # raises what failed
        assert [store.claim("k", "t", "d", new_owner(), 60).state for store in opened
                ].count("run") == 1
    finally:
        for store in opened:
            store.close()
        drop_table(url, name)


# -- A process killed inside a body --------------------------------------------------------


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


def killed_in_body(target: Any, args: tuple[Any, ...], log: pathlib.Path) -> None:
    """Start ``target``, wait until its body has logged its run, and ``kill -9`` it there."""
    worker = SPAWN.Process(target=target, args=args)
    worker.start()
    wait_for(lambda: len(body_runs(log)) == 1, "the body started")
    assert worker.pid is not None
    os.kill(worker.pid, signal.SIGKILL)
    worker.join(WAIT)
    assert worker.exitcode == -signal.SIGKILL


@pytest.mark.slow
def test_a_gate_killed_in_a_body_leaves_the_write_unknown_until_resolved(
        url: str, table: str, tmp_path: pathlib.Path) -> None:
    """``kill -9`` inside a body: the key reads unknown (its owner is dead), every later
    call of that write, from any process, answers ``write:unknown`` without running the body,
    and once an operator resolves the key, every later call answers that outcome."""
    log = tmp_path / "bodies.log"
    killed_in_body(gate_hang_worker, (url, table, "PAY-1", str(log)), log)

    store = PostgresStore(url, table=table)
    [stuck] = store.pending()
    assert stuck.state == "unknown"
    for _ in range(2):
        answer = in_new_process(url, table, "PAY-1", log)
        assert (answer["ok"], answer["error"]) == (False, "write:unknown")
    assert len(body_runs(log)) == 1  # never run again

    checked = {"ok": True, "value": {"order": "PAY-1", "qty": 1, "pid": 0}, "error": ""}
    assert store.resolve(stuck.key, checked)
    assert store.pending() == []
    answer = in_new_process(url, table, "PAY-1", log)
    assert (answer["ok"], answer["value"]) == (True, checked["value"])
    assert len(body_runs(log)) == 1
    store.close()


@pytest.mark.slow
def test_an_owner_elsewhere_killed_in_a_body_is_unknown_once_its_lease_ends(
        url: str, table: str, tmp_path: pathlib.Path) -> None:
    """An owner on another host cannot be asked whether it runs: killed inside its body, its
    key reads unknown once the lease ran out (by the database's clock), is never run again,
    and an operator can resolve or forget it."""
    log, key = tmp_path / "bodies.log", "pay-2"
    owner = f"another-host.example:1:{uuid.uuid4().hex[:8]}"
    killed_in_body(hang_worker, (url, table, key, str(log), owner, 1.0), log)

    store = PostgresStore(url, table=table)
    wait_for(lambda: getattr(store.lookup(key), "state", "") == "unknown",
             "the lease ran out")
    assert [(write.key, write.state, write.owner) for write in store.pending()] == [
        (key, "unknown", owner)]
    for _ in range(2):
        assert write_once(store, key, new_owner(), str(log))["error"] == "write:unknown"
    assert len(body_runs(log)) == 1

    resolved = {"ok": True, "value": {"key": key, "checked": "by hand"}, "error": ""}
    assert store.resolve(key, resolved)
    assert write_once(store, key, new_owner(), str(log)) == resolved
    assert store.forget(key)
    assert write_once(store, key, new_owner(), str(log))["ok"]  # forgotten: runs anew
    assert len(body_runs(log)) == 2
    store.close()


# -- The connection ----------------------------------------------------------------------


def test_a_cut_connection_is_replaced_once(url: str, table: str) -> None:
    """The server ending the store's connection (a restart, an idle timeout) costs nothing:
    the next call reconnects and answers."""
    name = f"agtool-test-{uuid.uuid4().hex[:12]}"
    tagged = url + ("&" if "?" in url else "?") + f"application_name={name}"
    store = PostgresStore(tagged, table=table, pool_size=1)
    owner = new_owner()
    assert store.claim("k", "place", "d", owner, 60).state == "run"
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        cut = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                            " WHERE application_name = %s", (name,)).fetchone()
    assert cut == (1,)
    assert store.finish("k", owner, {"ok": True, "value": 1, "error": ""})
    assert store.claim("k", "place", "d", owner, 60).state == "done"
    store.close()


def test_an_unreachable_server_raises(url: str) -> None:
    """No server where the url points: making the store raises psycopg's error at once."""
    import psycopg

    with pytest.raises(psycopg.OperationalError):
        PostgresStore("postgresql://nobody@127.0.0.1:1/none", connect_timeout=2)


def test_a_closed_store_refuses_calls(url: str, table: str) -> None:
    """After ``close`` a call raises instead of opening a connection again."""
    store = PostgresStore(url, table=table)
    store.close()
    with pytest.raises(ValueError, match="closed"):
        store.lookup("k")


@pytest.mark.parametrize("name", ["", "Writes", "writes; DROP TABLE x", "a-b", "1abc",
                                  "x" * 49, 'q"uote'])
def test_a_table_name_that_is_not_a_plain_name_is_refused(url: str, name: str) -> None:
    """``table`` is a lowercase SQL name: anything else is a ``ValueError`` naming it."""
    with pytest.raises(ValueError, match="table"):
        PostgresStore(url, table=name)


@pytest.mark.parametrize("size", [0, -1, 1.5, True, "4"])
def test_a_pool_size_that_is_not_a_positive_int_is_refused(url: str, size: Any) -> None:
    """``pool_size`` is a count of connections: anything else is a ``ValueError`` naming it."""
    with pytest.raises(ValueError, match="pool_size"):
        PostgresStore(url, pool_size=size)


def test_stores_on_two_tables_are_separate(url: str) -> None:
    """Two tables in one database are two stores: a key in one is new in the other."""
    with own_table(url) as one, own_table(url) as other:
        left, right = PostgresStore(url, table=one), PostgresStore(url, table=other)
        assert left.claim("k", "t", "d", new_owner(), 60).state == "run"
        assert right.claim("k", "t", "d", new_owner(), 60).state == "run"
        assert left.use_once("tok", 4e9)
        assert right.use_once("tok", 4e9)
        left.close()
        right.close()


def test_repr_names_the_table_not_the_url(url: str, table: str) -> None:
    """The store's repr never shows its url, which may hold a password."""
    store = PostgresStore(url, table=table)
    assert repr(store) == f"PostgresStore(table={table!r})"
    assert url not in repr(store)
    store.close()


@pytest.mark.slow
def test_agtool_imports_without_psycopg() -> None:
    """``import agtool`` loads no psycopg: it is needed only when a PostgresStore is made."""
    check = ("import sys, agtool, agtool._store.postgres; "
             "assert 'psycopg' not in sys.modules, sorted(m for m in sys.modules if 'psy' in m)")
    subprocess.run([sys.executable, "-c", check], check=True, timeout=WAIT,  # noqa: S603
                   env={**os.environ, "PYTHONPATH": str(pathlib.Path(__file__).parents[2])})


def test_a_gate_given_a_url_and_the_writes_command_share_one_postgres_store(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``Gate(store="postgresql://...")`` keeps its writes in Postgres, and an operator's
    ``agtool writes list|resolve`` on the same URL settles a key left unknown there."""
    import psycopg

    from agtool._cli import main as agtool_main

    url = postgres_url()
    schema = f"s_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(f"CREATE SCHEMA {schema}")
    scoped = f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    made: list[str] = []

    def pay(order: str) -> dict[str, Any]:
        made.append(order)
        raise KeyboardInterrupt  # the payment was made; its outcome never comes back

    table = {"pay": {"fn": pay, "effect": "write", "args": {"order": {"type": "str"}},
                     "returns": {"receipt": {"type": "str"}}}}
    try:
        gate = Gate(table, scope={"reversible_write"}, store=scoped, **GATE_OPTIONS)
        with pytest.raises(KeyboardInterrupt):
            gate.call_tool("pay", {"order": "A-1"}, run_id="r", step_id="s")
        assert gate.call_tool("pay", {"order": "A-1"}, run_id="r", step_id="s")["error"] == (
            "write:unknown")
        assert agtool_main(["writes", "list", "--store", scoped, "--json"]) == 0
        listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        key = gate.idempotency_key("pay", {"order": "A-1"}, "r", "s")
        assert [(entry["key"], entry["state"]) for entry in listed] == [(key, "unknown")]
        assert key is not None
        assert agtool_main(["writes", "resolve", "--store", scoped, key,
                            "--value", '{"receipt": "r-1"}']) == 0
        assert gate.call_tool("pay", {"order": "A-1"}, run_id="r", step_id="s") == {
            "ok": True, "value": {"receipt": "r-1"}, "error": ""}
        assert made == ["A-1"]
        gate.store.close()
    finally:
        with psycopg.connect(url, autocommit=True) as db:
            db.execute(f"DROP SCHEMA {schema} CASCADE")
