"""Who may call the server: loopback-only by default, a Bearer token whenever one is set."""

from __future__ import annotations

import ipaddress
import logging
import secrets

from fastapi import Request
from starlette.exceptions import HTTPException

from koe.service.config.settings import ServerSettings
from koe.service.errors import ConfigError

log = logging.getLogger(__name__)

MIN_TOKEN_CHARS = 16  # beyond loopback; secrets.token_urlsafe(32) gives 43


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_binding(server: ServerSettings) -> None:
    """Refuse (`ConfigError`, saying how to fix it) to listen beyond loopback without a strong token.

    Beyond loopback the token must have at least `MIN_TOKEN_CHARS` characters; the error offers a
    freshly generated one. On loopback a shorter token is allowed (only this machine can guess at
    it) but logged as weak. A token no client can send (whitespace around it, a control character)
    never gets here: the settings refuse it, for `koe config set` as for `koe serve`. These rules
    weigh the host and the token together (each may come from another layer), so they are checked
    here, when the server starts, not per setting.
    """
    token = server.token.get_secret_value() if server.token else ""
    loopback = is_loopback(server.host)
    how = "set server.token in koe.toml, KOE_SERVER__TOKEN, or --token; clients send 'Authorization: Bearer TOKEN'"
    if not loopback and not token:
        raise ConfigError(f"refusing to listen on {server.host}: binding beyond 127.0.0.1 needs an access token", hint=how)
    if len(token) < MIN_TOKEN_CHARS and token:
        if not loopback:
            raise ConfigError(
                f"refusing to listen on {server.host} with a weak access token (shorter than {MIN_TOKEN_CHARS} characters)",
                hint=f"use a random one, e.g. --token {secrets.token_urlsafe(32)} (or server.token / KOE_SERVER__TOKEN)",
            )
        log.warning("server.token is short (%d characters): fine on loopback, but binding beyond it needs %d or more", len(token), MIN_TOKEN_CHARS)


class BearerAuth:
    """A FastAPI dependency: when a token is configured, the request must carry it as a Bearer token."""

    def __init__(self, token: str | None) -> None:
        self.token = token or None

    async def __call__(self, request: Request) -> None:
        refusal = self.refusal(request.headers.get("authorization", ""))
        if refusal is not None:
            raise _unauthorized(refusal)

    def refusal(self, header: str) -> str | None:
        """Why a request with this Authorization `header` is refused (None: it may pass); the
        WebSocket routes ask this before they accept."""
        if self.token is None:
            return None
        scheme, _, given = header.partition(" ")
        if not header:
            return "missing access token: send 'Authorization: Bearer TOKEN'"
        if scheme.lower() != "bearer" or not secrets.compare_digest(given.strip().encode(), self.token.encode()):
            return "invalid access token"
        return None


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(401, message, headers={"WWW-Authenticate": "Bearer"})
