"""Authority, decided in code: the caller's scope and approvals of exact arguments.

A scope is the set of risk levels a caller may use. The gate's own scope is
checked when the gate is made; a scope given with one call is read here, once,
and refused whole (``auth:bad_scope``) unless it is a set, frozenset, list or
tuple of known risk names: a ``str`` is never searched for a substring and a
``dict`` is never read for its truth values.

An approval is a token signed with the gate's approval key (``_keys``): an
HMAC over the tool, the keyed digest of the exact arguments, the run and the
step it is bound to (``""``: any), its expiry, its id, who approved it and
whether it may be used once. The gate verifies the token itself: of what a
caller hands in, only an exact ``Approval`` or an exact ``str`` token is read,
and no method of the caller's object is ever called. Nobody without the key
can make one, however much of a plan, a record or another token they saw.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import secrets
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any, cast

from ._contract import RISKS
from ._keys import Keys, secret_bytes

__all__ = ["TOKEN_PREFIX", "Approval", "Approver", "approved", "gate_scope", "issue",
           "read_scope", "spend_once"]

_log = logging.getLogger("agtool")
_RISKS = frozenset(RISKS)
#: The collections a per-call scope may be given as: their iteration is their contents.
_SCOPE_TYPES = (set, frozenset, list, tuple)
#: The first part of every token: the format's name and version.
TOKEN_PREFIX = "agtool-approval-1"  # noqa: S105 - a format name, not a secret
#: Tokens longer than this are not read: a real one is a few hundred characters.
_MAX_TOKEN = 4096
#: At most this many of a call's approvals are looked at: an endless iterable ends here.
_MAX_APPROVALS = 256
#: A token's signed fields and the exact type each must have.
_FIELDS: dict[str, tuple[type, ...]] = {
    "v": (int,), "tool": (str,), "args": (str,), "run": (str,), "step": (str,),
    "exp": (float, type(None)), "id": (str,), "by": (str,), "once": (bool,)}


@dataclass(frozen=True, repr=False, slots=True)
class Approval:
    """A person's approval of one call: a signed token, verified by the gate at the call.

    Made by ``Gate.approve`` (or an ``Approver`` holding the gate's secret)
    from the arguments that were shown; a call with any other arguments,
    another tool, another run or step it was bound to, or after its expiry is
    not covered. ``Approval(token)`` wraps a token issued elsewhere; a bare
    ``str`` token in ``approvals`` counts the same. The other attributes are
    read from the token for display only, unverified: the gate trusts none of
    them.
    """

    token: str

    def _fields(self) -> dict[str, Any]:
        return _decoded(self.token) or {}

    def _text(self, field: str) -> str:
        text = self._fields().get(field, "")
        return text if type(text) is str else ""

    @property
    def tool(self) -> str:
        return self._text("tool")

    @property
    def args_digest(self) -> str:
        """The keyed digest of the approved arguments (no use without the gate's key)."""
        return self._text("args")

    @property
    def by(self) -> str:
        return self._text("by")

    @property
    def run_id(self) -> str:
        """``""``: any run; ``step_id`` likewise."""
        return self._text("run")

    @property
    def step_id(self) -> str:
        return self._text("step")

    @property
    def token_id(self) -> str:
        return self._text("id")

    @property
    def expires_at(self) -> float | None:
        """Seconds since the epoch past which it covers nothing; ``None``: never."""
        expires = self._fields().get("exp")
        return expires if isinstance(expires, float) else None

    @property
    def single_use(self) -> bool:
        return self._fields().get("once") is True

    def __repr__(self) -> str:
        # Not the token: it is a bearer credential, and a repr ends up in logs.
        return (f"Approval(tool={self.tool!r}, by={self.by!r}, run_id={self.run_id!r}, "
                f"step_id={self.step_id!r}, expires_at={self.expires_at!r}, "
                f"single_use={self.single_use!r})")


class Approver:
    """Issues approvals a gate with the same secret accepts, for a service apart from the gate.

    ``approve`` digests ``args`` as given, where ``Gate.approve`` digests the
    args as its check leaves them: give it the args the gate runs (an optional
    argument sent as null is no argument). ``clock`` gives seconds since the
    epoch, for expiries.
    """

    def __init__(self, secret: bytes | str, *, clock: Callable[[], float] = time.time) -> None:
        self._keys = Keys(secret_bytes(secret, "secret"))
        self._clock = clock

    def __repr__(self) -> str:
        return "<Approver>"

    def approve(self, name: str, args: Mapping[str, Any], by: str = "", *, run_id: str = "",
                step_id: str = "", expires_in: float | None = None,
                single_use: bool = False) -> Approval:
        """An approval of calling ``name`` with exactly ``args`` (see ``Gate.approve``)."""
        return issue(self._keys, name, self._keys.digest(args), by, run_id=run_id,
                     step_id=step_id, expires_in=expires_in, single_use=single_use,
                     now=self._clock())


def issue(keys: Keys, name: str, args_digest: str, by: str, *, run_id: str, step_id: str,
          expires_in: float | None, single_use: bool, now: float) -> Approval:
    """A signed approval; ``TypeError`` / ``ValueError`` name a malformed option.

    An ``args_digest`` of ``""`` (args with no canonical form) is signed too,
    and covers no call: such args cannot be approved.
    """
    for option, value in (("name", name), ("by", by), ("run_id", run_id),
                          ("step_id", step_id)):
        if not isinstance(value, str):
            raise TypeError(f"{option} must be a str, got {type(value).__name__}")
    # A str subclass is signed as the plain str it holds (``str.__str__`` asks none of its
    # methods): a tool name of that kind is no tool, and such an approval covers nothing.
    name, by, run_id, step_id = (str.__str__(value) for value in (name, by, run_id, step_id))
    if type(single_use) is not bool:
        raise TypeError(f"single_use must be a bool, got {type(single_use).__name__}")
    expires_at = None
    if expires_in is not None:
        if type(expires_in) not in (int, float) or not 0 < expires_in < math.inf:
            raise ValueError(f"expires_in must be a positive number of seconds, "
                             f"got {expires_in!r}")
        expires_at = float(now + expires_in)
    fields = {"v": 1, "tool": name, "args": args_digest, "run": run_id, "step": step_id,
              "exp": expires_at, "id": secrets.token_hex(16), "by": by, "once": single_use}
    payload = _canonical(fields)
    return Approval(_token(keys, payload))


def _canonical(fields: Mapping[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _token(keys: Keys, payload: bytes) -> str:
    signed = f"{TOKEN_PREFIX}.{_b64(payload)}"
    return f"{signed}.{_b64(keys.sign(signed.encode('ascii')))}"


def _decoded(token: object) -> dict[str, Any] | None:
    """A token's fields if it is well formed, signed or not; ``None`` otherwise."""
    if type(token) is not str or len(token) > _MAX_TOKEN or not token.isascii():
        return None
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX:
        return None
    try:
        fields = json.loads(_unb64(parts[1]))
    except Exception:  # not base64, not JSON, or nested past what the parser allows
        return None
    if type(fields) is not dict or set(fields) != set(_FIELDS) or not all(
            type(fields[name]) in kinds for name, kinds in _FIELDS.items()):
        return None
    return fields


def _verified(keys: Keys, token: str) -> dict[str, Any] | None:
    """A token's fields if ``keys`` signed exactly this text; ``None`` otherwise."""
    fields = _decoded(token)
    if fields is None or fields["v"] != 1:
        return None
    # The token is made again from its fields: one made by these keys is that text to the
    # byte, and any other spelling of the same fields (base64's spare bits, another JSON
    # layout) is not a token these keys made.
    expected = _token(keys, _canonical(fields))
    return fields if secrets.compare_digest(expected.encode(), token.encode()) else None


def _covers(fields: Mapping[str, Any], tool: str, exact: str, run_id: object,
            step_id: object, now: float) -> bool:
    bound_run, bound_step, expires = fields["run"], fields["step"], fields["exp"]
    return (fields["tool"] == tool and secrets.compare_digest(fields["args"], exact)
            # Exact strs only: a str subclass could compare equal to the id it is not.
            and (bound_run == "" or (type(run_id) is str and run_id == bound_run))
            and (bound_step == "" or (type(step_id) is str and step_id == bound_step))
            and (expires is None or now < expires))


def spend_once(store: object, token_id: str, expires_at: float | None) -> bool:
    """Whether the store lets a single-use token be used now (it says yes once); never raises.

    A token that never expires is kept by the store for ever (``math.inf``).
    """
    try:
        use_once = getattr(store, "use_once", None)
        if use_once is None:
            _log.error("a single-use approval needs a write store with use_once; %s has none",
                       type(store).__name__)
            return False
        return use_once(token_id, math.inf if expires_at is None else expires_at) is True
    except Exception:
        _log.exception("the write store failed to spend a single-use approval")
        return False


def read_scope(scope: Collection[str]) -> frozenset[str] | None:
    """A per-call scope as the risk levels it grants, or ``None`` if it is malformed."""
    builtin: Any = next((kind for kind in _SCOPE_TYPES if isinstance(scope, kind)), None)
    if builtin is None:
        return None
    try:
        # The builtin's own iteration: a subclass's __iter__ or __contains__ is not asked.
        levels = frozenset(builtin.__iter__(scope))
    except Exception:  # an element whose hash raises
        return None
    # Exact strs only: a str subclass could compare equal to a level it is not.
    if not levels <= _RISKS or any(type(level) is not str for level in levels):
        return None
    return levels


def gate_scope(scope: Collection[str]) -> frozenset[str]:
    """A gate's own scope, checked when it is made: ``ValueError`` says what is wrong."""
    if isinstance(scope, (str, Mapping)) or not all(isinstance(s, str) for s in scope):
        raise ValueError(f"scope must be a collection of risk level names, got {scope!r}")
    unknown = sorted(set(scope) - _RISKS)
    if unknown:
        raise ValueError(f"scope names unknown risk levels {unknown}; expected {list(RISKS)}")
    return frozenset(scope)


def approved(keys: Keys, tool: str, exact: str, approvals: Iterable[object], run_id: object,
             step_id: object, spend: Callable[[str, float | None], bool],
             args: object = None) -> bool:
    """Whether one of ``approvals`` is a valid token covering this exact call; never raises.

    ``exact`` is the keyed digest of the checked args (``""``: none, which no
    token covers). A single-use token counts only when ``spend`` says it was
    not used before. A token made with one of ``keys.earlier`` (a secret since
    rotated) covers the call when it is bound to ``args``'s digest under it.
    """
    if not exact:
        return False
    now = time.time()
    try:
        for approval in islice(approvals, _MAX_APPROVALS):
            kind = type(approval)
            # Our own class's slot, or the str itself: nothing of the caller's is asked.
            token = (cast(Approval, approval).token if kind is Approval
                     else approval if kind is str else None)
            if type(token) is not str:
                continue
            try:
                fields = _verified(keys, token)
                bound_to = exact
                for earlier in keys.earlier if fields is None else ():
                    fields = _verified(earlier, token)
                    if fields is not None:
                        bound_to = earlier.digest(args)
                        break
            except Exception:  # one token that cannot be read covers nothing; others may
                fields = None
            if fields is None or not bound_to or not _covers(fields, tool, bound_to, run_id,
                                                               step_id, now):
                continue
            if fields["once"] and not spend(fields["id"], fields["exp"]):
                continue
            return True
    except Exception:  # approvals that cannot be iterated approve nothing
        return False
    return False
