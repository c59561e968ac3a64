"""A gate whose bodies are a framework's own tools, bound one call at a time.

An adapter that gates tools an agent already has (pydantic-ai's
``GateCapability``) calls a *shadow* of the caller's gate: the same table,
scope, write store, records and memo settings, but every ``fn`` replaced by a
stand-in (``_Body``) that awaits the framework's own tool bound to the call
under way. The gate looks the tool up, authorizes, checks the args, consults
the memo or claims the write's key, and only then calls the stand-in, so the
framework's tool runs with the checked args, or not at all.

A framework's control-flow exception raised by its tool (a retry request, a
deferral) is carried through the gate as ``Escape``, a ``NotApplied``: the
tool stopped before its effect, a write's key is freed, and ``bound`` raises
the framework's own exception again for the framework to handle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from ._errors import NotApplied
from ._gate import Gate
from ._keys import inherited_keys

__all__ = ["AsyncBody", "Escape", "bound", "shadow", "shadow_gate"]

#: The framework's tool for the call under way: ``args -> awaitable value``.
AsyncBody = Callable[[dict[str, Any]], Awaitable[Any]]

_BOUND: ContextVar[tuple[str, AsyncBody] | None] = ContextVar("agtool_shadow_bound",
                                                              default=None)


class Escape(NotApplied):
    """A framework's exception raised by its tool, carried through the gate unchanged."""

    def __init__(self, signal: Exception) -> None:
        super().__init__()
        self.signal = signal


class _Body:
    """A table entry's ``fn``: awaits the framework's tool bound to the call under way."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def __call__(self, /, **args: Any) -> Any:
        tool = _BOUND.get()
        if tool is None or tool[0] != self.name:
            raise RuntimeError(f"{self.name} was called outside a framework's call of it")
        return await tool[1](args)


class _Bodies(Mapping[str, Mapping[str, Any]]):
    """The caller's table, live, with each entry's ``fn`` replaced by a stand-in body.

    A copy is kept while the entry, its ``fn``, ``args`` and ``returns`` are the
    same objects, so the gate sees a replaced entry as replaced and an unchanged
    one as unchanged (and compiles it once).
    """

    def __init__(self, table: Mapping[str, Mapping[str, Any]],
                 body: Callable[[str], Callable[..., Any]]) -> None:
        self._table = table
        self._body = body
        self._copies: dict[str, tuple[tuple[object, ...], dict[str, Any]]] = {}

    def __getitem__(self, name: str) -> Mapping[str, Any]:
        entry = self._table[name]
        if not isinstance(entry, Mapping):
            return entry  # the gate refuses it as it is
        kept = self._copies.get(name)
        # Read on every call (the gate's check that its entry is still the one compiled):
        # compared in place, with no tuple or generator made for the common "unchanged".
        if kept is not None:
            seen = kept[0]
            if (seen[0] is entry and seen[1] is entry.get("fn") and seen[2] is entry.get("args")
                    and seen[3] is entry.get("returns")):
                return kept[1]
        copy = {**entry, "fn": self._body(name)}
        self._copies[name] = ((entry, entry.get("fn"), entry.get("args"), entry.get("returns")),
                              copy)
        return copy

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


def shadow_gate(gate: Gate, body: Callable[[str], Callable[..., Any]]) -> Gate:
    """A gate over ``gate``'s table whose every ``fn`` is ``body(name)``, sharing its scope,
    write store, records, memo settings, secret (and old secrets), lease, workers and
    tracing: a call through it is keyed, leased, run and traced as through ``gate``."""
    runtime = gate._runtime
    with inherited_keys(runtime.keys):
        inner = Gate(_Bodies(gate.table, body), scope=gate.scope, store=gate.store,
                     records=gate.records, pending_wait=gate.pending_wait,
                     memo_size=gate.cache.size, memo_bytes=gate.cache.max_bytes,
                     memo_ttl=gate.memo_ttl,
                     clock=gate.cache.clock, lease=runtime.lease, workers=runtime.pool.size)
    inner._runtime.pool = runtime.pool
    # A gate agtool.otel traces has a sink that traces a gate made with it alike.
    trace_copy = getattr(gate.records, "trace_copy", None)
    if trace_copy is not None:
        trace_copy(inner)
    return inner


def shadow(gate: Gate) -> Gate:
    """``shadow_gate`` whose bodies await the framework's tool bound by ``bound``."""
    return shadow_gate(gate, _Body)


class bound:  # used as the function it was: ``with bound(name, tool):``
    """``tool`` is the body of ``name`` for the call made inside; an ``Escape`` from it is
    raised as the framework's own exception.

    A class, not a ``contextmanager`` generator: entered on every gated call, where a
    generator's frames cost about as much as the gate's own steps.
    """

    __slots__ = ("token", "tool")

    def __init__(self, name: str, tool: AsyncBody) -> None:
        self.tool = (name, tool)

    def __enter__(self) -> None:
        self.token = _BOUND.set(self.tool)

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        _BOUND.reset(self.token)
        if isinstance(error, Escape):
            raise error.signal from None
