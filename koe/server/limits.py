"""A cap on request bodies, checked before and while they are read (pure ASGI middleware)."""

from __future__ import annotations

from collections.abc import Callable

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from koe.server.errors import error_response


def message_limit(max_input_chars: int) -> int:
    """The largest JSON body (or WebSocket message) a request may send: its text at most
    `max_input_chars` characters (server.max_input_chars), each escaped to at most 8 bytes, and
    room for the rest."""
    return max_input_chars * 8 + 64 * 1024


class BodyLimit:
    """Answer 413 when a body is larger than `limit_for(path)` bytes: at once from Content-Length,
    or as soon as a chunked body passes the limit (the route's read raises)."""

    def __init__(self, app: ASGIApp, limit_for: Callable[[str], tuple[int, str]]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, what = self.limit_for(scope["path"])
        message = f"{what} is larger than the {_size(limit)} limit"
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await error_response(413, message, code="too_large")(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > limit:
                    raise HTTPException(413, message)
            return msg

        await self.app(scope, limited, send)


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
