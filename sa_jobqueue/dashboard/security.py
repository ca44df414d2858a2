"""The dashboard's guards: who may see it, which POSTs count, what the browser may run.

`Credentials` (basic auth or a bearer token, required beyond the loopback interface), the
CSRF token in a ``SameSite=Strict`` cookie checked on every POST, and the security headers.
See docs/dashboard.md.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sa_jobqueue.errors import ConfigurationError

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "Credentials",
    "GuardMiddleware",
    "is_loopback",
    "new_csrf_token",
    "same_origin",
    "tokens_match",
]

CSRF_COOKIE = "sajq_csrf"
CSRF_FIELD = "csrf_token"

SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


def is_loopback(host: str) -> bool:
    """True when `host` (a name or an address) only listens on this machine.

    >>> [is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "10.0.0.5")]
    [True, True, True, False, False]
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Credentials:
    """What a request must present: basic auth ``user``/``password``, or a bearer ``token``.

    A token is also accepted as the basic-auth password (any user name), so a
    browser's login prompt works with ``--token`` too.
    """

    user: str | None = None
    password: str | None = None
    token: str | None = None

    @classmethod
    def from_options(cls, basic_auth: str | None, token: str | None) -> Credentials | None:
        """Build from ``--basic-auth USER:PASSWORD`` and ``--token``; None when neither is given."""
        if basic_auth is not None and token is not None:
            raise ConfigurationError("give --basic-auth or --token, not both")
        if token is not None:
            if len(token) < 16:
                raise ConfigurationError("--token must be at least 16 characters")
            return cls(token=token)
        if basic_auth is not None:
            user, sep, password = basic_auth.partition(":")
            if not sep or not user or not password:
                raise ConfigurationError("--basic-auth must look like USER:PASSWORD")
            return cls(user=user, password=password)
        return None

    def accepts(self, authorization: str | None) -> bool:
        """True when an ``Authorization`` header value carries these credentials."""
        if not authorization:
            return False
        scheme, _, value = authorization.partition(" ")
        scheme = scheme.lower()
        if scheme == "bearer" and self.token is not None:
            return tokens_match(value.strip(), self.token)
        if scheme != "basic":
            return False
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return False
        user, _, password = decoded.partition(":")
        if self.token is not None:
            return tokens_match(password, self.token)
        # Both compared, always, so timing tells nothing about which one was wrong.
        return tokens_match(user, self.user) & tokens_match(password, self.password)


def tokens_match(given: str | None, expected: str | None) -> bool:
    """Constant-time comparison of two secrets; False when either is missing."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def new_csrf_token() -> str:
    """A fresh random CSRF token (32 bytes, URL-safe)."""
    return secrets.token_urlsafe(32)


def same_origin(headers: Headers) -> bool:
    """False when the request's ``Origin`` (or, without it, ``Referer``) names another host."""
    source = headers.get("origin") or headers.get("referer")
    if not source:
        return True  # nothing to compare (curl, some proxies): the CSRF token still must match
    return urlsplit(source).netloc == headers.get("host", "")


class GuardMiddleware:
    """ASGI middleware: credentials (if any) on every request, security headers on every reply."""

    def __init__(self, app: ASGIApp, credentials: Credentials | None) -> None:
        self.app = app
        self.credentials = credentials

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a request without the credentials (401); add the headers to every response."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.credentials is not None:
            authorization = Headers(scope=scope).get("authorization")
            if not self.credentials.accepts(authorization):
                await _unauthorized(send)
                return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)


async def _unauthorized(send: Send) -> None:
    body = b"sa-jobqueue dashboard: credentials required\n"
    headers: list[Any] = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", b'Basic realm="sa-jobqueue", charset="UTF-8"'),
        *SECURITY_HEADERS,
    ]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})
