"""Owners where services really run: replicas sharing a hostname in PID namespaces of their
own, a container restarted as PID 1, PIDs reused, and processes that are gone.

The replica tests start real processes in real PID namespaces (``unshare --pid
--fork --mount-proc``, which needs root, as CI runs); each writes through a
real gate over one SQLite file, and body runs are counted from a file the body
appends to, never from the gate's own counters.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
from typing import Any

import pytest
from _owners import exited_owner

from agtool import Gate
from agtool._store import SqliteStore, new_owner, owner_alive
from agtool._store.owners import parse_owner, start_time

WORKER = str(pathlib.Path(__file__).parent.parent / "_ns_worker.py")
#: How long a test waits for a worker to reach its body before it gives up (a hang guard).
PATIENCE = 60.0


def _namespaces_usable() -> str:
    if shutil.which("unshare") is None:
        return "no unshare(1) on this machine"
    if os.geteuid() != 0:
        return "PID namespaces need root here (CI runs as root)"
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],  # noqa: S607
                          capture_output=True, check=False)
    return "" if done.returncode == 0 else f"unshare failed: {done.stderr.decode()[:200]}"


NO_NAMESPACES = _namespaces_usable()
needs_namespaces = pytest.mark.skipif(bool(NO_NAMESPACES), reason=NO_NAMESPACES or "usable")


def in_namespace(*argv: str, depth: int = 0) -> list[str]:
    """A command run in a fresh PID namespace; ``depth`` wrappers first, so its PID is
    ``depth + 1`` there (replicas whose PIDs differ, as a sidecar or a shell makes them)."""
    command = [sys.executable, *argv]
    for _ in range(depth):
        command = [sys.executable, "-c", "import subprocess, sys; "
                   f"sys.exit(subprocess.call({command!r}))"]
    return ["unshare", "--pid", "--fork", "--mount-proc", *command]


def worker(store: pathlib.Path, runs: pathlib.Path, mode: str, *extra: str,
           depth: int = 0) -> list[str]:
    return in_namespace(WORKER, str(store), str(runs), mode, *extra, depth=depth)


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True,  # noqa: S603 - our worker
                          timeout=PATIENCE, check=False)


def answer(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    line: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return line


def wait_for_runs(runs: pathlib.Path, count: int) -> None:
    deadline = time.monotonic() + PATIENCE
    while body_runs(runs) < count:
        assert time.monotonic() < deadline, "the worker never reached its body"
        time.sleep(0.01)


def body_runs(runs: pathlib.Path) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


@pytest.mark.slow
@needs_namespaces
def test_replicas_sharing_a_hostname_never_take_each_others_live_owner_for_dead(
        tmp_path: pathlib.Path) -> None:
    """Two replicas on one store and one hostname, each in its own PID namespace: while one
    runs the charge, the other is told it is in progress (never takes it over and charges
    again), and once it is done the other is answered its outcome."""
    store, runs = tmp_path / "writes.sqlite", tmp_path / "runs"
    first = subprocess.Popen(worker(store, runs, "hold", depth=1),  # noqa: S603 - our worker
                             stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for_runs(runs, 1)
        second = answer(run(worker(store, runs, "fast")))
        assert second["pid"] == 1  # and the first is PID 2 of its own namespace
        assert second["envelope"]["error"] == "write:in_progress"
        assert body_runs(runs) == 1
    finally:
        (tmp_path / "runs.go").touch()
        out, _err = first.communicate(timeout=PATIENCE)
    held = json.loads(out.strip().splitlines()[-1])
    assert held["pid"] == 2
    assert held["envelope"] == {"ok": True, "value": {"card": "c-1", "cents": 500},
                                "error": ""}
    again = answer(run(worker(store, runs, "fast")))
    assert again["envelope"] == held["envelope"]
    assert body_runs(runs) == 1


@pytest.mark.slow
@needs_namespaces
def test_a_container_restarted_as_pid_1_sees_its_dead_predecessor_as_gone(
        tmp_path: pathlib.Path) -> None:
    """A PID 1 that dies mid-charge, and a new PID 1 in a fresh namespace after it: the key
    answers ``write:unknown`` and is listed unknown, not ``write:in_progress`` for ever (its
    predecessor is not taken for itself); the charge is never run again."""
    store, runs = tmp_path / "writes.sqlite", tmp_path / "runs"
    lease = "0.3"  # where nothing can be seen (another namespace), the lease decides
    died = run(worker(store, runs, "die", lease))
    assert died.returncode == 3, died.stderr
    assert body_runs(runs) == 1
    time.sleep(float(lease) * 2)  # past the lease, as a restart takes (not an assertion)
    restarted = answer(run(worker(store, runs, "plain", lease)))
    assert restarted["pid"] == 1
    assert restarted["envelope"]["error"] == "write:unknown"
    pending = SqliteStore(store)
    try:
        assert [entry.state for entry in pending.pending()] == ["unknown"]
    finally:
        pending.close()
    assert body_runs(runs) == 1


def test_an_owner_of_a_process_that_exited_is_dead_and_this_one_alive() -> None:
    """A claim of an exited process of this host and namespace is dead; one of this process,
    whatever claim made it, is alive."""
    assert owner_alive(exited_owner()) is False
    assert owner_alive(new_owner()) is True
    assert owner_alive(new_owner()) is True


def test_a_reused_pid_is_not_its_predecessor() -> None:
    """An owner naming a live process's PID with another start time (the PID was reused) is
    dead; with the live process's own start time it is alive."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        named = parse_owner(new_owner())
        assert named is not None
        assert named.start
        fields = [named.host, str(child.pid), "another-process", "claim", named.boot,
                  named.pid_ns]
        began = start_time(child.pid)
        assert owner_alive(":".join([*fields, began])) is True
        assert owner_alive(":".join([*fields, str(int(began) - 1)])) is False
    finally:
        child.kill()
        child.wait()


def test_this_pid_under_another_process_token_is_a_predecessor() -> None:
    """An owner with this process's boot, namespace and PID but another process token was
    made by what ran here before (an exec, or a PID 1 restarted in a reused namespace)."""
    named = parse_owner(new_owner())
    assert named is not None
    owner = ":".join([named.host, str(named.pid), "not-this-process", "claim", named.boot,
                      named.pid_ns, named.start])
    assert owner_alive(owner) is False


@pytest.mark.parametrize("owner", [
    "another-host.example:4242:far",  # named before owners had these fields
    "h:1:p:c:another-boot-id:4026531836:100",  # another machine (or boot)
])
def test_an_owner_nothing_can_be_seen_of_is_left_to_its_lease(owner: str) -> None:
    """An owner of another boot, or of an old name, has no liveness here: its lease decides."""
    assert owner_alive(owner) is None


def test_another_namespace_is_left_to_the_lease() -> None:
    """An owner in another PID namespace of this boot: its PID says nothing here."""
    named = parse_owner(new_owner())
    assert named is not None
    owner = ":".join([named.host, "1", "p", "c", named.boot, "1", named.start])
    assert owner_alive(owner) is None


def test_a_forked_child_is_an_owner_of_its_own() -> None:
    """A child forked from this process names owners with its own PID and process token: its
    parent's claims are not its own, and its claims are not its parent's."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, new_owner().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = parse_owner(os.read(read, 4096).decode())
    os.close(read)
    os.close(write)
    mine = parse_owner(new_owner())
    assert child is not None
    assert mine is not None
    assert (child.pid, child.process) != (mine.pid, mine.process)
    assert child.process != mine.process


def test_a_gate_over_a_store_sees_an_exited_owner_as_unknown(tmp_path: pathlib.Path) -> None:
    """Through a gate: a key claimed by a process that exited reads unknown, never pending."""
    store = SqliteStore(tmp_path / "w.sqlite")
    assert store.claim("k", "t", "d", exited_owner(), 300.0).state == "run"
    assert store.claim("k", "t", "d", new_owner(), 300.0).state == "unknown"
    store.close()
    gate = Gate({}, store=tmp_path / "w.sqlite")
    assert [entry.state for entry in gate.store.pending()] == ["unknown"]
