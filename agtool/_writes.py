"""The write-once step: a write's idempotency key, its claim, and its settling.

A write body runs only for the caller that claimed its key; a repeat of the
key answers the first outcome. Waiting for a key held elsewhere is the
caller's to do (``time.sleep`` on the sync path, ``asyncio.sleep`` on the
async one), so this module never blocks.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ._answers import is_retryable
from ._keys import Keys
from ._outcome import Envelope
from ._store import WriteStore

__all__ = ["settle", "stored_envelope", "write_key"]

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


def settle(store: WriteStore, key: str, envelope: Envelope | None) -> None:
    """Store a write's outcome, or free its key when a retry should run it again."""
    try:
        if envelope is None or (not envelope["ok"] and is_retryable(envelope["error"])):
            store.release(key)
        else:
            store.finish(key, dict(envelope))
    except Exception:
        # The key stays claimed: repeats answer in_progress rather than write twice.
        _log.exception("idempotency store failed to settle %r", key)


def stored_envelope(outcome: object) -> Envelope | None:
    """The envelope a store kept, if it is one: ``ok`` true exactly when ``error`` is empty."""
    if not isinstance(outcome, dict):
        return None
    ok, error = outcome.get("ok"), outcome.get("error")
    if type(ok) is not bool or not isinstance(error, str) or ok != (error == ""):
        return None
    return {"ok": ok, "value": outcome.get("value"), "error": error}
