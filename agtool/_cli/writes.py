"""``agtool writes list|resolve|forget|rekey --store ...``: an operator's view of a write store.

A key whose write started and whose outcome nobody knows (an interrupted
body, a crashed process, a store that failed to keep the outcome) is never
run again on a guess: every repeat answers ``write:unknown`` until an
operator has checked the world and either resolves the key with what
happened (``--value`` for the write's value, ``--error`` for a failure) or
forgets it (the next call runs the body again).

``list`` shows every open key with its owner and why it is stuck, and a row
that cannot be read as damaged, with its key; every name is printed escaped,
so a tool name cannot move the operator's cursor. ``rekey`` moves a store to
a new secret (``AGTOOL_SECRET``): the old secrets (``AGTOOL_OLD_SECRETS``,
and the key file beside a SQLite store) are sealed into the store with the
new one, so a gate given only the new secret finds every earlier key.
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
from .._keys import (
    ENV_OLD_SECRETS,
    ENV_SECRET,
    Keys,
    key_file_secret,
    old_secrets_from_env,
    seal,
    secret_bytes,
)
from .._store import StoredWrite, WriteStore, open_store
from .._store.base import DONE, PENDING
from .._store.owners import owner_alive

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
    rekey = actions.add_parser("rekey", help=f"move a store to the secret in {ENV_SECRET}, "
                                             f"sealing the old ones ({ENV_OLD_SECRETS}, the key "
                                             "file) into it")
    _add_store(rekey)
    rekey.set_defaults(run=_rekey)


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
        listed = getattr(store, "listing", None)
        rows = listed() if listed is not None else [
            (entry.key, entry) for entry in store.pending()]
        for key, entry in rows:
            shown = _as_dict(key, entry)
            print(json.dumps(shown) if args.json else _line(shown))
    return 0


def _as_dict(key: object, entry: StoredWrite | str) -> dict[str, Any]:
    """A listed row, every field printable; a row the store could not read is ``damaged``."""
    if isinstance(entry, str):
        return {"key": _escaped(key), "state": "damaged", "tool": "", "claimed_at": "",
                "owner": "", "lease_until": "", "why": entry}
    return {"key": _escaped(entry.key), "tool": _escaped(entry.tool), "state": entry.state,
            "claimed_at": _when(entry.claimed_at), "owner": _escaped(entry.owner),
            "lease_until": _when(entry.lease_until), "why": _why(entry)}


def _why(entry: StoredWrite) -> str:
    """Why an open key is stuck, in words an operator acts on."""
    alive = owner_alive(entry.owner) if isinstance(entry.owner, str) else None
    if entry.state == PENDING:
        if alive:
            return "its owner runs on this machine: wait for it"
        return f"held by an owner elsewhere until its lease ends ({_when(entry.lease_until)})"
    if entry.state == DONE:
        return "done"
    if alive is False:
        return "its owner died mid-write: check the world, then resolve or forget"
    return "its outcome is not known: check the world, then resolve or forget"


def _escaped(value: object) -> str:
    """``value`` as text with every control and non-printable character escaped."""
    text = value if isinstance(value, str) else repr(value)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _line(shown: dict[str, Any]) -> str:
    return (f"{shown['state']:<8} {shown['tool']:<24} {shown['claimed_at']}  {shown['owner']}"
            f"  {shown['key']}  ({shown['why']})")


def _when(seconds: object) -> str:
    try:
        return datetime.fromtimestamp(float(seconds), timezone.utc).isoformat(  # type: ignore[arg-type]
            timespec="seconds")
    except (TypeError, ValueError, OverflowError, OSError):
        return f"damaged time {_escaped(seconds)}"


def _rekey(args: argparse.Namespace) -> int:
    new_secret = os.environ.get(ENV_SECRET, "")
    if not new_secret:
        print(f"agtool writes rekey: set {ENV_SECRET} to the new secret", file=sys.stderr)
        return 2
    new = Keys(secret_bytes(new_secret, ENV_SECRET), ENV_SECRET)
    olds = [secret_bytes(old, ENV_OLD_SECRETS) for old in old_secrets_from_env()]
    key_file = f"{args.store}.key"
    if os.path.isfile(key_file):
        olds.append(key_file_secret(key_file))
    with _opened(args.store) as store:
        marks: dict[str, str] = store.marks()  # type: ignore[attr-defined]
        made = {name.split(":", 1)[1] for name in marks if name.startswith("secret:")}
        by_print = {Keys(old).fingerprint: old for old in olds}
        missing = sorted(made - set(by_print) - {new.fingerprint})
        if missing:
            print(f"agtool writes rekey: {args.store} holds keys of secret(s) "
                  f"{', '.join(missing)}, which neither {ENV_OLD_SECRETS} nor the key file "
                  "holds", file=sys.stderr)
            return 2
        for fingerprint in sorted(made - {new.fingerprint}):
            store.add_mark(*seal(new, by_print[fingerprint]))  # type: ignore[attr-defined]
        store.add_mark(f"secret:{new.fingerprint}", ENV_SECRET)  # type: ignore[attr-defined]
    print(f"rekeyed {args.store}: keys of {', '.join(sorted(made)) or 'no secret'} now open "
          f"with {new.fingerprint} ({ENV_SECRET})")
    return 0


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
