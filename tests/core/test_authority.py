"""Authority at the gate: scope, approvals bound to exact arguments, and dry runs.

Every expectation here is built by the test from what it planted: the risk it
gave a tool, the scope it granted, the arguments it approved. Body runs are
counted by the bodies themselves, never read from the gate's counters alone.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import types
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agtool import DEFAULT_SCOPE, REDACTED, RISKS, Approval, Gate, ToolStats, parse_reason

#: The test's own knowledge of the risk levels: which are reads, which need an approval.
READ_RISKS = frozenset({"read_public", "read_sensitive"})
WRITE_RISKS = frozenset({"reversible_write", "external_effect", "irreversible"})
APPROVAL_RISKS = frozenset({"external_effect", "irreversible"})
ALL_RISKS = READ_RISKS | WRITE_RISKS

TO_PATTERN = r"[a-z]{1,8}@x\.org"
TEXT_MAX = 20
ARGS: dict[str, Any] = {
    "to": {"type": "str", "pattern": TO_PATTERN},
    "text": {"type": "str", "max_len": TEXT_MAX},
    "amount": {"type": "float", "min": 0, "max": 100, "required": False},
    "opts": {"type": "dict", "required": False},
}
RETURNS: dict[str, Any] = {"done": {"type": "bool"}}
VALID: dict[str, Any] = {"to": "ann@x.org", "text": "hello", "amount": 1, "opts": {"n": 1}}


class Body:
    """A tool body that counts its runs and answers a value its contract accepts."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return {"done": True}

    @property
    def count(self) -> int:
        return len(self.calls)


def entry(body: Callable[..., Any], risk: str, args: dict[str, Any] | None = None,
          **extra: Any) -> dict[str, Any]:
    """A table entry of ``risk``, with the effect that risk belongs to."""
    return {"fn": body, "args": ARGS if args is None else args, "returns": RETURNS,
            "effect": "read" if risk in READ_RISKS else "write", "risk": risk, **extra}


_steps = itertools.count(1)


def call(gate: Gate, name: str, args: object, **kwargs: Any) -> Any:
    """``call_tool`` with a fresh run/step id, so that no write is a replay of another."""
    return gate.call_tool(name, args, run_id="run", step_id=f"step-{next(_steps)}", **kwargs)


def call_model(gate: Gate, name: str, args: object, **kwargs: Any) -> Any:
    """``call_for_model`` with a fresh run/step id."""
    return gate.call_for_model(name, args, run_id="run", step_id=f"step-{next(_steps)}",
                               **kwargs)


def test_risk_sets_cover_every_risk_level() -> None:
    """The test's own read/write split names exactly the risk levels agtool knows."""
    assert frozenset(RISKS) == ALL_RISKS
    assert frozenset({"read_public"}) == DEFAULT_SCOPE


# -- Scope ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("risk", sorted(ALL_RISKS))
def test_default_scope_grants_public_reads_only(risk: str) -> None:
    """With no scope given, only a read_public tool runs; every other risk is auth:scope:<risk>."""
    body = Body()
    gate = Gate({"t": entry(body, risk)})
    approval = gate.approve("t", VALID)
    envelope = call(gate, "t", VALID, approvals=[approval])
    if risk == "read_public":
        assert envelope == {"ok": True, "value": {"done": True}, "error": ""}
        assert body.count == 1
    else:
        assert envelope == {"ok": False, "value": None, "error": f"auth:scope:{risk}"}
        assert body.count == 0
        assert gate.stats("t") == ToolStats(denied=1)


@pytest.mark.parametrize("risk", sorted(ALL_RISKS - {"read_public"}))
def test_scope_denial_in_model_form(risk: str) -> None:
    """A scope denial reaches the model as PERMISSION_DENIED, not retryable, naming the risk."""
    body = Body()
    gate = Gate({"t": entry(body, risk)})
    answer = call_model(gate, "t", VALID)
    assert answer["ok"] is False
    error = answer["error"]
    assert error["code"] == "PERMISSION_DENIED"
    assert error["retryable"] is False
    assert error["details"]["reason"] == f"auth:scope:{risk}"
    assert risk in error["message"]
    assert body.count == 0
    assert gate.stats("t").denied == 1


@pytest.mark.parametrize("risk", sorted(ALL_RISKS))
def test_granted_scope_lets_each_risk_through(risk: str) -> None:
    """A gate scope naming the risk lets the call through (with an approval where one is due)."""
    body = Body()
    gate = Gate({"t": entry(body, risk)}, scope={risk})
    envelope = call(gate, "t", VALID, approvals=[gate.approve("t", VALID)])
    assert envelope["ok"], envelope
    assert body.count == 1


@pytest.mark.parametrize("risk", sorted(ALL_RISKS))
def test_per_call_scope_widens_the_gate_scope(risk: str) -> None:
    """A per-call scope naming the risk grants it even on a gate with the default scope."""
    body = Body()
    gate = Gate({"t": entry(body, risk)})
    envelope = call(gate, "t", VALID, scope={risk}, approvals=[gate.approve("t", VALID)])
    assert envelope["ok"], envelope
    assert body.count == 1


@pytest.mark.parametrize("risk", sorted(ALL_RISKS))
@pytest.mark.parametrize("per_call", [pytest.param(set(), id="empty"),
                                      pytest.param(None, id="other-risks")])
def test_per_call_scope_narrows_the_gate_scope(risk: str, per_call: set[str] | None) -> None:
    """A per-call scope without the risk denies it even when the gate's own scope grants it."""
    body = Body()
    gate = Gate({"t": entry(body, risk)}, scope=ALL_RISKS)
    narrowed = ALL_RISKS - {risk} if per_call is None else per_call
    envelope = call(gate, "t", VALID, scope=narrowed, approvals=[gate.approve("t", VALID)])
    assert envelope == {"ok": False, "value": None, "error": f"auth:scope:{risk}"}
    assert body.count == 0
    assert gate.stats("t") == ToolStats(denied=1)


@pytest.mark.parametrize("risk", sorted(ALL_RISKS - {"read_public"}))
@pytest.mark.parametrize("bad", [
    pytest.param({"to": "not-an-address", "text": "hi"}, id="pattern"),
    pytest.param({"text": "hi"}, id="missing"),
    pytest.param({**VALID, "bcc": "eve@x.org"}, id="unexpected"),
    pytest.param({**VALID, "amount": True}, id="type"),
    pytest.param(None, id="not-object"),
])
def test_scope_is_checked_before_arguments(risk: str, bad: object) -> None:
    """Bad arguments to a tool out of scope answer the auth reason: nothing is said of the args."""
    body = Body()
    gate = Gate({"t": entry(body, risk)})
    assert gate.validate_args("t", bad) != ""  # the args really are bad
    envelope = call(gate, "t", bad)
    assert envelope["error"] == f"auth:scope:{risk}"
    answer = call_model(gate, "t", bad)
    assert answer["error"]["code"] == "PERMISSION_DENIED"
    assert "fields" not in answer["error"]["details"]
    assert body.count == 0
    assert gate.stats("t") == ToolStats(denied=2)


def test_in_scope_bad_arguments_answer_the_args_reason() -> None:
    """Once the scope allows the risk, bad arguments are refused on the args stage, not auth."""
    body = Body()
    gate = Gate({"t": entry(body, "irreversible")}, scope={"irreversible"})
    bad = {**VALID, "to": "nope"}
    envelope = call(gate, "t", bad, approvals=[gate.approve("t", bad)])
    assert envelope["error"] == "args:pattern:to"
    assert body.count == 0
    assert gate.stats("t") == ToolStats(blocked=1)


@pytest.mark.parametrize("scope", [
    pytest.param({"nonsense"}, id="unknown"),
    pytest.param({"read_public", "nonsense"}, id="one-unknown-among-known"),
    pytest.param({"write"}, id="an-effect-is-not-a-risk"),
    pytest.param({"READ_PUBLIC"}, id="case-matters"),
])
def test_gate_refuses_a_scope_naming_unknown_risks(scope: set[str]) -> None:
    """Gate(table, scope=...) raises ValueError when the scope names a level that is no risk."""
    with pytest.raises(ValueError, match="scope"):
        Gate({"t": entry(Body(), "read_public")}, scope=scope)


def test_empty_gate_scope_denies_even_public_reads() -> None:
    """A gate granted nothing runs nothing, public reads included."""
    body = Body()
    gate = Gate({"t": entry(body, "read_public")}, scope=())
    assert call(gate, "t", VALID)["error"] == "auth:scope:read_public"
    assert body.count == 0


# -- Approval ------------------------------------------------------------------------------------


def approval_gate(risk: str, body: Body, other: Body | None = None) -> Gate:
    table = {"t": entry(body, risk), "u": entry(other or Body(), risk)}
    return Gate(table, scope=ALL_RISKS)


@pytest.mark.parametrize("risk", sorted(APPROVAL_RISKS))
def test_approval_risks_refuse_without_an_approval(risk: str) -> None:
    """external_effect and irreversible answer auth:approval / APPROVAL_REQUIRED with none."""
    body = Body()
    gate = approval_gate(risk, body)
    envelope = call(gate, "t", VALID)
    assert envelope == {"ok": False, "value": None, "error": "auth:approval"}
    answer = call_model(gate, "t", VALID)
    assert answer["ok"] is False
    assert answer["error"]["code"] == "APPROVAL_REQUIRED"
    assert answer["error"]["retryable"] is False
    assert answer["error"]["details"]["reason"] == "auth:approval"
    assert body.count == 0
    assert gate.stats("t") == ToolStats(denied=2)


@pytest.mark.parametrize("risk", sorted(APPROVAL_RISKS))
def test_approval_of_the_exact_args_lets_the_call_run(risk: str) -> None:
    """An approval of these exact arguments lets the body run once, with those arguments."""
    body = Body()
    gate = approval_gate(risk, body)
    approval = gate.approve("t", VALID, by="ops")
    assert isinstance(approval, Approval)
    assert (approval.tool, approval.by) == ("t", "ops")
    envelope = call(gate, "t", VALID, approvals=[approval])
    assert envelope == {"ok": True, "value": {"done": True}, "error": ""}
    assert body.calls == [VALID]


# (call args, approved args): each pair differs in what the approver was shown.
MISMATCHES = [
    pytest.param(VALID, {**VALID, "to": "bob@x.org"}, id="other-recipient"),
    pytest.param(VALID, {**VALID, "text": "hellO"}, id="other-text"),
    pytest.param({**VALID, "amount": 1}, {**VALID, "amount": 1.0}, id="int-approved-as-float"),
    pytest.param({**VALID, "amount": 1.0}, {**VALID, "amount": 1}, id="float-approved-as-int"),
    pytest.param({**VALID, "opts": {"n": 1}}, {**VALID, "opts": {"n": True}},
                 id="nested-int-approved-as-bool"),
    pytest.param({**VALID, "opts": {"n": True}}, {**VALID, "opts": {"n": 1}},
                 id="nested-bool-approved-as-int"),
    pytest.param({**VALID, "opts": {"n": 1}}, {**VALID, "opts": {"n": 1.0}},
                 id="nested-int-approved-as-float"),
    pytest.param({**VALID, "amount": 0.0}, {**VALID, "amount": -0.0}, id="zero-sign"),
    pytest.param({"to": "ann@x.org", "text": "hi", "amount": 1},
                 {"to": "ann@x.org", "text": "hi", "amount": 1.0}, id="scalars-int-as-float"),
    pytest.param({"to": "ann@x.org", "text": "hi", "amount": 2.0},
                 {"to": "ann@x.org", "text": "hi", "amount": 2}, id="scalars-float-as-int"),
    pytest.param({"to": "ann@x.org", "text": "hi", "amount": 1},
                 {"to": "ann@x.org", "text": "hi", "amount": True}, id="scalars-int-as-bool"),
    pytest.param({"to": "ann@x.org", "text": "1"},
                 {"to": "ann@x.org", "text": 1}, id="scalars-str-as-int"),
    pytest.param({"to": "ann@x.org", "text": "hello"}, {"to": "ann@x.org", "text": "hello",
                                                        "amount": 1}, id="approved-extra-arg"),
    pytest.param(VALID, {"to": "ann@x.org", "text": "hello"}, id="approved-fewer-args"),
    pytest.param(VALID, {**VALID, "opts": {"n": 1, "m": 2}}, id="nested-extra-key"),
    pytest.param(VALID, {}, id="approved-empty-args"),
]


@pytest.mark.parametrize("risk", sorted(APPROVAL_RISKS))
@pytest.mark.parametrize(("args", "approved"), MISMATCHES)
def test_approval_of_other_args_does_not_cover_the_call(
    risk: str, args: dict[str, Any], approved: dict[str, Any],
) -> None:
    """An approval of any other arguments (value, type, or keys) leaves the call unapproved."""
    body = Body()
    gate = approval_gate(risk, body)
    assert gate.validate_args("t", args) == ""
    envelope = call(gate, "t", args, approvals=[gate.approve("t", approved)])
    assert envelope["error"] == "auth:approval"
    assert body.count == 0
    # The same approval covers exactly the args it was made for.
    if gate.validate_args("t", approved) == "":
        assert call(gate, "t", approved, approvals=[gate.approve("t", approved)])["ok"]
        assert body.calls == [approved]


@pytest.mark.parametrize("risk", sorted(APPROVAL_RISKS))
@pytest.mark.parametrize(("args", "shown"), [
    pytest.param({"to": "ann@x.org", "text": "hello", "amount": 1.5},
                 {"amount": 1.5, "text": "hello", "to": "ann@x.org"}, id="scalars-only"),
    pytest.param({**VALID, "opts": {"a": 1, "b": [1, 2], "c": {"x": 1, "y": 2}}},
                 {"opts": {"c": {"y": 2, "x": 1}, "b": [1, 2], "a": 1}, "amount": 1,
                  "text": "hello", "to": "ann@x.org"}, id="nested"),
])
def test_key_order_does_not_matter_to_an_approval(
    risk: str, args: dict[str, Any], shown: dict[str, Any],
) -> None:
    """An approval made from the same args in another key order (nested too) covers the call."""
    body = Body()
    gate = approval_gate(risk, body)
    assert list(shown) != list(args)
    assert shown == args
    assert call(gate, "t", args, approvals=[gate.approve("t", shown)])["ok"]
    assert body.count == 1


@pytest.mark.parametrize("risk", sorted(APPROVAL_RISKS))
def test_list_order_does_matter_to_an_approval(risk: str) -> None:
    """Lists are values, not sets: an approval of reordered list items does not cover the call."""
    body = Body()
    gate = approval_gate(risk, body)
    args = {**VALID, "opts": {"to": ["a", "b"]}}
    shown = {**VALID, "opts": {"to": ["b", "a"]}}
    assert call(gate, "t", args, approvals=[gate.approve("t", shown)])["error"] == "auth:approval"
    assert body.count == 0


@pytest.mark.parametrize("risk", sorted(APPROVAL_RISKS))
def test_approval_for_another_tool_does_not_cover_the_call(risk: str) -> None:
    """An approval of the same args for another tool (same risk, same table) does not count."""
    body, other = Body(), Body()
    gate = approval_gate(risk, body, other)
    for_u = gate.approve("u", VALID)
    assert call(gate, "t", VALID, approvals=[for_u])["error"] == "auth:approval"
    assert body.count == 0
    assert call(gate, "u", VALID, approvals=[for_u])["ok"]
    assert (body.count, other.count) == (0, 1)


@pytest.mark.parametrize("risk", sorted(APPROVAL_RISKS))
@pytest.mark.parametrize("make", [
    pytest.param(lambda a: types.SimpleNamespace(tool=a.tool, args_digest=a.args_digest, by=""),
                 id="look-alike-object"),
    pytest.param(lambda a: {"tool": a.tool, "args_digest": a.args_digest}, id="dict"),
    pytest.param(lambda a: (a.tool, a.args_digest, a.by), id="tuple"),
    pytest.param(lambda a: a.args_digest, id="digest-str"),
    pytest.param(lambda a: True, id="true"),
    pytest.param(lambda a: None, id="none"),
])
def test_objects_that_are_not_approvals_do_not_count(
    risk: str, make: Callable[[Approval], object],
) -> None:
    """Anything in approvals that is not an Approval, however alike, leaves the call unapproved."""
    body = Body()
    gate = approval_gate(risk, body)
    fake = make(gate.approve("t", VALID))
    envelope = call(gate, "t", VALID, approvals=[fake])  # type: ignore[list-item]
    assert envelope["error"] == "auth:approval"
    assert body.count == 0


@pytest.mark.parametrize("risk", sorted(APPROVAL_RISKS))
def test_one_matching_approval_among_others_is_enough(risk: str) -> None:
    """The right approval anywhere among wrong ones and junk, even from a generator, covers it."""
    body = Body()
    gate = approval_gate(risk, body)
    others = [gate.approve("u", VALID), gate.approve("t", {**VALID, "text": "x"}), "junk"]
    right = gate.approve("t", VALID)
    approvals = (approval for approval in [*others, right])
    assert call(gate, "t", VALID, approvals=approvals)["ok"]  # type: ignore[arg-type]
    assert body.count == 1


@pytest.mark.parametrize("risk", sorted(APPROVAL_RISKS))
def test_approval_binds_the_args_as_shown_not_the_dict(risk: str) -> None:
    """Args changed after they were approved are no longer covered by that approval."""
    body = Body()
    gate = approval_gate(risk, body)
    args = dict(VALID)
    approval = gate.approve("t", args)
    args["to"] = "eve@x.org"
    assert call(gate, "t", args, approvals=[approval])["error"] == "auth:approval"
    assert body.count == 0


@pytest.mark.parametrize("risk", sorted(APPROVAL_RISKS))
def test_an_approval_does_not_grant_scope(risk: str) -> None:
    """An approval of the exact args does not stand in for a scope that lacks the risk."""
    body = Body()
    gate = Gate({"t": entry(body, risk)}, scope=ALL_RISKS - {risk})
    envelope = call(gate, "t", VALID, approvals=[gate.approve("t", VALID)])
    assert envelope["error"] == f"auth:scope:{risk}"
    assert body.count == 0


@pytest.mark.parametrize("risk", sorted(ALL_RISKS - APPROVAL_RISKS))
def test_reads_and_reversible_writes_need_no_approval(risk: str) -> None:
    """read_public, read_sensitive and reversible_write run in scope with no approval at all."""
    body = Body()
    gate = Gate({"t": entry(body, risk)}, scope={risk})
    assert call(gate, "t", VALID)["ok"]
    assert body.count == 1
    assert gate.stats("t").denied == 0


# -- Dry run -------------------------------------------------------------------------------------


def expected_plan(gate: Gate, name: str, risk: str, args: dict[str, Any],
                  approved: dict[str, Any] | None = None) -> dict[str, Any]:
    """The plan the test expects, from what it declared; its digest is the one an approval of
    the real arguments (``approved``, default ``args``) by ``gate`` carries."""
    digest = gate.approve(name, args if approved is None else approved).args_digest
    return {"tool": name, "args": args, "args_digest": digest,
            "effect": "read" if risk in READ_RISKS else "write",
            "risk": risk, "needs_approval": risk in APPROVAL_RISKS}


@pytest.mark.parametrize("risk", sorted(ALL_RISKS))
def test_dry_run_answers_the_plan_without_running_or_approval(risk: str) -> None:
    """dry_run answers the plan, body not run, with no approval even where one is needed."""
    body = Body()
    gate = Gate({"t": entry(body, risk)}, scope={risk})
    envelope = call(gate, "t", VALID, dry_run=True)
    assert envelope == {"ok": True, "value": expected_plan(gate, "t", risk, VALID), "error": ""}
    answer = call_model(gate, "t", VALID, dry_run=True)
    assert answer["ok"] is True
    assert answer["data"] == expected_plan(gate, "t", risk, VALID)
    assert body.count == 0
    assert gate.stats("t").runs == 0


@pytest.mark.parametrize("risk", sorted(APPROVAL_RISKS))
def test_the_plan_is_what_is_approved(risk: str) -> None:
    """An approval made from the dry run's plan args covers the real call."""
    body = Body()
    gate = Gate({"t": entry(body, risk)}, scope={risk})
    plan = call(gate, "t", VALID, dry_run=True)["value"]
    assert plan["needs_approval"] is True
    assert call(gate, "t", VALID, approvals=[gate.approve("t", plan["args"])])["ok"]
    assert body.calls == [VALID]


def test_a_plans_digest_cannot_be_made_an_approval() -> None:
    """With a sensitive argument redacted in the plan, the plan's digest is keyed: neither it nor
    an Approval wrapping it lets the planned call through; the app that holds the real args
    approves those, and that approval covers only the planned call."""
    args = {**ARGS, "token": {"type": "str", "sensitive": True}}
    body = Body()
    gate = Gate({"t": entry(body, "irreversible", args)}, scope={"irreversible"})
    planned = {**VALID, "token": "tok-123456"}
    plan = call(gate, "t", planned, dry_run=True)["value"]
    assert "tok-123456" not in json.dumps(plan)
    for forged in (Approval(plan["args_digest"]), plan["args_digest"], plan):
        assert call(gate, "t", planned, approvals=[forged])["error"] == "auth:approval"
    assert body.count == 0
    approval = gate.approve("t", planned, by="ops")
    assert approval.args_digest == plan["args_digest"]
    assert call(gate, "t", {**planned, "token": "tok-999999"}, approvals=[approval])["error"] == (
        "auth:approval")
    assert body.count == 0
    assert call(gate, "t", planned, approvals=[approval])["ok"] is True
    assert body.calls == [planned]


@pytest.mark.parametrize("risk", sorted(APPROVAL_RISKS))
def test_an_approval_bound_to_a_step_covers_that_step_only(risk: str) -> None:
    """An approval given with run and step ids does not let the same args through elsewhere."""
    body = Body()
    gate = approval_gate(risk, body)
    approval = gate.approve("t", VALID, run_id="run-1", step_id="pay")
    for run_id, step_id in (("run-1", "pay-again"), ("run-2", "pay"), (None, None)):
        envelope = gate.call_tool("t", VALID, run_id=run_id, step_id=step_id,
                                  approvals=[approval])
        assert envelope["error"] == "auth:approval"
    assert body.count == 0
    assert gate.call_tool("t", VALID, run_id="run-1", step_id="pay", approvals=[approval])["ok"]
    assert body.calls == [VALID]


def test_dry_run_plan_redacts_sensitive_args() -> None:
    """The plan shows a sensitive argument as REDACTED and every other argument as given."""
    args = {**ARGS, "token": {"type": "str", "sensitive": True}}
    body = Body()
    gate = Gate({"t": entry(body, "external_effect", args)}, scope={"external_effect"})
    given_args = {**VALID, "token": "tok-123456"}
    plan = call(gate, "t", given_args, dry_run=True)["value"]
    assert plan == expected_plan(gate, "t", "external_effect", {**VALID, "token": REDACTED},
                                 given_args)
    assert body.count == 0


@pytest.mark.parametrize("risk", sorted(ALL_RISKS - {"read_public"}))
def test_dry_run_still_refuses_missing_scope(risk: str) -> None:
    """A dry run outside the caller's scope answers auth:scope, not a plan."""
    body = Body()
    gate = Gate({"t": entry(body, risk)})
    assert call(gate, "t", VALID, dry_run=True)["error"] == f"auth:scope:{risk}"
    assert call_model(gate, "t", VALID, dry_run=True)["error"]["code"] == "PERMISSION_DENIED"
    assert body.count == 0


@pytest.mark.parametrize("risk", sorted(ALL_RISKS))
def test_dry_run_still_refuses_bad_args(risk: str) -> None:
    """A dry run with bad arguments in scope answers the args reason, not a plan."""
    body = Body()
    gate = Gate({"t": entry(body, risk)}, scope={risk})
    envelope = call(gate, "t", {**VALID, "text": "x" * (TEXT_MAX + 1)}, dry_run=True)
    assert envelope == {"ok": False, "value": None, "error": "args:max_len:text"}
    assert body.count == 0
    assert gate.stats("t") == ToolStats(blocked=1)


@pytest.mark.parametrize("risk", sorted(WRITE_RISKS))
def test_dry_run_does_not_claim_the_write_key(risk: str) -> None:
    """A dry run of a write leaves its idempotency key free: the real call then runs the body."""
    body = Body()
    gate = Gate({"t": entry(body, risk)}, scope={risk})
    ids = {"run_id": "r", "step_id": "s"}
    assert gate.call_tool("t", VALID, dry_run=True, **ids)["ok"]
    envelope = gate.call_tool("t", VALID, approvals=[gate.approve("t", VALID)], **ids)
    assert envelope == {"ok": True, "value": {"done": True}, "error": ""}
    assert body.count == 1
    assert gate.stats("t").replayed == 0


@pytest.mark.parametrize("risk", sorted(READ_RISKS))
def test_dry_run_neither_fills_nor_reads_the_memo(risk: str) -> None:
    """A dry run of a read is not remembered, and after a real call it still answers the plan."""
    body = Body()
    gate = Gate({"t": entry(body, risk)}, scope={risk})
    call(gate, "t", VALID, dry_run=True)
    assert call(gate, "t", VALID)["value"] == {"done": True}
    assert body.count == 1
    assert call(gate, "t", VALID, dry_run=True)["value"] == expected_plan(gate, "t", risk, VALID)
    assert gate.stats("t").hits == 0


# -- The property --------------------------------------------------------------------------------

_MISSING = object()


def args_are_valid(args: dict[str, Any]) -> bool:
    """The test's own reading of ARGS: an independent oracle of what the gate must accept."""
    if not set(args) <= set(ARGS):
        return False
    to, text = args.get("to", _MISSING), args.get("text", _MISSING)
    if type(to) is not str or re.fullmatch(TO_PATTERN, to) is None:
        return False
    if type(text) is not str or len(text) > TEXT_MAX:
        return False
    # An optional argument sent as null is not given (the dialect's nullable default).
    amount = args.get("amount", _MISSING)
    if amount is not _MISSING and amount is not None:
        if type(amount) is not int and not (type(amount) is float and math.isfinite(amount)):
            return False
        if not 0 <= amount <= 100:
            return False
    opts = args.get("opts", _MISSING)
    return opts is _MISSING or opts is None or isinstance(opts, dict)


addresses = st.from_regex(TO_PATTERN, fullmatch=True)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 150), st.floats(),
                    st.text(max_size=TEXT_MAX + 3))
any_values = st.one_of(scalars, addresses, st.lists(st.integers(), max_size=2),
                       st.dictionaries(st.text(max_size=3), scalars, max_size=2))


@st.composite
def valid_args(draw: st.DrawFn) -> dict[str, Any]:
    args: dict[str, Any] = {"to": draw(addresses), "text": draw(st.text(max_size=TEXT_MAX))}
    if draw(st.booleans()):
        args["amount"] = draw(st.one_of(st.integers(0, 100), st.floats(0, 100)))
    if draw(st.booleans()):
        args["opts"] = draw(st.dictionaries(st.text(max_size=3), scalars, max_size=3))
    keys = draw(st.permutations(list(args)))
    return {key: args[key] for key in keys}


@st.composite
def call_args(draw: st.DrawFn) -> dict[str, Any]:
    """Valid args, valid args with one key overwritten or dropped, or keys drawn at random."""
    kind = draw(st.sampled_from(["valid", "valid", "overwrite", "drop", "random"]))
    if kind == "random":
        keys = st.sampled_from([*ARGS, "cc"])
        return draw(st.dictionaries(keys, any_values, max_size=5))
    args = draw(valid_args())
    if kind == "overwrite":
        args[draw(st.sampled_from([*ARGS, "cc"]))] = draw(any_values)
    elif kind == "drop":
        args.pop(draw(st.sampled_from(list(args))))
    return args


@st.composite
def mutated(draw: st.DrawFn, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` changed in a way that makes it, by construction, a different call."""
    kind = draw(st.sampled_from(["to", "amount_type", "extra", "drop"]))
    changed = dict(args)
    if kind == "to":
        current = args.get("to", _MISSING)
        changed["to"] = draw(addresses.filter(lambda s: not (type(current) is str
                                                               and s == current)))
    elif kind == "amount_type":
        amount = args.get("amount", _MISSING)
        if type(amount) is int:
            changed["amount"] = float(amount)  # drawn ints are small: exact as floats
        elif type(amount) is float and math.isfinite(amount) and amount.is_integer():
            changed["amount"] = int(amount)
        else:
            changed["amount"] = ["mutated"]  # no drawn value is a list of str
    # Dropping an optional argument sent as null would leave the same call.
    droppable = [key for key, value in args.items()
                 if value is not None or ARGS.get(key, {}).get("required", True)]
    if kind == "extra" or not droppable:
        changed["zz_extra"] = 1  # never a drawn key
    else:
        changed.pop(draw(st.sampled_from(droppable)))
    return changed


APPROVAL_KINDS = ("exact", "reordered", "mutated", "other_tool", "junk")
MATCHING_KINDS = frozenset({"exact", "reordered"})


def approvals_of(gate: Gate, name: str, kinds: list[str], args: dict[str, Any],
                 changed: dict[str, Any]) -> list[object]:
    """The approvals ``kinds`` names, for a call of ``name`` with ``args``."""
    approvals: list[object] = []
    for kind in kinds:
        if kind == "exact":
            approvals.append(gate.approve(name, args))
        elif kind == "reordered":
            approvals.append(gate.approve(name, dict(reversed(list(args.items())))))
        elif kind == "mutated":
            approvals.append(gate.approve(name, changed))
        elif kind == "other_tool":
            approvals.append(gate.approve("other", args))
        else:
            real = gate.approve(name, args)
            approvals.append(types.SimpleNamespace(tool=real.tool, args_digest=real.args_digest))
    return approvals


@pytest.mark.slow
@given(
    granted=st.sets(st.sampled_from(sorted(ALL_RISKS))),
    gate_scope=st.one_of(st.none(), st.sets(st.sampled_from(sorted(ALL_RISKS)))),
    args=call_args(),
    kinds=st.lists(st.sampled_from(APPROVAL_KINDS), min_size=2, max_size=4),
    data=st.data(),
)
def test_body_runs_only_with_scope_valid_args_and_a_matching_approval(
    granted: set[str], gate_scope: set[str] | None, args: dict[str, Any], kinds: list[str],
    data: st.DataObject,
) -> None:
    """For a tool of every risk: the body runs iff risk in scope, args valid, and approved.

    "Approved" is: the risk needs no approval, or one of the approvals is for these
    args (as given, or with the keys reordered). Others are for mutated args,
    another tool, or look-alike objects. Every tool is called with no approval,
    with each kind alone and with the drawn mix, for real and as a dry run (which
    never runs the body and needs no approval), through call_tool and
    call_for_model. ``granted`` is the gate's scope (``gate_scope`` None) or a
    per-call scope overriding ``gate_scope``. A refusal is on the auth or args
    stage, with the exact reason the test derives from what it planted; ``args:``
    refusals are checked by stage only (which check fails first is the gate's order).
    A read's repeats are memo hits: its body runs once, on the first permitted call.
    """
    check_authority(granted, gate_scope, args, kinds, data.draw(mutated(args)))


# Null for an optional argument is the call without it: checked on every run, not by luck.
@pytest.mark.parametrize(("args", "changed"), [
    pytest.param({"to": "a@x.org", "text": "", "amount": None},
                 {"to": "a@x.org", "text": "", "amount": ["mutated"]}, id="null-amount"),
    pytest.param({"to": "a@x.org", "text": "hi", "opts": None},
                 {"to": "b@x.org", "text": "hi", "opts": None}, id="null-opts"),
])
@pytest.mark.parametrize("kinds", [["exact", "exact"], ["reordered", "mutated"]])
def test_a_null_optional_arg_is_approved_and_run_as_the_call_without_it(
        args: dict[str, Any], changed: dict[str, Any], kinds: list[str]) -> None:
    """The property above, on args that send null for an optional argument."""
    check_authority(set(ALL_RISKS), None, args, kinds, changed)
    check_authority({"external_effect"}, None, args, kinds, changed)


def check_authority(granted: set[str], gate_scope: set[str] | None, args: dict[str, Any],
                    kinds: list[str], changed: dict[str, Any]) -> None:
    """The body of the property: every risk, approval mix, dry run and twin, checked."""
    bodies = {risk: Body() for risk in ALL_RISKS}
    other = Body()
    table = {f"t_{risk}": entry(bodies[risk], risk) for risk in ALL_RISKS}
    table["other"] = entry(other, "read_public")
    if gate_scope is None:
        gate, per_call = Gate(table, scope=granted), None
    else:
        gate, per_call = Gate(table, scope=gate_scope), granted
    valid = args_are_valid(args)
    approval_sets = [[], *([kind] for kind in APPROVAL_KINDS), kinds]
    steps = itertools.count()

    for risk in sorted(ALL_RISKS):
        name = f"t_{risk}"
        in_scope = risk in granted
        runs = denied = blocked = 0
        for chosen, dry_run, for_model in itertools.product(
                approval_sets, (True, False), (True, False)):
            approvals = approvals_of(gate, name, chosen, args, changed)
            approved = risk not in APPROVAL_RISKS or bool(set(chosen) & MATCHING_KINDS)
            if not in_scope:
                expected_reason = f"auth:scope:{risk}"
            elif not valid:
                expected_reason = "args:"
            elif dry_run or approved:
                expected_reason = ""
            else:
                expected_reason = "auth:approval"
            permitted = in_scope and valid and approved and not dry_run
            # A read runs once; its repeats are answered from the memo (still only if permitted).
            runs += int(permitted and not (risk in READ_RISKS and runs))
            denied += int(expected_reason.startswith("auth:"))
            blocked += int(expected_reason == "args:")

            kwargs: dict[str, Any] = {"scope": per_call, "run_id": "run",
                                      "step_id": f"step-{next(steps)}", "approvals": approvals,
                                      "dry_run": dry_run}
            if for_model:
                answer = gate.call_for_model(name, args, **kwargs)
                ok = answer["ok"]
                reason = "" if ok else answer["error"]["details"]["reason"]
                if not ok:
                    expected_code = ("INVALID_ARGUMENT" if expected_reason == "args:"
                                     else "PERMISSION_DENIED" if not in_scope
                                     else "APPROVAL_REQUIRED")
                    assert answer["error"]["code"] == expected_code
                    assert answer["error"]["retryable"] is False
            else:
                envelope = gate.call_tool(name, args, **kwargs)
                ok, reason = envelope["ok"], envelope["error"]

            where = (risk, chosen, dry_run, for_model, reason)
            assert ok == (expected_reason == ""), where
            if expected_reason == "args:":
                assert parse_reason(reason).stage == "args", where
            else:
                assert reason == expected_reason, where
            assert bodies[risk].count == runs, where

        stats = gate.stats(name)
        assert (stats.runs, stats.denied, stats.blocked) == (runs, denied, blocked)
    assert other.count == 0
