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

A store records the fingerprint of every secret that made keys in it
(``check_store``). A gate whose secret, and old secrets (``old_secrets=``,
``AGTOOL_OLD_SECRETS``), do not include each of them is refused with a
one-line ``SecretMismatch``: its keys would miss every key already there, and
a write whose outcome is kept, or unknown, would run again. With the old
secrets given, keys and approvals made with them are still found and
honoured (``Keys.earlier``), and new ones are made with the new secret.
``agtool writes rekey`` keeps the old secrets in the store itself, sealed
with the new one (``seal``), so that the new secret alone opens it.
"""

from __future__ import annotations

import contextlib
import contextvars
import hmac
import os
import secrets
import weakref
from collections.abc import Hashable, Iterable, Iterator

from ._errors import AgtoolError
from ._memo import cache_key

__all__ = ["ENV_OLD_SECRETS", "ENV_SECRET", "MIN_SECRET_BYTES", "Keys", "SecretMismatch",
           "StoreRefused",
           "bind_store", "canonical_key", "check_store", "gate_keys", "inherited_keys",
           "key_file_secret",
           "old_secrets_from_env",
           "seal", "secret_bytes", "unseal"]

#: The environment variable a secret is read from when the gate is given none.
ENV_SECRET = "AGTOOL_SECRET"  # noqa: S105 - a variable name, not a secret
#: Secrets a store's earlier keys were made with, comma-separated, for a gate given none.
ENV_OLD_SECRETS = "AGTOOL_OLD_SECRETS"
#: A shorter secret could be guessed: refused when it is given.
MIN_SECRET_BYTES = 16
#: The size of a secret made here, for a key file or an in-memory store.
_NEW_SECRET_BYTES = 32
#: The sub-key labels: one secret, a separate key for each job.
_ARGS_LABEL = b"agtool/args-digest/v1"
_APPROVALS_LABEL = b"agtool/approval-token/v1"
_FINGERPRINT_LABEL = b"agtool/secret-fingerprint/v1"
_SEAL_LABEL = b"agtool/sealed-old-secret/v1"
#: A store's mark names: ``secret:<fingerprint>`` (its value: where that secret came from)
#: and ``sealed:<fingerprint>:<by>`` (an old secret sealed with the secret ``by``).
_MARK, _SEALED = "secret:", "sealed:"
#: The mark holding a store's own random id, which its key file records.
_STORE_ID = "store"
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


class StoreRefused(AgtoolError, ValueError):
    """A store or key file that cannot be used as it is, said in one line."""


class SecretMismatch(StoreRefused):
    """A store whose keys were made with a secret this gate does not have."""


class Keys:
    """One secret's sub-keys: for args digests, and for approval tokens.

    The secret itself is not kept, and no ``repr`` shows a key. ``fingerprint``
    names the secret without giving it away; ``source`` says where it came
    from; ``earlier`` are the keys of the old secrets it still reads with.
    """

    __slots__ = ("_approvals", "_args", "_seal", "earlier", "fingerprint", "key_file",
                 "keyed_store", "recent", "source")

    def __init__(self, secret: bytes | str, source: str = "secret=",
                 earlier: Iterable[Keys] = ()) -> None:
        raw = secret_bytes(secret, "secret")
        self._args = hmac.digest(raw, _ARGS_LABEL, "sha256")
        self._approvals = hmac.digest(raw, _APPROVALS_LABEL, "sha256")
        self._seal = hmac.digest(raw, _SEAL_LABEL, "sha256")
        self.fingerprint = hmac.digest(raw, _FINGERPRINT_LABEL, "sha256").hex()[:16]
        self.source = source
        #: The key file the secret was read from, and the id of the store it says it keyed.
        self.key_file = ""
        self.keyed_store = ""
        self.earlier: tuple[Keys, ...] = tuple(
            keys for keys in earlier if keys.fingerprint != self.fingerprint)
        #: Digests of short canonical texts of *redacted* args, which a record repeats
        #: on every memo hit (``_records``); never a digest of a sensitive value.
        self.recent: dict[bytes, str] = {}

    def with_earlier(self, earlier: Iterable[Keys]) -> Keys:
        """These keys, also reading with ``earlier`` (each once)."""
        known = {keys.fingerprint: keys for keys in (*self.earlier, *earlier)}
        self.earlier = tuple(keys for fp, keys in known.items() if fp != self.fingerprint)
        return self

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


def old_secrets_from_env() -> list[str]:
    """The old secrets ``AGTOOL_OLD_SECRETS`` names (comma-separated), in order."""
    return [part for part in os.environ.get(ENV_OLD_SECRETS, "").split(",") if part]


#: Keys a gate being made inherits from another (``inherited_keys``), before anything else.
_INHERITED: contextvars.ContextVar[Keys | None] = contextvars.ContextVar(
    "agtool_inherited_keys", default=None)


@contextlib.contextmanager
def inherited_keys(keys: Keys) -> Iterator[None]:
    """Gates made inside this block use ``keys``: an adapter's inner gate digests, keys its
    writes and verifies approvals exactly as the caller's gate does, whatever the
    environment says."""
    token = _INHERITED.set(keys)
    try:
        yield
    finally:
        _INHERITED.reset(token)


def gate_keys(secret: bytes | str | None, store: object,
              old_secrets: Iterable[bytes | str] | None = None) -> Keys:
    """The keys of a gate given ``secret`` (or ``None``), ``old_secrets`` (or ``None``: the
    environment's) and its ``store`` (or ``None``)."""
    inherited: Keys | None = _INHERITED.get()
    if inherited is not None:
        return inherited
    keys = _new_keys(secret, store)
    olds = old_secrets_from_env() if old_secrets is None else list(old_secrets)
    where = "old_secrets=" if old_secrets is not None else ENV_OLD_SECRETS
    return keys.with_earlier(Keys(secret_bytes(old, where), where) for old in olds)


def _new_keys(secret: bytes | str | None, store: object) -> Keys:
    if secret is not None:
        return Keys(secret_bytes(secret, "secret="), "secret=")
    from_env = os.environ.get(ENV_SECRET)
    if from_env:
        return Keys(secret_bytes(from_env, ENV_SECRET), ENV_SECRET)
    if store is None:
        return Keys(secrets.token_bytes(_NEW_SECRET_BYTES), "a fresh random secret")
    bound = _bound(store)
    if bound is not None:
        return bound
    path = getattr(store, "path", None)
    if path in (":memory:", ""):  # SQLite's private databases: nobody else reads them
        return Keys(secrets.token_bytes(_NEW_SECRET_BYTES), "a fresh random secret")
    if isinstance(path, str) and os.path.isfile(path):
        return _key_file_keys(store, path + ".key")
    raise ValueError(
        f"a {type(store).__name__} is not a SQLite file: give the gate its secret with "
        f"Gate(secret=...) or the {ENV_SECRET} environment variable, the same on every "
        "machine that shares the store (digests must agree across machines and restarts)")


def bind_store(store: object, keys: Keys) -> None:
    """Record that ``store`` is used with ``keys``, unless another gate's keys came first;
    ``SecretMismatch`` if the store's keys were made with a secret ``keys`` lack."""
    check_store(store, keys)
    # A store that cannot be weakly referenced or hashed is not shared this way.
    with contextlib.suppress(TypeError):
        _BOUND.setdefault(store, keys)


def check_store(store: object, keys: Keys) -> None:
    """Refuse ``store`` if a secret ``keys`` cannot read with made keys in it; else record
    ``keys``'s fingerprint there. A store that keeps no marks is not checked."""
    if getattr(store, "marks", None) is None:
        return
    marks = _marks(store)
    _check_key_file(store, keys, marks)
    keys.with_earlier(_unsealed(marks, keys))
    known = {keys.fingerprint, *(old.fingerprint for old in keys.earlier)}
    for name, source in sorted(marks.items()):
        fingerprint = name[len(_MARK):]
        if name.startswith(_MARK) and fingerprint not in known:
            raise SecretMismatch(
                f"{_shown_store(store)} holds keys made with secret {fingerprint} (from "
                f"{source}); this gate's secret is {keys.fingerprint} (from {keys.source}): "
                f"give the old one as old_secrets= or {ENV_OLD_SECRETS}, or move the store "
                "to the new secret with `agtool writes rekey`")
    if _MARK + keys.fingerprint not in marks:
        store.add_mark(_MARK + keys.fingerprint, keys.source)  # type: ignore[attr-defined]


def _check_key_file(store: object, keys: Keys, marks: dict[str, str]) -> None:
    """A store and its key file each name the other: a key file that keyed another store
    (this one emptied, truncated or replaced) is refused, never taken as a fresh start."""
    if not keys.key_file:
        return
    if _STORE_ID not in marks:
        store.add_mark(_STORE_ID, secrets.token_hex(8))  # type: ignore[attr-defined]
        marks.update(_marks(store))  # of racing processes, the first id stays
    if not keys.keyed_store:
        _note_keyed_store(keys.key_file, marks[_STORE_ID])
        keys.keyed_store = marks[_STORE_ID]
    elif keys.keyed_store != marks[_STORE_ID]:
        raise StoreRefused(
            f"the key file {keys.key_file!r} keyed the store {keys.keyed_store}, and "
            f"{_shown_store(store)} is not it (it was emptied, truncated or replaced): "
            "restore it, or remove the key file to start a new store on purpose")


def _shown_store(store: object) -> str:
    path = getattr(store, "path", None)
    return f"the store {path!r}" if isinstance(path, str) else f"the {type(store).__name__}"


def seal(keys: Keys, old_secret: bytes) -> tuple[str, str]:
    """A store mark keeping ``old_secret`` sealed with ``keys``: only the same secret opens
    it, and a changed byte is refused. HMAC-SHA256 in counter mode as the keystream under
    a fresh nonce, then HMAC-SHA256 over the nonce and the sealed bytes (encrypt-then-MAC)."""
    old = Keys(old_secret)
    nonce = secrets.token_bytes(16)
    sealed = bytes(a ^ b for a, b in zip(old_secret, _stream(keys, nonce, len(old_secret)),
                                         strict=True))
    tag = hmac.digest(keys._seal, b"tag" + nonce + sealed, "sha256")
    return f"{_SEALED}{old.fingerprint}:{keys.fingerprint}", (nonce + sealed + tag).hex()


def unseal(keys: Keys, text: str) -> bytes | None:
    """What ``seal`` sealed with ``keys``, or ``None`` if it was not, or was changed."""
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        return None
    nonce, sealed, tag = raw[:16], raw[16:-32], raw[-32:]
    expected = hmac.digest(keys._seal, b"tag" + nonce + sealed, "sha256")
    if len(raw) < 48 + MIN_SECRET_BYTES or not hmac.compare_digest(tag, expected):
        return None
    return bytes(a ^ b for a, b in zip(sealed, _stream(keys, nonce, len(sealed)), strict=True))


def _stream(keys: Keys, nonce: bytes, size: int) -> bytes:
    blocks = (hmac.digest(keys._seal, b"stream" + nonce + n.to_bytes(4, "big"), "sha256")
              for n in range(size // 32 + 1))
    return b"".join(blocks)[:size]


def _unsealed(marks: dict[str, str], keys: Keys) -> list[Keys]:
    """The old secrets sealed in ``marks`` with ``keys`` (or with old secrets opened so)."""
    found: list[Keys] = []
    openers = [keys]
    while openers:
        opener = openers.pop()
        for name, text in marks.items():
            if not (name.startswith(_SEALED) and name.endswith(":" + opener.fingerprint)):
                continue
            raw = unseal(opener, text)
            if raw is not None and all(k.fingerprint != Keys(raw).fingerprint for k in found):
                opened = Keys(raw, f"a secret sealed in the store by {opener.fingerprint}")
                found.append(opened)
                openers.append(opened)
    return found


def secret_marks(marks: dict[str, str]) -> dict[str, str]:
    """The fingerprints a store's marks record keys of, each with where its secret came from."""
    return {name[len(_MARK):]: source for name, source in marks.items()
            if name.startswith(_MARK)}


def _bound(store: object) -> Keys | None:
    try:
        return _BOUND.get(store)
    except TypeError:
        return None


def _key_file_keys(store: object, path: str) -> Keys:
    """The keys of the key file ``path`` of ``store``; a missing key file is made only for
    a store that never held keys (else its keys would all be lost: ``StoreRefused``)."""
    if not os.path.exists(path):
        marks = _marks(store)
        made = sorted(name[len(_MARK):] for name in marks if name.startswith(_MARK))
        if made:
            raise StoreRefused(
                f"{_shown_store(store)} holds keys made with secret {', '.join(made)} (from "
                f"{marks[_MARK + made[0]]}), and its key file {path!r} is missing: restore it, "
                f"or give that secret as secret= or {ENV_SECRET}")
    raw, keyed = _key_file(path)
    keys = Keys(raw, f"the key file {path!r}")
    keys.key_file, keys.keyed_store = path, keyed
    return keys


def _marks(store: object) -> dict[str, str]:
    read_marks = getattr(store, "marks", None)
    return {} if read_marks is None else dict(read_marks())


def _key_file(path: str) -> tuple[bytes, str]:
    """The secret in ``path`` and the store it keyed, made first if there is none (two
    processes racing agree)."""
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


#: A key file that has keyed a store: this prefix, the secret in hex, ":" and the store's id.
#: Any other content is the secret itself (a key file made before stores had ids).
_KEY_FILE_V2 = b"agtool-key-v2:"


def _read_key(path: str) -> tuple[bytes, str]:
    with open(path, "rb") as kept:
        raw = kept.read()
    keyed = ""
    if raw.startswith(_KEY_FILE_V2):
        try:
            hexed, keyed_bytes = raw[len(_KEY_FILE_V2):].strip().split(b":")
            raw, keyed = bytes.fromhex(hexed.decode("ascii")), keyed_bytes.decode("ascii")
        except ValueError:
            raise StoreRefused(f"the key file {path!r} is damaged: restore it") from None
    try:
        return secret_bytes(raw, f"the key file {path!r}"), keyed
    except ValueError as exc:
        raise StoreRefused(f"{exc}; it was damaged or replaced: restore it") from None


def key_file_secret(path: str) -> bytes:
    """The secret a key file holds, whichever its format; ``StoreRefused`` if damaged."""
    return _read_key(path)[0]


def _note_keyed_store(path: str, store_id: str) -> None:
    """Write into the key file ``path`` the id of the store it keys (atomically, same secret)."""
    raw, _ = _read_key(path)
    temporary = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        out.write(_KEY_FILE_V2 + raw.hex().encode("ascii") + b":" + store_id.encode("ascii"))
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, path)
