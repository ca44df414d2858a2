"""The dashboard's guards: who may see it, which POSTs count, what the browser may run.

`Credentials` (basic auth or a bearer token, required beyond the loopback interface), the
CSRF token in a ``SameSite=Strict`` cookie checked on every POST, the ``Host`` names a
request may carry (`AllowedHosts`: against DNS rebinding), and the security headers.
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
    "AllowedHosts",
    "Credentials",
    "GuardMiddleware",
    "check_host",
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


_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True, slots=True)
class AllowedHosts:
    """The ``Host`` header values a request may carry (its host part, any port).

    Attributes:
        names: host names or addresses, lower case; ``*.example.com`` allows the
            subdomains of ``example.com``; ``*`` allows any host.
        any_address: also allow any IP address literal (a server bound to every
            interface, ``0.0.0.0`` or ``::``, answers on all its addresses, and a
            rebinding attack needs a name, not an address).
    """

    names: frozenset[str]
    any_address: bool = False

    @classmethod
    def for_bind(cls, bound: str, extra: tuple[str, ...] | list[str] = ()) -> AllowedHosts:
        """The hosts of a server bound to `bound`, plus `extra` (``--allowed-host``).

        A loopback address also allows ``localhost``, ``127.0.0.1`` and ``[::1]``.

        >>> sorted(AllowedHosts.for_bind("127.0.0.1").names)
        ['127.0.0.1', '::1', 'localhost']
        """
        names = {check_host(name) for name in extra}
        bound = bound.strip("[]").lower()
        wildcard = bound in ("0.0.0.0", "::", "")  # noqa: S104 - reading a bind, not binding
        if not wildcard:
            names.add(bound)
        if is_loopback(bound):
            names.update(_LOOPBACK_NAMES)
        return cls(frozenset(names), any_address=wildcard)

    def allows(self, host_header: str | None) -> bool:
        """True when `host_header` (``name``, ``name:port``, ``[v6]:port``) is allowed."""
        if "*" in self.names:
            return True
        host = _host_part(host_header or "")
        if not host:
            return False
        if host in self.names:
            return True
        if any(n.startswith("*.") and host.endswith(n[1:]) for n in self.names):
            return True
        if self.any_address:
            try:
                ipaddress.ip_address(host)
            except ValueError:
                return False
            return True
        return False


def check_host(name: str) -> str:
    """`name` as an allowed host (lower case), or a `ConfigurationError` saying why not."""
    value = name.strip().lower()
    if value in ("*",):
        return value
    bare = value[2:] if value.startswith("*.") else value
    if not bare or any(c in bare for c in "/@ ?#") or bare.count(":") == 1:
        raise ConfigurationError(
            f"allowed host {name!r} must be a host name or address without a port or scheme "
            "(example.com, *.example.com, 10.0.0.5, ::1, or * for any)"
        )
    return value.strip("[]")


def _host_part(header: str) -> str:
    """The host of a ``Host`` header, lower case, without the port or IPv6 brackets."""
    header = header.strip().lower()
    if header.startswith("["):
        end = header.find("]")
        return header[1:end] if end > 0 else ""
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


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
    """ASGI middleware: the host and credentials (if any) of every request, and security headers.

    Args:
        app: the dashboard.
        credentials: what every request must present, or None.
        allowed_hosts: the ``Host`` values served (`AllowedHosts`); None serves any,
            for a dashboard mounted in an application that checks hosts itself.
    """

    def __init__(
        self,
        app: ASGIApp,
        credentials: Credentials | None,
        allowed_hosts: AllowedHosts | None = None,
    ) -> None:
        self.app = app
        self.credentials = credentials
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse another host (400) or a request without the credentials (401); add headers."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.allowed_hosts is not None:
            host = Headers(scope=scope).get("host")
            if not self.allowed_hosts.allows(host):
                await _bad_host(send)
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


async def _bad_host(send: Send) -> None:
    # Before anything else: no cookie, no page, no redirect built from the forged name.
    body = (
        b"sa-jobqueue dashboard: this Host is not served; start it with "
        b"--allowed-host NAME to serve another name\n"
    )
    headers: list[Any] = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *SECURITY_HEADERS,
    ]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})


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
