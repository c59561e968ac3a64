"""What a gate answers about a call without making it: contracts, keys, checks, approvals.

``Gate`` inherits these from ``Queries``; they read the same compiled tools
(``Registry``) its calls go through, so a key, a check or an approval given
here is the one a call would meet.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping
from typing import Any

from ._authority import Approval, issue
from ._call import Refusal
from ._compile import UNDECLARED, plain_dict
from ._contract import ToolContract
from ._fastpath import REFUSED
from ._keys import Keys
from ._lookup import Registry
from ._memo import cache_key
from ._stats import ToolStats
from ._writes import write_key

__all__ = ["Queries"]


class Queries:
    """The questions a gate answers about its table; ``_tools`` is the gate's ``Registry``."""

    _tools: Registry
    _scope: frozenset[str]
    _keys: Keys

    @property
    def table(self) -> Mapping[str, Mapping[str, Any]]:
        """The contract table, as given: the gate follows changes made to it."""
        return self._tools.table

    @property
    def scope(self) -> frozenset[str]:
        """The risk levels a call may use when it names none."""
        return self._scope

    def stats(self, name: str) -> ToolStats:
        """A snapshot of ``name``'s counters (all zero for a tool never called)."""
        counts = self._tools.counts.get(name)
        return ToolStats() if counts is None else counts.snapshot()

    def contract(self, name: str) -> ToolContract | None:
        """The validated contract of ``name``, or ``None`` if the table has no valid entry."""
        tool = self._tools.lookup(name)
        return None if isinstance(tool, Refusal) else tool.contract

    def cache_key(self, name: str, args: object, run_id: str | None = None,
                  echo: Mapping[str, object] | None = None) -> Hashable | None:
        """The memo key of a call in run ``run_id``; ``None`` when it cannot be remembered exactly.

        The contract's hash is part of it, so a changed contract never answers
        from what the old one remembered. ``echo`` as in ``validate_args``: args
        that do not pass are keyed apart from every call that does. A tool with
        sensitive arguments is keyed by a keyed digest of its args, never by them.
        """
        tool = self._tools.lookup(name)
        if isinstance(tool, Refusal):
            return cache_key(name, args, "", run_id)
        if tool.key_call is not None:
            key = tool.key_call(args, echo, run_id)
            if key is not REFUSED:
                return key  # type: ignore[no-any-return]
            return cache_key(name, args, tool.hash, run_id)  # never remembered: keyed as is
        snapshot = tool.snapshot(args, echo)
        if isinstance(snapshot, str):  # never remembered: keyed as any value would be
            if not tool.redacts_args:
                return cache_key(name, args, tool.hash, run_id)
            hexed = self._keys.digest(args)
            # A 5-tuple: apart from the 4-tuple key of every call that passes.
            return (name, tool.hash, run_id, "refused", hexed) if hexed else None
        return tool.memo_key(snapshot, run_id)

    def validate_args(self, name: object, args: object,
                      echo: Mapping[str, object] | None = None) -> str:
        """``""`` if ``fn(**args)`` may run, otherwise one reason naming a real defect.

        ``echo`` holds the values the model was given for the contract's echo
        arguments (a request id); each must come back verbatim.
        """
        tool = self._tools.lookup(name)
        if isinstance(tool, Refusal):
            return tool.reason
        snapshot = tool.snapshot(args, echo)
        return snapshot if type(snapshot) is str else ""

    def validate_result(self, name: object, value: object) -> str:
        """``""`` if ``value`` keeps the return contract, else shape, empty, too_big or range.

        A name with no valid entry gives ``unknown_tool`` or ``bad_contract``.
        """
        tool = self._tools.lookup(name)
        if isinstance(tool, Refusal):
            return tool.reason
        reason = tool.result_reason(value)
        return "" if reason == UNDECLARED else reason

    def approve(self, name: str, args: Mapping[str, Any], by: str = "", *, run_id: str = "",
                step_id: str = "", expires_in: float | None = None,
                single_use: bool = False) -> Approval:
        """An approval of calling ``name`` with exactly ``args`` (as shown to the approver).

        A token signed with this gate's secret: only a gate (or an ``Approver``)
        with the same secret accepts it. ``run_id`` and ``step_id`` narrow it to
        that step (by default any step with the same arguments is covered);
        ``expires_in`` seconds from now it covers nothing; a ``single_use``
        one lets one call through, the write store remembering that it was
        used (``use_once``). Args with no canonical form (objects that are not
        JSON-like values) cannot be approved: the approval covers no call.
        ``TypeError`` / ``ValueError`` name a malformed option.
        """
        plain = self._as_checked(name, args) if isinstance(args, dict) else args
        return issue(self._keys, name, self._keys.digest(plain), by, run_id=run_id,
                     step_id=step_id, expires_in=expires_in, single_use=single_use,
                     now=time.time())

    def _as_checked(self, name: str, args: dict[Any, Any]) -> dict[Any, Any]:
        """``args`` as the gate digests a call: its checked snapshot (a null for an optional
        arg is no arg), or, for args that do not pass, a plain copy of the dict's own storage."""
        tool = self._tools.lookup(name)
        if not isinstance(tool, Refusal):
            # The approver is shown the echo values themselves: they echo what they are.
            echo = {arg: dict.get(args, arg) for arg, spec in tool.contract.args.items()
                    if spec.echo}
            snapshot = tool.snapshot(args, echo)
            if not isinstance(snapshot, str):
                return snapshot
        return plain_dict(args)

    def idempotency_key(self, name: str, args: object, run_id: str, step_id: str) -> str | None:
        """The key a write is stored under: run id, step id, tool and its business key.

        The business key is a keyed digest of the contract's ``key_args`` (all
        args if it names none), so a sensitive order id never appears in the
        store's keys, nor can be found from them without the gate's secret.
        ``None`` for a tool that is not a valid write or for args that do not pass.
        """
        tool = self._tools.lookup(name)
        if isinstance(tool, Refusal) or not tool.writes:
            return None
        if not isinstance(args, dict):
            return None
        # The key is a digest of values: digested as the gate digests the call it keys.
        snapshot = self._as_checked(name, args)
        return write_key(self._keys, name, tool.contract.key_args, snapshot,
                         self._keys.digest(snapshot), run_id, step_id)
