"""Serving a gated MCP server over streamable HTTP, with a door in front of it.

``HttpDoor`` is plain ASGI around the SDK's Starlette app, checked before any
MCP message is read:

- **Bearer tokens.** Each ``--token-env VAR`` names an environment variable
  holding one client's token. A request must carry ``Authorization: Bearer
  <token>``; every configured token is compared in constant time
  (``hmac.compare_digest``), and the one that matches names the client
  (``VAR``), which keeps that client's runs apart from every other's. A
  missing or wrong token is answered ``401`` with ``WWW-Authenticate: Bearer``.
- **Origin.** A request with an ``Origin`` header is answered ``403`` unless
  that origin is allowed: by ``--allow-origin`` (exact ``scheme://host[:port]``),
  or, bound to loopback, any loopback origin. A client that sends no
  ``Origin`` (not a browser) is not refused for it.
- **Binding.** ``check_binding`` refuses to serve on anything but loopback
  without a token: such a server would hand every tool to whoever reaches it.

In the MCP authorization spec, a remote gate is an OAuth 2.1 resource server.
What this door supports, and what it does not, is in the README ("Serving
over HTTP"): static bearer tokens, one per client, checked here; no token
validation against an authorization server, no Protected Resource Metadata,
and no token passthrough (a client's token never leaves the gate).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from ._serve import PRINCIPAL_SCOPE_KEY

__all__ = ["HttpDoor", "HttpOptions", "check_binding", "is_loopback", "tokens_from_env"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

_LOOPBACK_NAMES = frozenset({"localhost"})


@dataclass(frozen=True)
class HttpOptions:
    """Where and to whom a gated server is served over HTTP (``--http`` and its flags)."""

    host: str = "127.0.0.1"
    port: int = 8000
    #: Client name (the variable's) -> its bearer token.
    tokens: Mapping[str, str] = field(default_factory=dict)
    #: Origins a browser client may call from, exact ``scheme://host[:port]``.
    allow_origins: tuple[str, ...] = ()


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_binding(options: HttpOptions) -> None:
    """``ValueError`` for a server that would serve every tool, unauthenticated, off this host."""
    if not is_loopback(options.host) and not options.tokens:
        raise ValueError(f"--host {options.host} is not loopback: give --token-env VAR (a "
                         f"bearer token each client must send), or bind 127.0.0.1")
    for name, token in options.tokens.items():
        if len(token.encode()) < 16:
            raise ValueError(f"--token-env {name}: the token is shorter than 16 bytes")


def tokens_from_env(names: Iterable[str], environ: Mapping[str, str] = os.environ
                    ) -> dict[str, str]:
    """``{VAR: token}`` for each ``--token-env VAR``; ``ValueError`` for one unset or empty."""
    tokens = {}
    for name in names:
        token = environ.get(name, "")
        if not token.strip():
            raise ValueError(f"--token-env {name}: the environment variable is unset or empty")
        tokens[name] = token.strip()
    return tokens


class HttpDoor:
    """ASGI: bearer token and Origin checked, then the request handed to ``app``."""

    def __init__(self, app: App, options: HttpOptions) -> None:
        self.app = app
        self.tokens = [(name, token.encode()) for name, token in options.tokens.items()]
        self.allow_origins = frozenset(origin.rstrip("/").lower()
                                       for origin in options.allow_origins)
        self.loopback = is_loopback(options.host)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind == "lifespan":
            await self.app(scope, receive, send)  # the SDK's session manager starts here
            return
        if kind != "http":  # MCP is served over HTTP only: nothing else gets past the door
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return
        headers = _headers(scope)
        origin = headers.get("origin")
        if origin is not None and not self._origin_allowed(origin):
            await _refuse(send, 403, "origin not allowed", {})
            return
        if self.tokens:
            client = self._client_of(headers.get("authorization", ""))
            if client is None:
                await _refuse(send, 401, "a valid bearer token is required",
                              {"www-authenticate": 'Bearer realm="agtool", '
                               'error="invalid_token"'})
                return
            scope[PRINCIPAL_SCOPE_KEY] = client
        await self.app(scope, receive, send)

    def _client_of(self, authorization: str) -> str | None:
        scheme, _, given = authorization.partition(" ")
        presented = given.strip().encode() if scheme.lower() == "bearer" else b""
        found = None
        for name, token in self.tokens:  # every token compared: the time says nothing of which
            if hmac.compare_digest(presented, token) and found is None:
                found = name
        return found

    def _origin_allowed(self, origin: str) -> bool:
        origin = origin.rstrip("/").lower()
        if origin in self.allow_origins:
            return True
        if not self.loopback:
            return False
        scheme, _, rest = origin.partition("://")
        host = rest.rsplit(":", 1)[0] if not rest.startswith("[") else rest.split("]")[0] + "]"
        return scheme in ("http", "https") and is_loopback(host)


def _headers(scope: Scope) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in scope.get("headers", ()):
        found.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
    return found


async def _refuse(send: Send, status: int, text: str, headers: Mapping[str, str]) -> None:
    body = (text + "\n").encode()
    raw = [(b"content-type", b"text/plain; charset=utf-8"),
           (b"content-length", str(len(body)).encode())]
    raw += [(key.encode(), value.encode()) for key, value in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
