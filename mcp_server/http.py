"""Serving over streamable HTTP: which Host and Origin headers are accepted, and the bearer token.

DNS-rebinding protection is always on. The accepted ``Host`` values are the address the
server is bound to, with its port (and the loopback aliases ``127.0.0.1``, ``localhost``,
``[::1]`` when it is bound to loopback), plus any ``--allowed-host``; the accepted
``Origin`` values are exactly ``http://<allowed host>`` plus any ``--allowed-origin``. No port
wildcard: a page on ``http://localhost:3000`` cannot drive a server on port 8765. A wildcard
bind (``0.0.0.0``, ``::``) has no name a browser would send, so it needs ``--allowed-host``.

With ``OPROF_MCP_TOKEN`` set in the environment, every request must carry
``Authorization: Bearer <token>`` (compared in constant time); a missing or wrong one is
answered 401 before the MCP layer sees the request.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Sequence

from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from profiler_core.errors import ProfilerError

TOKEN_ENV = "OPROF_MCP_TOKEN"
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address) is reachable only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def host_header(host: str, port: int) -> str:
    """``host:port`` as a client writes it in the Host header (IPv6 in brackets)."""
    bare = host.strip("[]")
    try:
        if ipaddress.ip_address(bare).version == 6:
            return f"[{bare}]:{port}"
    except ValueError:
        pass
    return f"{host}:{port}"


def security_settings(host: str, port: int, *, allowed_hosts: Sequence[str] = (),
                      allowed_origins: Sequence[str] = ()) -> TransportSecuritySettings:
    """The Host/Origin allow-lists for a server bound to ``host:port`` (never disabled)."""
    hosts: list[str] = []
    if _is_wildcard(host):
        if not allowed_hosts:
            raise ProfilerError(
                f"--host {host} listens on every interface, so no Host header names it; pass "
                "--allowed-host NAME:PORT (repeatable) for each name clients use to reach the server")
    else:
        hosts.append(host_header(host, port))
    if is_loopback(host):
        hosts.extend(f"{name}:{port}" for name in _LOOPBACK_NAMES)
    for given in allowed_hosts:
        if given.endswith(":*") or "*" in given:
            raise ProfilerError(f"--allowed-host {given}: wildcards are not accepted; name the host and port")
        hosts.append(given if ":" in given.lstrip("[").split("]")[-1] else f"{given}:{port}")
    hosts = list(dict.fromkeys(hosts))
    origins = [f"http://{h}" for h in hosts]
    for given in allowed_origins:
        if "*" in given:
            raise ProfilerError(f"--allowed-origin {given}: wildcards are not accepted; name scheme, host and port")
        origins.append(given.rstrip("/"))
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=list(dict.fromkeys(origins)))


def token_from_env(environ: dict[str, str] | None = None) -> str | None:
    """The bearer token HTTP clients must send, from ``OPROF_MCP_TOKEN`` (None: no token asked)."""
    value = (os.environ if environ is None else environ).get(TOKEN_ENV, "").strip()
    return value or None


class BearerTokenMiddleware:
    """Answer 401 to any HTTP request without ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scheme, _, value = Headers(scope=scope).get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self._token):
                response = Response(f"missing or wrong bearer token: send Authorization: Bearer <${TOKEN_ENV}>",
                                    status_code=401, headers={"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
