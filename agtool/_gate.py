"""The gate: the one door every tool call passes through.

``call_tool`` checks the arguments before the body runs, looks in the memo,
runs the body, checks what came back, and remembers only successes. It always
answers ``{"ok", "value", "error"}`` and never raises: a failure is a value
whose ``error`` is a reason from ``_reasons``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from ._compile import UNDECLARED, compile_arg_check, compile_result_check
from ._contract import ToolContract, check_table, parse_entry
from ._errors import ContractError
from ._memo import cache_key, freeze, thaw
from ._reasons import BAD_CONTRACT, NOT_OBJECT, SHAPE, UNKNOWN_TOOL

__all__ = ["Envelope", "Gate", "ToolStats"]

_log = logging.getLogger("agtool")
_MISS = object()


class Envelope(TypedDict):
    """What ``call_tool`` answers, always with exactly these three keys."""

    ok: bool
    value: Any
    error: str


@dataclass(frozen=True)
class ToolStats:
    """Counts for one tool since the gate was made (or ``reset_stats``)."""

    runs: int = 0  #: times the body was called (a body that raised counts)
    hits: int = 0  #: calls answered from the memo, body not run
    blocked: int = 0  #: calls refused on their arguments, body not run
    bad_results: int = 0  #: calls whose returned value was refused
    raised: int = 0  #: calls whose body raised


class _Counts:
    __slots__ = ("bad_results", "blocked", "hits", "raised", "runs")

    def __init__(self) -> None:
        self.runs = self.hits = self.blocked = self.bad_results = self.raised = 0


class _Compiled:
    """A contract with its compiled checks, and the table objects it was built from."""

    __slots__ = ("args", "check_args", "check_result", "contract", "counts", "entry", "fn",
                 "returns")

    def __init__(self, entry: Mapping[str, Any], contract: ToolContract, counts: _Counts) -> None:
        self.entry = entry
        self.fn: Callable[..., Any] = contract.fn
        self.args = entry["args"]
        self.returns = entry["returns"]
        self.contract = contract
        self.check_args = compile_arg_check(contract.args)
        self.check_result = compile_result_check(contract.returns)
        self.counts = counts



class Gate:
    """A call gate over one contract table, with its own memo and counters.

    The table is validated here (``ContractError`` names the tool, the field and
    the problem) and kept by reference: tools added to it, or entries replaced
    in it, are validated when first called and take effect on that call. An
    entry changed in place deeper than its ``fn``, ``args`` and ``returns``
    is seen after ``refresh()``.
    """

    def __init__(self, table: Mapping[str, Mapping[str, Any]]) -> None:
        contracts = check_table(table)
        self.table = table
        #: The memo: ``cache_key(name, args)`` -> a private copy of a successful value.
        self.cache: dict[Hashable, Any] = {}
        self._counts: dict[str, _Counts] = {}
        self._compiled: dict[str, _Compiled] = {
            name: _Compiled(table[name], contract, self._counts_for(name))
            for name, contract in contracts.items()
        }

    def contract(self, name: str) -> ToolContract | None:
        """The validated contract of ``name``, or ``None`` if the table has no valid entry."""
        found = self._lookup(name)
        return None if isinstance(found, str) else found.contract

    def cache_key(self, name: str, args: object) -> Hashable | None:
        """The memo key of a call; ``None`` when the call cannot be remembered exactly."""
        return cache_key(name, args)

    def validate_args(
        self, name: object, args: object, echo: Mapping[str, object] | None = None
    ) -> str:
        """``""`` if ``fn(**args)`` may run, otherwise one reason naming a real defect.

        ``echo`` holds the values the model was given for the contract's echo
        arguments (a request id); each must come back verbatim.
        """
        found = self._lookup(name)
        if isinstance(found, str):
            return found
        return _check_args(found, args, echo)

    def validate_result(self, name: object, value: object) -> str:
        """``""`` if ``value`` keeps the return contract, else shape, empty, too_big or range.

        A name with no valid entry gives ``unknown_tool`` or ``bad_contract``.
        """
        found = self._lookup(name)
        if isinstance(found, str):
            return found
        reason = _check_result(found, value)
        return "" if reason == UNDECLARED else reason

    def call_tool(
        self, name: object, args: object, echo: Mapping[str, object] | None = None
    ) -> Envelope:
        """Run one call through the gate; never raises. ``echo`` as in ``validate_args``."""
        found = self._lookup(name)
        if isinstance(found, str):
            return {"ok": False, "value": None, "error": "args:" + found}
        counts = found.counts
        reason = _check_args(found, args, echo)
        if reason:
            counts.blocked += 1
            return {"ok": False, "value": None, "error": "args:" + reason}
        key = cache_key(found.contract.name, args)
        if key is not None:
            remembered = self.cache.get(key, _MISS)
            if remembered is not _MISS:
                counts.hits += 1
                return {"ok": True, "value": thaw(remembered), "error": ""}
        counts.runs += 1
        try:
            value = found.fn(**args)  # type: ignore[arg-type]  # checked: a dict with str keys
        except Exception as exc:
            counts.raised += 1
            _log.debug("tool %r raised %s", found.contract.name, type(exc).__name__,
                       exc_info=True)
            return {"ok": False, "value": None, "error": "raised:" + type(exc).__name__}
        reason = _check_result(found, value)
        undeclared = reason == UNDECLARED
        if reason and not undeclared:
            counts.bad_results += 1
            return {"ok": False, "value": None, "error": "result:" + reason}
        if key is not None:
            frozen = freeze(value, verify=undeclared)
            if frozen is not None:
                self.cache[key] = frozen
        return {"ok": True, "value": value, "error": ""}

    def stats(self, name: str) -> ToolStats:
        """A snapshot of ``name``'s counters (all zero for a tool never called)."""
        counts = self._counts.get(name)
        if counts is None:
            return ToolStats()
        return ToolStats(counts.runs, counts.hits, counts.blocked, counts.bad_results,
                         counts.raised)

    def reset_stats(self) -> None:
        """Set every counter back to zero."""
        for counts in self._counts.values():
            counts.__init__()  # type: ignore[misc]

    def clear(self) -> None:
        """Forget every remembered value."""
        self.cache.clear()

    def refresh(self) -> None:
        """Revalidate the whole table now; raises ``ContractError`` if it is malformed."""
        check_table(self.table)
        self._compiled.clear()
        self.cache.clear()

    def _counts_for(self, name: str) -> _Counts:
        return self._counts.setdefault(name, _Counts())

    def _lookup(self, name: object) -> _Compiled | str:
        if not isinstance(name, str):
            return UNKNOWN_TOOL
        try:
            entry = self.table.get(name)
        except Exception:  # a table whose lookup raises has no such tool
            return UNKNOWN_TOOL
        if entry is None:
            return UNKNOWN_TOOL
        compiled = self._compiled.get(name)
        if compiled is not None and _is_current(compiled, entry):
            return compiled
        return self._recompile(name, entry)

    def _recompile(self, name: str, entry: Any) -> _Compiled | str:
        if self._compiled.pop(name, None) is not None:
            # What the old contract remembered was checked against the old contract.
            for key in [key for key in self.cache if key[0] == name]:  # type: ignore[index]
                del self.cache[key]
        try:
            compiled = _Compiled(entry, parse_entry(name, entry), self._counts_for(name))
        except ContractError as exc:
            # Registration already refused the table as it was; an entry broken
            # afterwards must still not crash an agent's run.
            _log.error("contract refused at call time: %s", exc)
            return BAD_CONTRACT
        self._compiled[name] = compiled
        return compiled


def _is_current(compiled: _Compiled, entry: Any) -> bool:
    # Identity, not equality: cheap enough for every call, and swapping an
    # entry, its fn, its args or its returns takes effect on the next call.
    try:
        return (entry is compiled.entry and entry["fn"] is compiled.fn
                and entry["args"] is compiled.args and entry["returns"] is compiled.returns)
    except Exception:  # the entry was replaced by something that is not a dict
        return False


def _check_args(compiled: _Compiled, args: object, echo: object) -> str:
    try:
        return compiled.check_args(args, echo)
    except Exception:  # a dict subclass whose methods raise cannot be read
        return NOT_OBJECT


def _check_result(compiled: _Compiled, value: object) -> str:
    try:
        return compiled.check_result(value)
    except Exception:
        return SHAPE
