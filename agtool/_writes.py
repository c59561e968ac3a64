"""The write-once step: a write's idempotency key, its claim, and its settling.

A write body runs only for the caller that claimed its key; a repeat of the
key answers the first outcome. Once a body has started, its key is freed only
when it is known that nothing happened; anything else that keeps its outcome
from being stored leaves the key unknown, never free for a second write.
Waiting for a key held elsewhere is the caller's to do (``time.sleep`` on the
sync path, ``asyncio.sleep`` on the async one), so this module never blocks.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from ._contract import ToolContract
from ._keys import Keys
from ._outcome import Envelope
from ._reasons import shown
from ._records import redact_value
from ._scrub import call_secrets, log_scrubbed
from ._store import DONE, WriteStore, encode_outcome, orphan
from ._store.owners import landed

__all__ = ["mark_unknown", "release", "rotated_key", "settle_owed", "store_outcome",
           "stored_envelope", "write_key"]

_log = logging.getLogger("agtool")


def write_key(keys: Keys, tool: str, key_args: tuple[str, ...], args: dict[str, Any],
              exact: str, run_id: object, step_id: object) -> str | None:
    """The idempotency key, or ``None`` without a run id and step id or a business key.

    ``args`` is the checked snapshot; ``exact`` is the keyed digest of all of
    it: the business key when the contract names no ``key_args``. The business
    key is keyed (``keys``), so a low-entropy one cannot be found from the store.
    """
    if not isinstance(run_id, str) or not run_id or not isinstance(step_id, str) or not step_id:
        return None
    if any(arg not in args for arg in key_args):
        return None
    business = keys.digest({arg: args[arg] for arg in key_args}) if key_args else exact
    # A JSON list, so that colons inside a run id cannot make two keys alike.
    return json.dumps([run_id, step_id, tool, business[:32]]) if business else None


def rotated_key(keys: Keys, store: Callable[[], WriteStore], tool: str,
                key_args: tuple[str, ...], args: dict[str, Any], key: str, exact: str,
                run_id: object, step_id: object) -> tuple[str, str] | None:
    """The key and args digest a write claims: those made with an earlier secret of
    ``keys`` when the store holds that key (a write made before the secret changed is
    found, not made again), else ``key`` and ``exact``; ``None`` if the store cannot say."""
    try:
        for earlier in keys.earlier:
            old_exact = earlier.digest(args)
            old_key = write_key(earlier, tool, key_args, args, old_exact, run_id, step_id)
            if old_key is not None and store().lookup(old_key) is not None:
                return old_key, old_exact
    except Exception as exc:
        _log.error("idempotency store failed to look up %s under an earlier secret (%s)",
                   key, type(exc).__name__)
        return None
    return key, exact


def store_outcome(store: WriteStore, key: str, owner: str, envelope: Envelope,
                  contract: ToolContract, redacts: bool, args: dict[str, Any]) -> bool:
    """Keep a write's outcome for every repeat of its key; ``False`` if it is not kept.

    The stored value has the fields its return contract marks sensitive
    redacted: a repeat is answered that, never the secret in clear. An
    outcome that would not read back exactly (see ``encode_outcome``), or a
    store that fails or no longer holds this owner's claim, leaves the key
    unknown: the caller must then be told the outcome is not recorded. A
    store's error is logged scrubbed of the call's sensitive values (``args``
    and the returned ones): it may quote the outcome it was given.
    """
    try:
        kept = dict(envelope)
        if redacts and envelope["ok"]:
            kept["value"] = redact_value(contract, envelope["value"])
        encode_outcome(kept)
    except Exception as exc:  # a value whose own methods raise cannot be kept either
        _log.error("outcome of %s under %s cannot be stored exactly (%s): left unknown",
                   shown(contract.name), key,
                   exc if isinstance(exc, ValueError) else type(exc).__name__)
        mark_unknown(store, key, owner)
        return False
    try:
        if store.finish(key, owner, kept):
            settle_owed(store)
            return True
    except Exception as exc:
        if _kept_before(store, key, owner, kept):
            return True  # the finish landed and only its reply was lost
        log_scrubbed(_log, logging.ERROR, exc, call_secrets(contract, args, envelope["value"]),
                     "idempotency store failed to keep the outcome of %s (%s): left unknown",
                     key, type(exc).__name__)
        mark_unknown(store, key, owner)
        return False
    _log.error("the claim of %s was taken from this caller (forgotten or reconciled) before "
               "its outcome was kept", key)
    return False


def _kept_before(store: WriteStore, key: str, owner: str, kept: dict[str, Any]) -> bool:
    """Whether a finish whose reply was lost had landed: the key reads back done by this
    owner with this very outcome. ``False`` when that cannot be read either."""
    try:
        return landed(store.lookup(key), owner, DONE, kept)
    except Exception:
        return False


#: Claims this process gave up on because the store failed to settle them, by (owner, key),
#: with the store and the settling still owed: made good when the store next answers, so
#: that other processes, which see the owner alive, stop reading the key as pending.
_OWED: dict[tuple[str, str], WriteStore] = {}
_OWED_LOCK = threading.Lock()


def mark_unknown(store: WriteStore, key: str, owner: str) -> None:
    """Mark a key whose body started as having an unknown outcome; never raises."""
    try:
        store.mark_unknown(key, owner)
    except Exception as exc:
        # The row stays pending, but this process will do nothing more under it: every
        # reader here, and (by its lease) on other machines, then reads it unknown.
        _owe(store, key, owner)
        _log.error("idempotency store failed to mark %s unknown (%s)", key, type(exc).__name__)
        return
    settle_owed(store)


def release(store: WriteStore, key: str, owner: str) -> None:
    """Free a key whose body is known to have had no effect; never raises."""
    try:
        store.release(key, owner)
    except Exception as exc:
        _owe(store, key, owner)  # read unknown here: never run again on a guess
        _log.error("idempotency store failed to release %s (%s)", key, type(exc).__name__)
        return
    settle_owed(store)


def _owe(store: WriteStore, key: str, owner: str) -> None:
    orphan(owner, key)
    with _OWED_LOCK:
        _OWED[(owner, key)] = store


def settle_owed(store: WriteStore) -> None:
    """Settle, on ``store`` that just answered, the claims it failed to settle before, so
    that no key stays pending under this live process: each is marked unknown, as this
    process has read it since (a release owed too: it may have been answered unknown).
    Never raises; what fails again stays owed."""
    with _OWED_LOCK:
        owed = [pair for pair, held in _OWED.items() if held is store]
    for owner, key in owed:
        try:
            store.mark_unknown(key, owner)
        except Exception:
            return  # still failing: the next answer tries again
        with _OWED_LOCK:
            _OWED.pop((owner, key), None)


def stored_envelope(outcome: object) -> Envelope | None:
    """The envelope a store kept, if it is one: ``ok`` true exactly when ``error`` is empty."""
    if not isinstance(outcome, dict):
        return None
    ok, error = outcome.get("ok"), outcome.get("error")
    if type(ok) is not bool or not isinstance(error, str) or ok != (error == ""):
        return None
    return {"ok": ok, "value": outcome.get("value"), "error": error}
