"""Approvals that cannot be forged, and digests that give nothing away without the gate's key.

The oracle throughout is the body's own count of its runs (it must stay 0 for
every forgery) and the reason the gate answers (``auth:approval``). Tokens are
taken apart and put together here by their documented format (a prefix, the
base64url of the canonical JSON fields, the base64url of the HMAC), not with
the library's own helpers.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import logging
import multiprocessing
import os
import sqlite3
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _bodies import CountingBody
from _race import race
from hypothesis import given
from hypothesis import strategies as st

from agtool import Approval, Approver, CallRecord, Gate, SqliteStore
from agtool._keys import key_file_secret
from agtool._memo import cache_key

SECRET = "test-approvals-secret-0123456789"  # noqa: S105 - a test's own secret
OTHER_SECRET = "another-secret-of-somebody-else"  # noqa: S105 - a test's own secret
PREFIX = "agtool-approval-1"
SCOPE = frozenset({"irreversible", "external_effect", "read_sensitive"})
PAY_ARGS: dict[str, Any] = {
    "to": {"type": "str"},
    "amount": {"type": "int"},
    "pin": {"type": "str", "sensitive": True, "pattern": "[0-9]{4}"},
    "memo": {"type": "dict", "required": False},
}
ARGS: dict[str, Any] = {"to": "ann", "amount": 10, "pin": "4831"}
RUN, STEP = "run-1", "step-1"


class Body(CountingBody):
    def default(self, kwargs: dict[str, Any]) -> Any:
        return {"done": True}


def table(body: Body, other: Body | None = None) -> dict[str, Any]:
    def tool(fn: Body, risk: str) -> dict[str, Any]:
        return {"fn": fn, "args": PAY_ARGS, "returns": {"done": {"type": "bool"}},
                "effect": "write", "risk": risk}
    return {"pay": tool(body, "irreversible"), "refund": tool(other or Body(), "irreversible"),
            "look": {"fn": Body(), "args": PAY_ARGS, "returns": {"done": {"type": "bool"}},
                     "risk": "read_sensitive"}}


def gate_of(body: Body, **options: Any) -> Gate:
    return Gate(table(body), scope=SCOPE, **{"secret": SECRET, **options})


def pay(gate: Gate, args: dict[str, Any], approvals: list[Any], run_id: str = RUN,
        step_id: str = STEP) -> dict[str, Any]:
    envelope: dict[str, Any] = gate.call_tool("pay", args, run_id=run_id, step_id=step_id,
                                              approvals=approvals)
    return envelope


# -- tokens taken apart and put together, by the documented format --------------------------------

def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def fields_of(token: str) -> dict[str, Any]:
    fields: dict[str, Any] = json.loads(unb64(token.split(".")[1]))
    return fields


def canonical(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def signed_with(key: bytes, fields: dict[str, Any]) -> str:
    """A token of ``fields`` signed with ``key``: the real format, any key."""
    head = f"{PREFIX}.{b64(canonical(fields))}"
    return f"{head}.{b64(hmac.new(key, head.encode(), hashlib.sha256).digest())}"


def resealed(token: str, fields: dict[str, Any]) -> str:
    """``fields`` with the signature of ``token``, which signed other fields."""
    return f"{PREFIX}.{b64(canonical(fields))}.{token.split('.')[2]}"


def plan_of(gate: Gate, args: dict[str, Any]) -> dict[str, Any]:
    plan: dict[str, Any] = gate.call_tool("pay", args, dry_run=True)["value"]
    return plan


#: Keys an attacker might try, none of them the gate's approval key: the secret itself, the
#: sub-key for args digests (derived by the published label), another secret's approval key.
def wrong_keys() -> list[bytes]:
    raw = SECRET.encode()
    return [raw, hmac.digest(raw, b"agtool/args-digest/v1", "sha256"),
            hmac.digest(OTHER_SECRET.encode(), b"agtool/approval-token/v1", "sha256"),
            b"", hashlib.sha256(raw).digest()]


class SubApproval(Approval):
    """A subclass carrying a real token: still not an ``Approval``."""


def attacks(gate: Gate, args: dict[str, Any]) -> dict[str, list[object]]:
    """Every way of approving the call ``pay(args)`` at (RUN, STEP) without a person's approval
    of it, by name: each list must leave the body unrun."""
    plan = plan_of(gate, args)
    other_args = {**args, "amount": args["amount"] + 1}
    genuine_other = gate.approve("pay", other_args, run_id=RUN, step_id=STEP).token
    template = fields_of(genuine_other) | {"args": plan["args_digest"]}
    mutated = gate.approve("pay", other_args)
    object.__setattr__(mutated, "token", signed_with(b"k" * 32, template))
    swapped = gate.approve("pay", other_args)
    object.__setattr__(swapped, "token", genuine_other)
    not_a_str = gate.approve("pay", other_args)
    object.__setattr__(not_a_str, "token", fields_of(genuine_other))
    # Real tokens that almost cover the call, with the one field that keeps them from it
    # changed to what would: the signature they carry signed the old field.
    elsewhere = gate.approve("pay", args, run_id="run-x", step_id="step-x").token
    for_refund = gate.approve("refund", args).token
    expired = Approver(SECRET, clock=lambda: time.time() - 3600).approve(
        "pay", args, expires_in=60).token
    exact = gate.approve("pay", args).token
    changed = {
        "resealed-args": resealed(genuine_other, template),
        "resealed-run": resealed(elsewhere, fields_of(elsewhere) | {"run": RUN}),
        "resealed-step": resealed(elsewhere, fields_of(elsewhere) | {"run": RUN, "step": STEP}),
        "resealed-unbound": resealed(elsewhere, fields_of(elsewhere) | {"run": "", "step": ""}),
        "resealed-tool": resealed(for_refund, fields_of(for_refund) | {"tool": "pay"}),
        "resealed-expiry": resealed(expired, fields_of(expired) | {"exp": None}),
        **{f"resealed-{name}": resealed(exact, fields_of(exact) | {name: value})
           for name, value in (("by", "ops"), ("id", "0" * 32), ("once", True), ("v", 2))},
    }
    return {
        "plan-digest-wrapped": [Approval(plan["args_digest"])],
        "plan-digest-str": [plan["args_digest"]],
        "plan-itself": [plan, json.dumps(plan)],
        "hand-made-unsigned": [f"{PREFIX}.{b64(canonical(template))}."],
        **{f"wrong-key-{number}": [signed_with(key, template)]
           for number, key in enumerate(wrong_keys())},
        "other-secret-approver": [Approver(OTHER_SECRET).approve("pay", args)],
        "subclass": [SubApproval(gate.approve("pay", args).token)],
        "mutated-forged-token": [mutated],
        "mutated-token-of-other-args": [swapped],
        "mutated-token-not-a-str": [not_a_str],
        **{name: [token] for name, token in changed.items()},
        "other-args": [gate.approve("pay", other_args)],
        "other-tool": [gate.approve("refund", args)],
        "other-run": [gate.approve("pay", args, run_id="run-2")],
        "other-step": [gate.approve("pay", args, run_id=RUN, step_id="step-2")],
        "expired": [Approver(SECRET, clock=lambda: time.time() - 3600).approve(
            "pay", args, expires_in=60)],
        "look-alike": [{"token": gate.approve("pay", args).token}],
        "bytes-token": [gate.approve("pay", args).token.encode()],
    }


def test_every_attack_leaves_the_body_unrun() -> None:
    """No forgery, derived token, wrong key, subclass, mutation or token of another call runs the
    body: it stays at 0 runs, every call answers auth:approval; the real approval then runs it."""
    body = Body()
    gate = gate_of(body)
    named = attacks(gate, ARGS)
    assert len(named) > 25
    for name, approvals in named.items():
        assert pay(gate, dict(ARGS), approvals) == {
            "ok": False, "value": None, "error": "auth:approval"}, name
    # All of them at once, too.
    assert pay(gate, dict(ARGS), [a for group in named.values() for a in group])["error"] == (
        "auth:approval")
    assert body.count == 0
    assert pay(gate, dict(ARGS), [gate.approve("pay", ARGS)])["ok"] is True
    assert body.count == 1


pins = st.text("0123456789", min_size=4, max_size=4)
amounts = st.integers(min_value=0, max_value=10**6)


@given(pin=pins, amount=amounts, to=st.text(min_size=1, max_size=8),
       chosen=st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=4),
       data=st.data())
def test_no_body_runs_without_a_valid_approval_of_these_exact_args(
        pin: str, amount: int, to: str, chosen: list[int], data: st.DataObject) -> None:
    """For any args, any mix of attacks (one byte of a real token changed included) leaves the
    body unrun with auth:approval."""
    body = Body()
    gate = gate_of(body)
    args = {"to": to, "amount": amount, "pin": pin}
    named = list(attacks(gate, args).values())
    approvals = [a for number in chosen for a in named[number % len(named)]]
    genuine = gate.approve("pay", args).token
    position = data.draw(st.integers(min_value=0, max_value=len(genuine) - 1), label="position")
    replacement = data.draw(st.sampled_from(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/"), label="char")
    if replacement != genuine[position]:
        approvals.append(genuine[:position] + replacement + genuine[position + 1:])
    assert pay(gate, dict(args), approvals)["error"] == "auth:approval"
    assert body.count == 0


def test_every_single_byte_change_of_a_token_is_refused() -> None:
    """Each character of a real token, changed to each other base64url character (base64's
    spare bits included), no longer approves; the token itself still does."""
    body = Body()
    gate = gate_of(body)
    token = gate.approve("pay", ARGS).token
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    for position, char in enumerate(token):
        for other in alphabet[position % 7::7]:  # a seventh of the alphabet per place
            if other != char:
                changed = token[:position] + other + token[position + 1:]
                assert pay(gate, dict(ARGS), [changed])["error"] == "auth:approval", position
    for cut in (token[:-1], token + "A", token + "=", " " + token, token.replace(".", "..", 1)):
        assert pay(gate, dict(ARGS), [cut])["error"] == "auth:approval"
    assert body.count == 0
    assert pay(gate, dict(ARGS), [token])["ok"] is True


class Money:
    """An object with no canonical form, whose repr hides its value."""

    def __init__(self, cents: int) -> None:
        self.cents = cents

    def __repr__(self) -> str:
        return "Money"


def test_args_without_a_canonical_form_are_never_approved_nor_keyed() -> None:
    """Money(1) approved does not let Money(10**9) run, nor itself: no repr stands in for a
    canonical form, so such args have no digest and no idempotency key."""
    body = Body()
    gate = gate_of(body)
    cheap, dear = {**ARGS, "memo": {"m": Money(1)}}, {**ARGS, "memo": {"m": Money(10**9)}}
    approval = gate.approve("pay", cheap)
    assert approval.args_digest == ""
    assert plan_of(gate, cheap)["args_digest"] == ""
    for args in (dear, cheap):
        assert pay(gate, args, [approval])["error"] == "auth:approval"
    assert body.count == 0
    assert gate.idempotency_key("pay", cheap, RUN, STEP) is None


def test_an_approval_is_a_token_and_its_repr_does_not_show_it() -> None:
    """An Approval carries one str token, read as given (``Approval(token)`` or the bare str);
    its decoded fields are there to show, and its repr leaves the token out."""
    body = Body()
    gate = gate_of(body)
    approval = gate.approve("pay", ARGS, by="ops", run_id=RUN, step_id=STEP, expires_in=600)
    assert isinstance(approval.token, str)
    assert approval.token.startswith(PREFIX + ".")
    assert (approval.tool, approval.by, approval.run_id, approval.step_id) == (
        "pay", "ops", RUN, STEP)
    assert approval.expires_at is not None
    assert approval.expires_at > time.time()
    assert approval.token not in repr(approval)
    assert '"4831"' not in json.dumps(fields_of(approval.token))  # a digest, not the PIN
    assert pay(gate, dict(ARGS), [approval.token])["ok"] is True
    assert pay(gate, dict(ARGS), [Approval(approval.token)], step_id="step-9")["error"] == (
        "auth:approval")
    assert body.count == 1


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "60", True])
def test_a_malformed_expiry_is_refused_when_approving(bad: Any) -> None:
    """expires_in must be a positive finite number of seconds: anything else names itself."""
    with pytest.raises(ValueError, match="expires_in"):
        gate_of(Body()).approve("pay", ARGS, expires_in=bad)


def test_an_approval_within_its_time_covers_and_an_expired_one_does_not() -> None:
    """A token issued an hour ago for a minute covers nothing; one for two hours still does."""
    body = Body()
    gate = gate_of(body)
    hour_ago = Approver(SECRET, clock=lambda: time.time() - 3600)
    expired = hour_ago.approve("pay", ARGS, expires_in=60)
    assert pay(gate, dict(ARGS), [expired])["error"] == "auth:approval"
    assert body.count == 0
    assert pay(gate, dict(ARGS), [hour_ago.approve("pay", ARGS, expires_in=7200)])["ok"]
    assert body.count == 1


def test_a_single_use_approval_lets_one_call_through(tmp_path: Path) -> None:
    """A single-use token runs one step; the same token at another step, or through another
    gate and connection on the same SQLite file, is refused; a reusable one is not spent."""
    body = Body()
    path = tmp_path / "writes.sqlite"
    gate = gate_of(body, store=path)
    once = gate.approve("pay", ARGS, single_use=True, expires_in=600)
    assert once.single_use
    assert pay(gate, dict(ARGS), [once])["ok"] is True
    assert pay(gate, dict(ARGS), [once], step_id="step-2")["error"] == "auth:approval"
    elsewhere = gate_of(body, store=SqliteStore(path))
    assert pay(elsewhere, dict(ARGS), [once], step_id="step-3")["error"] == "auth:approval"
    assert body.count == 1
    never_expires = gate.approve("pay", ARGS, single_use=True)
    assert pay(elsewhere, dict(ARGS), [never_expires], step_id="step-4")["ok"] is True
    assert pay(gate, dict(ARGS), [never_expires], step_id="step-5")["error"] == "auth:approval"
    many = gate.approve("pay", ARGS)
    assert all(pay(gate, dict(ARGS), [many], step_id=f"s{n}")["ok"] for n in range(3))
    assert body.count == 5


def test_a_retry_with_a_spent_single_use_approval_is_answered_its_outcome() -> None:
    """The token is spent when the body is to run, not before the key is looked up: a retry
    of the same step with the same token gets the first outcome, never ``auth:approval``, and
    a refused spend gives the key back (the next call with a fresh approval runs it)."""
    body = Body()
    gate = gate_of(body, store=SqliteStore())
    once = gate.approve("pay", ARGS, single_use=True)
    first = pay(gate, dict(ARGS), [once])
    assert first["ok"] is True
    assert pay(gate, dict(ARGS), [once]) == first  # a retry: replayed, not refused
    assert pay(gate, dict(ARGS), [once], step_id="step-2")["error"] == "auth:approval"
    key = gate.idempotency_key("pay", ARGS, "run-1", "step-2")
    assert key is not None
    assert gate.store.lookup(key) is None  # refused before the body: the key was given back
    assert pay(gate, dict(ARGS), [gate.approve("pay", ARGS)], step_id="step-2")["ok"] is True
    assert body.count == 2


def test_racing_threads_spend_a_single_use_approval_once() -> None:
    """Eight threads with one single-use token, each on its own step: one body run."""
    body = Body()
    gate = gate_of(body, store=SqliteStore())
    once = gate.approve("pay", ARGS, single_use=True)
    answers = race(8, lambda number: pay(gate, dict(ARGS), [once], step_id=f"step-{number}"))
    assert sorted(answer["error"] for answer in answers) == [""] + ["auth:approval"] * 7
    assert body.count == 1


def test_a_single_use_approval_is_refused_by_a_store_that_cannot_spend_it(
        caplog: pytest.LogCaptureFixture) -> None:
    """A store with no use_once (or one that raises) cannot promise one use: refused, logged."""
    class NoUseOnce(SqliteStore):
        use_once = None

    body = Body()
    gate = gate_of(body, store=NoUseOnce())
    once = gate.approve("pay", ARGS, single_use=True)
    with caplog.at_level(logging.ERROR, logger="agtool"):
        assert pay(gate, dict(ARGS), [once])["error"] == "auth:approval"
    assert "use_once" in caplog.text

    class Broken(SqliteStore):
        def use_once(self, token_id: str, expires_at: float) -> bool:
            raise OSError("disk gone")
    broken = gate_of(body, store=Broken())
    assert pay(broken, dict(ARGS), [broken.approve("pay", ARGS, single_use=True)])[
        "error"] == "auth:approval"
    assert body.count == 0


def test_endless_approvals_are_read_only_so_far() -> None:
    """An endless iterable of junk answers auth:approval rather than hanging the gate."""
    body = Body()
    gate = gate_of(body)
    assert pay(gate, dict(ARGS), itertools.repeat("junk"))["error"] == "auth:approval"  # type: ignore[arg-type]
    assert body.count == 0


def test_an_approver_with_the_secret_issues_what_the_gate_accepts() -> None:
    """A separate service holding the secret issues tokens the gate accepts, bound alike; with
    any other secret its tokens cover nothing."""
    body = Body()
    gate = gate_of(body)
    service = Approver(SECRET)
    assert pay(gate, dict(ARGS), [service.approve("pay", ARGS, run_id=RUN, step_id="other")])[
        "error"] == "auth:approval"
    assert pay(gate, dict(ARGS), [Approver(OTHER_SECRET).approve("pay", ARGS)])["error"] == (
        "auth:approval")
    assert body.count == 0
    assert pay(gate, dict(ARGS), [service.approve("pay", ARGS, by="svc")])["ok"] is True
    assert repr(service) == "<Approver>"
    with pytest.raises(ValueError, match="16"):
        Approver("short")


# -- keyed digests: a PIN cannot be found without the secret ---------------------------------------

ALL_PINS = [f"{number:04d}" for number in range(10_000)]


def brute_force(target: object, candidate: Callable[[str], object]) -> list[str]:
    return [pin for pin in ALL_PINS if candidate(pin) == target]


def unkeyed(args: dict[str, Any]) -> str:
    """The digest main took before keys: sha256 of the canonical form's repr."""
    return hashlib.sha256(repr(cache_key("", args)).encode()).hexdigest()


@pytest.mark.slow  # 70,000 digests: about 2 s
def test_a_pin_is_not_found_by_brute_force_from_anything_the_gate_shows(
        tmp_path: Path) -> None:
    """A plan's digest, a record's, the store's column, the idempotency key and a memo key of a
    call with a 4-digit PIN: digesting all 10,000 PINs with public functions of a gate with
    another secret (or no key) finds none of them; with the secret, the same search finds it."""
    pin = "4831"
    args = {**ARGS, "pin": pin}
    records: list[CallRecord] = []
    path = tmp_path / "writes.sqlite"
    victim = Gate(table(Body()), scope=SCOPE, store=path, records=records.append, secret=SECRET)
    shown = {
        "plan": plan_of(victim, args)["args_digest"],
        "key": victim.idempotency_key("pay", args, RUN, STEP),
        "memo": victim.cache_key("look", args, RUN),
    }
    assert pay(victim, dict(args), [victim.approve("pay", args)])["ok"]
    assert victim.call_tool("look", args, run_id=RUN, scope={"read_sensitive"})["ok"]
    assert list(victim.cache) == [shown["memo"]]  # remembered under the keyed key alone
    with sqlite3.connect(path) as db:
        [(column,)] = db.execute("SELECT args_digest FROM agtool_writes").fetchall()
    assert column == shown["plan"]  # the column is the keyed digest of the exact args
    assert repr(pin) not in repr([*shown.values(), column])

    def searches(gate: Gate) -> dict[str, Callable[[str], object]]:
        def with_pin(found: str) -> dict[str, Any]:
            return {**ARGS, "pin": found}
        return {
            "plan": lambda found: plan_of(gate, with_pin(found))["args_digest"],
            "key": lambda found: gate.idempotency_key("pay", with_pin(found), RUN, STEP),
            "memo": lambda found: gate.cache_key("look", with_pin(found), RUN),
        }
    attacker = Gate(table(Body()), scope=SCOPE)
    for what, candidate in searches(attacker).items():
        assert brute_force(shown[what], candidate) == [], what
    assert brute_force(column, lambda found: unkeyed({**ARGS, "pin": found})) == []
    # The record's digest holds no PIN at all: every PIN gives it.
    assert records[-1].args_digest not in (unkeyed(args), "")
    # The control: the very same searches, run by a gate with the victim's secret, succeed.
    insider = Gate(table(Body()), scope=SCOPE, secret=SECRET)
    for what, candidate in searches(insider).items():
        assert brute_force(shown[what], candidate) == [pin], what


# -- where the secret comes from -----------------------------------------------------------------

class ServerStore:
    """A store several machines could share: no file path (a stand-in for a PostgresStore)."""

    dsn = "postgresql://db/agtool"


@pytest.mark.parametrize("store", [ServerStore(), type("Dsn", (), {"path": "postgresql://x/y"})()],
                         ids=["no-path", "dsn-path"])
def test_a_store_that_is_no_sqlite_file_needs_an_explicit_secret(
        store: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without secret= or AGTOOL_SECRET, a gate over a server store is refused when made, with a
    message naming both; with either it is made."""
    monkeypatch.delenv("AGTOOL_SECRET", raising=False)
    with pytest.raises(ValueError, match="secret=") as refused:
        Gate(table(Body()), store=store)  # type: ignore[arg-type]
    assert "AGTOOL_SECRET" in str(refused.value)
    Gate(table(Body()), store=store, secret=SECRET)  # type: ignore[arg-type]
    monkeypatch.setenv("AGTOOL_SECRET", SECRET)
    Gate(table(Body()), store=store)  # type: ignore[arg-type]


@pytest.mark.parametrize("secret", ["", "fifteen-bytes!!", b"\x00" * 15])
def test_a_short_secret_is_refused(secret: str | bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret under 16 bytes, given or in AGTOOL_SECRET, is a ValueError naming where."""
    with pytest.raises(ValueError, match="secret="):
        Gate({}, secret=secret)
    if secret:
        monkeypatch.setenv("AGTOOL_SECRET", secret if isinstance(secret, str) else "x" * 15)
        with pytest.raises(ValueError, match="AGTOOL_SECRET"):
            Gate({})


def test_a_secret_given_or_in_the_environment_makes_gates_agree(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Gates given one secret (bytes or str, or from AGTOOL_SECRET) digest alike and accept each
    other's approvals; gates with their own random secrets do neither."""
    monkeypatch.delenv("AGTOOL_SECRET", raising=False)
    body = Body()
    given_str, given_bytes = gate_of(body), gate_of(body, secret=SECRET.encode())
    monkeypatch.setenv("AGTOOL_SECRET", SECRET)
    from_env = Gate(table(body), scope=SCOPE)
    digests = {plan_of(gate, ARGS)["args_digest"] for gate in (given_str, given_bytes, from_env)}
    assert len(digests) == 1
    assert pay(from_env, dict(ARGS), [given_bytes.approve("pay", ARGS)])["ok"]
    monkeypatch.delenv("AGTOOL_SECRET")
    alone, other = Gate(table(body), scope=SCOPE), Gate(table(body), scope=SCOPE)
    assert plan_of(alone, ARGS)["args_digest"] != plan_of(other, ARGS)["args_digest"]
    assert pay(alone, dict(ARGS), [other.approve("pay", ARGS)], step_id="s2")["error"] == (
        "auth:approval")
    assert body.count == 1


def test_gates_over_one_store_object_digest_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gate made over another gate's store (its default in-memory one too) shares its keys, so
    a replay through it answers the first outcome instead of write:conflict."""
    monkeypatch.delenv("AGTOOL_SECRET", raising=False)
    body = Body()
    first = Gate(table(body), scope=SCOPE)
    answer = pay(first, dict(ARGS), [first.approve("pay", ARGS)])
    second = Gate(table(body), scope=SCOPE, store=first.store)
    assert pay(second, dict(ARGS), [first.approve("pay", ARGS)]) == answer
    assert body.count == 1


def test_a_key_file_is_made_beside_a_sqlite_file_and_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file store gets ``<path>.key``: 32 random bytes (with the id of the store it keys),
    mode 0600, read again by a restarted gate, whose replays and approvals agree with the
    first gate's."""
    monkeypatch.delenv("AGTOOL_SECRET", raising=False)
    path = tmp_path / "writes.sqlite"
    body = Body()
    first = Gate(table(body), scope=SCOPE, store=path)
    key_file = tmp_path / "writes.sqlite.key"
    assert len(key_file_secret(str(key_file))) == 32
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    kept = key_file.read_bytes()
    approval = first.approve("pay", ARGS)
    answer = pay(first, dict(ARGS), [approval])
    restarted = Gate(table(body), scope=SCOPE, store=SqliteStore(path))
    assert pay(restarted, dict(ARGS), [approval]) == answer
    assert body.count == 1
    assert key_file.read_bytes() == kept
    assert [name for name in os.listdir(tmp_path) if name.endswith(".tmp")] == []
    other = Gate(table(body), scope=SCOPE, store=tmp_path / "elsewhere.sqlite")
    assert plan_of(other, ARGS)["args_digest"] != plan_of(first, ARGS)["args_digest"]


def _race_for_the_key(path: str, start: Any, out: Any) -> None:
    os.environ.pop("AGTOOL_SECRET", None)
    start.wait()
    gate = Gate(table(Body()), scope=SCOPE, store=path)
    out.put(gate.idempotency_key("pay", ARGS, RUN, STEP))


@pytest.mark.slow
def test_processes_racing_to_make_the_key_file_end_with_one_key(tmp_path: Path) -> None:
    """Six processes making the first gate on one SQLite file at once all use the same key."""
    context = multiprocessing.get_context("spawn")
    path = str(tmp_path / "writes.sqlite")
    SqliteStore(path).close()  # the file exists; its key does not yet
    start, out = context.Barrier(6), context.Queue()
    workers = [context.Process(target=_race_for_the_key, args=(path, start, out))
               for _ in range(6)]
    for worker in workers:
        worker.start()
    keys = [out.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=120)
    assert all(worker.exitcode == 0 for worker in workers)
    assert None not in keys
    assert len(set(keys)) == 1
    assert Gate(table(Body()), scope=SCOPE, store=path).idempotency_key(
        "pay", ARGS, RUN, STEP) == keys[0]


# -- tokens built from what plans and records show ----------------------------------------------

def _shown_digests() -> tuple[Gate, Body, dict[str, str]]:
    """A gate, its body, and the args digests an attacker reading its plans and records sees."""

    records: list[CallRecord] = []
    body = Body()
    gate = Gate(table(body), scope=SCOPE, records=records.append, secret=SECRET)
    plan = plan_of(gate, ARGS)["args_digest"]
    gate.call_tool("look", ARGS, run_id=RUN, scope={"read_sensitive"})
    return gate, body, {"plan": plan, "record": records[-1].args_digest}


def _forged_from(digest: str) -> list[str]:
    """Tokens made only from a shown digest: as the key, as the signature, hashed, with and
    without the tool name, with and without an expiry."""
    tokens = []
    for tool_name, expires in itertools.product(["pay", ""], [None, time.time() + 3600.0]):
        fields = {"v": 1, "tool": tool_name, "args": digest, "run": "", "step": "",
                  "exp": expires, "id": "forged", "by": "mallory", "once": False}
        head = f"{PREFIX}.{b64(canonical(fields))}"
        for key in (bytes.fromhex(digest), digest.encode(), hashlib.sha256(
                digest.encode()).digest(), hashlib.sha256(bytes.fromhex(digest)).digest()):
            tokens.append(signed_with(key, fields))
        tokens += [f"{head}.{b64(bytes.fromhex(digest))}",
                   f"{head}.{b64(hashlib.sha256(head.encode()).digest())}",
                   f"{head}.{b64(hashlib.sha256((head + digest).encode()).digest())}",
                   f"{head}.{b64(hmac.digest(head.encode(), bytes.fromhex(digest), 'sha256'))}"]
    return tokens


@pytest.mark.parametrize("shown", ["plan", "record"])
def test_tokens_built_from_a_shown_digest_are_each_refused(shown: str) -> None:
    """An attacker who reads a plan's or a record's args digest, and builds every token it
    suggests (the digest as key or as signature, hashed, with and without the tool name and
    an expiry), gets each one refused, and the write never runs."""
    gate, body, digests = _shown_digests()
    forged = _forged_from(digests[shown])
    assert len(forged) == 32
    for token in forged:
        assert pay(gate, dict(ARGS), [token])["error"] == "auth:approval"
    assert pay(gate, dict(ARGS), forged)["error"] == "auth:approval"
    assert body.count == 0
    assert pay(gate, dict(ARGS), [gate.approve("pay", ARGS)])["ok"]  # a real one is let in
    assert body.count == 1
