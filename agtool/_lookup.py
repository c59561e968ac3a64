"""The lookup step: a tool's name to its compiled ``Tool``, following the live table.

The table is kept by reference, so tools added to it, or entries replaced in
it, take effect on their next call; they are validated then, and a broken
entry answers ``bad_contract`` rather than raising. Lookups stay safe while
other threads change the table: each reads one entry once, and what it
compiles replaces what was there.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ._call import BROKEN, UNKNOWN, Refusal
from ._contract import ToolContract, check_table, parse_entry
from ._errors import ContractError
from ._stats import Counts
from ._steps import Runtime, Tool

__all__ = ["Registry"]

_log = logging.getLogger("agtool")


class Registry:
    """The compiled tools of one table, with one ``Counts`` per name for the gate's life."""

    def __init__(self, table: Mapping[str, Mapping[str, Any]],
                 contracts: Mapping[str, ToolContract], scope: frozenset[str],
                 runtime: Runtime) -> None:
        self.table = table
        self.counts: dict[str, Counts] = {}
        self._scope = scope
        self._runtime = runtime
        #: The tools compiled so far, by name: the gate's entry points route a call by it,
        #: and each tool's entry checks that its table entry is still the one it compiled.
        self.compiled: dict[str, Tool] = {
            name: Tool(table[name], contract, self.counts_for(name), scope, runtime)
            for name, contract in contracts.items()}

    def counts_for(self, name: str) -> Counts:
        return self.counts.setdefault(name, Counts())

    def lookup(self, name: object) -> Tool | Refusal:
        """The compiled tool called ``name``, or the ``Refusal`` of a name with none."""
        tool = self.compiled.get(name) if type(name) is str else None
        if tool is not None:
            # Identity, not equality: cheap enough for every call, and swapping an
            # entry, its fn, its args or its returns takes effect on the next call.
            try:
                entry = self.table.get(tool.name)
                if (entry is tool.entry and entry["fn"] is tool.fn
                        and entry["args"] is tool.args and entry["returns"] is tool.returns):
                    return tool
            except Exception:  # noqa: S110 - the table or its entry changed under us: look again
                pass
        return self._look_again(name)

    def _look_again(self, name: object) -> Tool | Refusal:
        if type(name) is not str:
            return UNKNOWN
        try:
            entry = self.table.get(name)
        except Exception:  # a table whose lookup raises has no such tool
            return UNKNOWN
        if entry is None:
            return UNKNOWN
        return self._recompile(name, entry)

    def _recompile(self, name: str, entry: Any) -> Tool | Refusal:
        if self.compiled.pop(name, None) is not None:
            # What the old contract remembered was checked against the old contract.
            self._runtime.memo.forget(lambda key: key[0] == name)  # type: ignore[index]
        try:
            tool = Tool(entry, parse_entry(name, entry), self.counts_for(name), self._scope,
                        self._runtime)
        except ContractError as exc:
            # Registration already refused the table as it was; an entry broken
            # afterwards must still not crash an agent's run.
            _log.error("contract refused at call time: %s", exc)
            return BROKEN
        except Exception:  # an entry that cannot even be read (its own methods raise)
            _log.error("contract of a tool could not be read at call time")
            return BROKEN
        self.compiled[name] = tool
        return tool

    def refresh(self) -> None:
        """Revalidate the whole table now; raises ``ContractError`` if it is malformed."""
        check_table(self.table)
        self.compiled.clear()

