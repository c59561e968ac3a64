"""A gate's secret, and the keyed digests and signatures made with it.

Every digest of arguments that anyone outside the gate can see (a plan's, a
record's, the store's ``args_digest`` column, the business part of an
idempotency key, the memo key of a tool with sensitive arguments) is an HMAC
under a key derived from one secret, so a low-entropy value (a 4-digit PIN)
cannot be found by digesting every candidate. Approvals are tokens signed
under a second key derived from the same secret (``_authority``), so nobody
without it can make one.

Where a gate's secret comes from, the first that applies:

1. ``Gate(secret=...)``, bytes or str;
2. the ``AGTOOL_SECRET`` environment variable;
3. the secret of a gate already using the same store object: gates sharing
   a store must digest alike, or a replay would answer ``write:conflict``;
4. the key file beside a SQLite file store (``<path>.key``, 32 random bytes,
   made ``0600`` on first use);
5. a fresh random secret, for an in-memory store: nothing outside the
   process can verify or brute-force what it keys.

Any other store (no ``path``, or a ``path`` that is not a file: a server
store shared by several machines) needs an explicit secret, since machines
and restarts must agree on every digest.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import weakref
from collections.abc import Hashable

from ._memo import cache_key

__all__ = ["ENV_SECRET", "MIN_SECRET_BYTES", "Keys", "bind_store", "canonical_key",
           "gate_keys", "secret_bytes"]

#: The environment variable a secret is read from when the gate is given none.
ENV_SECRET = "AGTOOL_SECRET"  # noqa: S105 - a variable name, not a secret
#: A shorter secret could be guessed: refused when it is given.
MIN_SECRET_BYTES = 16
#: The size of a secret made here, for a key file or an in-memory store.
_NEW_SECRET_BYTES = 32
#: The sub-key labels: one secret, a separate key for each job.
_ARGS_LABEL = b"agtool/args-digest/v1"
_APPROVALS_LABEL = b"agtool/approval-token/v1"
#: Stores in use, with the keys of the first gate that used them.
_BOUND: weakref.WeakKeyDictionary[object, Keys] = weakref.WeakKeyDictionary()
#: ``Keys.recent`` holds at most this many digests of texts at most this long.
_RECENT_SIZE = 4096
RECENT_TEXT = 512


def canonical_key(value: object) -> Hashable | None:
    """The canonical form of a value (key order free, types kept), or ``None`` if it has none.

    A value that is not made of JSON-like builtins (an object, a ``Money``)
    has none: it is never digested through its ``repr``, which two different
    values may share.
    """
    return cache_key("", value if isinstance(value, dict) else {"": value})


class Keys:
    """One secret's sub-keys: for args digests, and for approval tokens.

    The secret itself is not kept, and no ``repr`` shows a key.
    """

    __slots__ = ("_approvals", "_args", "recent")

    def __init__(self, secret: bytes | str) -> None:
        raw = secret_bytes(secret, "secret")
        self._args = hmac.digest(raw, _ARGS_LABEL, "sha256")
        self._approvals = hmac.digest(raw, _APPROVALS_LABEL, "sha256")
        #: Digests of short canonical texts of *redacted* args, which a record repeats
        #: on every memo hit (``_records``); never a digest of a sensitive value.
        self.recent: dict[bytes, str] = {}

    def __repr__(self) -> str:
        return "<Keys>"

    def digest(self, value: object) -> str:
        """The keyed digest of ``value``'s canonical form; ``""`` if it has none."""
        return self.digest_of(canonical_key(value))

    def digest_of(self, key: Hashable | None) -> str:
        """The keyed digest of a ``canonical_key``; ``""`` for ``None``."""
        if key is None:
            return ""
        try:
            text = repr(key).encode("utf-8", "surrogatepass")
        except Exception:  # nothing in a canonical key raises, but a digest never does
            return ""
        return hmac.digest(self._args, text, "sha256").hex()

    def remembered(self, key: Hashable | None) -> str:
        """``digest_of(key)``, kept in ``recent`` when the key is one short orjson text."""
        text = key[3] if isinstance(key, tuple) else None
        if type(text) is not bytes or len(text) > RECENT_TEXT:
            return self.digest_of(key)
        recent = self.recent
        hexed = recent.get(text)
        if hexed is None:
            hexed = self.digest_of(key)
            if len(recent) >= _RECENT_SIZE:
                recent.clear()
            recent[text] = hexed
        return hexed

    def sign(self, message: bytes) -> bytes:
        """The approval key's HMAC-SHA256 of ``message``."""
        return hmac.digest(self._approvals, message, "sha256")


def secret_bytes(secret: object, where: str) -> bytes:
    """A given secret as bytes; ``ValueError`` (naming ``where``) if it is too short."""
    if isinstance(secret, str):
        raw = secret.encode("utf-8", "surrogatepass")
    elif isinstance(secret, bytes):
        raw = bytes(secret)
    else:
        raise TypeError(f"{where} must be bytes or str, got {type(secret).__name__}")
    if len(raw) < MIN_SECRET_BYTES:
        raise ValueError(f"{where} is {len(raw)} bytes; a secret needs at least "
                         f"{MIN_SECRET_BYTES} (e.g. secrets.token_hex(32))")
    return raw


def gate_keys(secret: bytes | str | None, store: object) -> Keys:
    """The keys of a gate given ``secret`` (or ``None``) and its ``store`` (or ``None``)."""
    if secret is not None:
        return Keys(secret_bytes(secret, "secret="))
    from_env = os.environ.get(ENV_SECRET)
    if from_env:
        return Keys(secret_bytes(from_env, ENV_SECRET))
    if store is None:
        return Keys(secrets.token_bytes(_NEW_SECRET_BYTES))
    bound = _bound(store)
    if bound is not None:
        return bound
    path = getattr(store, "path", None)
    if path in (":memory:", ""):  # SQLite's private databases: nobody else reads them
        return Keys(secrets.token_bytes(_NEW_SECRET_BYTES))
    if isinstance(path, str) and os.path.isfile(path):
        return Keys(_key_file(path + ".key"))
    raise ValueError(
        f"a {type(store).__name__} is not a SQLite file: give the gate its secret with "
        f"Gate(secret=...) or the {ENV_SECRET} environment variable, the same on every "
        "machine that shares the store (digests must agree across machines and restarts)")


def bind_store(store: object, keys: Keys) -> None:
    """Record that ``store`` is used with ``keys``, unless another gate's keys came first."""
    # A store that cannot be weakly referenced or hashed is not shared this way.
    with contextlib.suppress(TypeError):
        _BOUND.setdefault(store, keys)


def _bound(store: object) -> Keys | None:
    try:
        return _BOUND.get(store)
    except TypeError:
        return None


def _key_file(path: str) -> bytes:
    """The secret in ``path``, made first if there is none (two processes racing agree)."""
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    # Written whole under a private name, then linked into place: a link never replaces a
    # file, so of racing processes exactly one key wins, and nobody reads it half written.
    temporary = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(secrets.token_bytes(_NEW_SECRET_BYTES))
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: its key wins
            os.link(temporary, path)
    finally:
        os.unlink(temporary)
    return _read_key(path)


def _read_key(path: str) -> bytes:
    with open(path, "rb") as kept:
        return secret_bytes(kept.read(), f"the key file {path!r}")
