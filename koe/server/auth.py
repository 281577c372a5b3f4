"""Who may call the server: loopback-only by default, a Bearer token whenever one is set."""

from __future__ import annotations

import ipaddress
import secrets

from fastapi import Request
from starlette.exceptions import HTTPException

from koe.service.errors import ConfigError
from koe.service.settings import ServerSettings


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_binding(server: ServerSettings) -> None:
    """Refuse to listen beyond loopback without an access token (`ConfigError` says how to set one)."""
    token = server.token.get_secret_value() if server.token else ""
    if not is_loopback(server.host) and not token:
        raise ConfigError(
            f"refusing to listen on {server.host}: binding beyond 127.0.0.1 needs an access token",
            hint="set server.token in koe.toml, KOE_SERVER__TOKEN, or --token; clients send 'Authorization: Bearer TOKEN'",
        )


class BearerAuth:
    """A FastAPI dependency: when a token is configured, the request must carry it as a Bearer token."""

    def __init__(self, token: str | None) -> None:
        self.token = token or None

    async def __call__(self, request: Request) -> None:
        if self.token is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if not header:
            raise _unauthorized("missing access token: send 'Authorization: Bearer TOKEN'")
        if scheme.lower() != "bearer" or not secrets.compare_digest(given.strip().encode(), self.token.encode()):
            raise _unauthorized("invalid access token")


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(401, message, headers={"WWW-Authenticate": "Bearer"})
