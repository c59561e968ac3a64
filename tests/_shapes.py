"""The shape every ``call_tool`` answer must have, as the tests check it."""

from __future__ import annotations

ENVELOPE_KEYS = {"ok", "value", "error"}


def assert_envelope(envelope: object) -> None:
    """Exactly three keys, typed as the envelope promises, value None on failure."""
    assert isinstance(envelope, dict)
    assert set(envelope) == ENVELOPE_KEYS
    assert type(envelope["ok"]) is bool
    assert type(envelope["error"]) is str
    assert envelope["ok"] == (envelope["error"] == "")
    if not envelope["ok"]:
        assert envelope["value"] is None
