"""``agtool writes list|resolve|forget --store ...``: an operator's view of a write store.

A key whose write started and whose outcome nobody knows (an interrupted
body, a crashed process, a store that failed to keep the outcome) is never
run again on a guess: every repeat answers ``write:unknown`` until an
operator has checked the world and either resolves the key with what
happened (``--value`` for the write's value, ``--error`` for a failure) or
forgets it (the next call runs the body again).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from .._errors import TableError
from .._store import StoredWrite, WriteStore, open_store

__all__ = ["add_writes"]


def add_writes(commands: Any) -> None:
    writes = commands.add_parser("writes", help="list, resolve or forget the keys of a write "
                                                "store that are pending or unknown")
    actions = writes.add_subparsers(dest="writes_command", required=True)
    listing = actions.add_parser("list", help="every pending or unknown key, oldest first")
    _add_store(listing)
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    listing.set_defaults(run=_list)
    resolve = actions.add_parser("resolve", help="answer a pending or unknown key with what "
                                                 "the world shows happened")
    _add_store(resolve)
    resolve.add_argument("key", help="the key, as `agtool writes list` shows it")
    answer = resolve.add_mutually_exclusive_group(required=True)
    answer.add_argument("--value", type=_json, help="the write's value, as JSON: it happened")
    answer.add_argument("--error", help="a reason to answer instead (e.g. raised:Declined)")
    resolve.set_defaults(run=_resolve)
    forget = actions.add_parser("forget", help="drop a key: the next call runs its body again")
    _add_store(forget)
    forget.add_argument("key", help="the key, as `agtool writes list` shows it")
    forget.set_defaults(run=_forget)


def _add_store(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", required=True, metavar="PATH|URL",
                        help="a SQLite file, or a postgresql:// URL")


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not JSON: {text!r}") from None


@contextmanager
def _opened(where: str) -> Iterator[WriteStore]:
    """The store at ``where``, closed when the command is done with it."""
    # An operator's typo must not be answered by a new, empty store that lists nothing.
    if not where.startswith(("postgresql://", "postgres://")) and not os.path.isfile(where):
        raise TableError(f"--store {where}: no such store file")
    try:
        store = open_store(where)
    except (sqlite3.Error, OSError) as exc:
        raise TableError(f"--store {where}: {exc}") from None
    try:
        yield store
    finally:
        store.close()


def _list(args: argparse.Namespace) -> int:
    with _opened(args.store) as store:
        for entry in store.pending():
            print(json.dumps(_as_dict(entry)) if args.json else _line(entry))
    return 0


def _as_dict(entry: StoredWrite) -> dict[str, Any]:
    return {"key": entry.key, "tool": entry.tool, "state": entry.state,
            "claimed_at": _when(entry.claimed_at), "owner": entry.owner,
            "lease_until": _when(entry.lease_until)}


def _line(entry: StoredWrite) -> str:
    when = _when(entry.claimed_at)
    return f"{entry.state:<8} {entry.tool:<24} {when}  {entry.owner}  {entry.key}"


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")


def _resolve(args: argparse.Namespace) -> int:
    if args.error is not None and not args.error.strip():
        print("agtool writes resolve: --error needs a reason", file=sys.stderr)
        return 2
    outcome = ({"ok": True, "value": args.value, "error": ""} if args.error is None
               else {"ok": False, "value": None, "error": args.error})
    with _opened(args.store) as store:
        try:
            changed = store.resolve(args.key, outcome)
        except ValueError as exc:  # a --value the store cannot keep exactly (NaN, ...)
            print(f"agtool writes resolve: {exc}", file=sys.stderr)
            return 2
    return _done("resolve", changed, f"resolved {args.key}",
                 f"no pending or unknown key {args.key}")


def _forget(args: argparse.Namespace) -> int:
    with _opened(args.store) as store:
        forgotten = store.forget(args.key)
    return _done("forget", forgotten, f"forgot {args.key}", f"no key {args.key}")


def _done(command: str, changed: bool, done: str, missing: str) -> int:
    """The command's line and status: 0 when it changed the key, 1 when there was none."""
    if not changed:
        print(f"agtool writes {command}: {missing}", file=sys.stderr)
        return 1
    print(done)
    return 0
