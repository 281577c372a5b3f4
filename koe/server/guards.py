"""What the server refuses before a route runs (pure ASGI middleware), and per connection (uvicorn).

- `BrowserGuard`: a Host allow-list (against DNS rebinding) and an Origin check on state-changing
  requests (against cross-site form posts and `fetch(..., {mode: "no-cors"})`) and on every
  WebSocket handshake (which CORS does not cover: any page may open one).
- `BodyDeadline`: a 408 when a request body stalls for `server.body_timeout_s`.
- `DrainGuard`: 503 + Retry-After for requests that arrive, or cannot finish, while the server drains.
- `guarded_protocol`: uvicorn's HTTP protocol with a header deadline (`server.header_timeout_s`) and
  a cap on open connections (`server.max_connections`), neither of which uvicorn has.
- `draining_ws_protocol`: uvicorn's WebSocket protocol that leaves an open stream to its route when
  the server shuts down (the route ends it, within `server.shutdown_grace_s`), where uvicorn would
  close it at once.

A WebSocket handshake is refused with the same JSON error responses as an HTTP request (`refuse`).

See docs/security.md for the threat model.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import Iterable
from http import HTTPStatus
from typing import Any

import anyio
from starlette.exceptions import HTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from koe.server.auth import is_loopback
from koe.server.errors import error_body, error_response
from koe.server.state import Drain, ShutdownCancelled
from koe.service.config.settings import DEFAULT_PORTS, is_ip_literal, origin_of, split_host  # the settings check entries with them too
from koe.service.errors import ConfigError

log = logging.getLogger(__name__)

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_HOSTS_SETTING = "server.allowed_hosts (koe.toml, KOE_SERVER__ALLOWED_HOSTS or koe serve --allow-host)"
_ORIGINS_SETTING = "server.allowed_origins (koe.toml, KOE_SERVER__ALLOWED_ORIGINS or koe serve --allow-origin)"


# -- Host and Origin ---------------------------------------------------------------------------
def own_names(bound_host: str) -> set[str]:
    """The names this machine answers to besides loopback: the bound address when it is a name, and,
    when bound beyond loopback, the host name (short, as given, and `.local` for mDNS)."""
    names = set()
    bound = bound_host.strip().strip("[]").lower().rstrip(".")
    if bound and not is_ip_literal(bound):
        names.add(bound)
    if not is_loopback(bound_host):
        full = socket.gethostname().lower().rstrip(".")
        short = full.split(".")[0]
        names |= {n for n in (full, short, f"{short}.local") if n}
    return names


class HostNames:
    """The Host names a server answers: loopback names (`localhost`, `*.localhost`), IP literals, the
    address the connection arrived on, `own` names, and the configured ones (`*` = any; `*.example.com`
    or `.example.com` = that domain's sub-domains)."""

    def __init__(self, configured: Iterable[str], own: Iterable[str] = ()) -> None:
        self.any = False
        self.exact: set[str] = {n.lower() for n in own}
        self.suffixes: list[str] = []
        for entry in configured:
            name = entry.strip().lower()
            if name == "*":
                self.any = True
            elif name.startswith(("*.", ".")):
                self.suffixes.append("." + name.lstrip("*."))
            elif name:
                parsed = split_host(name)
                if parsed is None:
                    raise ConfigError(f"server.allowed_hosts: {entry!r} is not a host name")
                self.exact.add(parsed[0])

    def allows(self, host: str, server: tuple[Any, Any] | None = None) -> bool:
        """True when `host` (already split from its port) may be served."""
        if self.any or host in self.exact or is_ip_literal(host):
            return True
        if host == "localhost" or host.endswith(".localhost") or any(host.endswith(s) for s in self.suffixes):
            return True
        # the address the ASGI server says it accepted this connection on (TestClient says "testserver")
        return bool(server) and isinstance(server[0], str) and host == server[0].lower()


class AllowedOrigins:
    """The web origins configured to make state-changing requests besides the server's own (`*` = any)."""

    def __init__(self, configured: Iterable[str]) -> None:
        self.any = False
        self.origins: set[tuple[str, str, int | None]] = set()
        for entry in configured:
            if entry.strip() == "*":
                self.any = True
                continue
            parsed = origin_of(entry)
            if parsed is None:
                raise ConfigError(f"server.allowed_origins: {entry!r} is not an origin (scheme://host[:port])")
            self.origins.add(parsed)

    def allows(self, origin: tuple[str, str, int | None]) -> bool:
        return self.any or origin in self.origins

    def serialized(self) -> list[str]:
        """The origins as browsers write them in an Origin header (for CORS)."""
        if self.any:
            return ["*"]
        out = []
        for scheme, host, port in sorted(self.origins, key=str):
            name = f"[{host}]" if ":" in host else host
            out.append(f"{scheme}://{name}" + ("" if port in (None, DEFAULT_PORTS.get(scheme)) else f":{port}"))
        return out


class BrowserGuard:
    """Refuse requests a hostile web page could make through the user's browser.

    - Host: a name not in `hosts` is refused with 421 (a page that rebinds its DNS name to this
      machine sends its own name as Host; IP literals cannot be rebound and pass).
    - Origin, on POST/PUT/PATCH/DELETE and on every WebSocket handshake: refused (403) unless it
      is the server's own origin (its host:port is the request's Host) or in `origins`. `Origin:
      null` is refused. Without an Origin the caller is not a browser and passes, unless
      `Sec-Fetch-Site: cross-site` says it is (browsers send an Origin with every WebSocket).
    """

    def __init__(self, app: ASGIApp, hosts: HostNames, origins: AllowedOrigins) -> None:
        self.app = app
        self.hosts = hosts
        self.origins = origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        host_header = headers.get("host", "")
        host = split_host(host_header) if host_header else None
        if host_header and (host is None or not self.hosts.allows(host[0], scope.get("server"))):
            log.warning("refused a request for Host %r (not an allowed host name)", host_header)
            message = f"this server does not answer for the host name {host_header!r} (a guard against DNS rebinding); to allow it, add it to {_HOSTS_SETTING}"
            await refuse(scope, receive, send, error_response(421, message, code="host_not_allowed"))
            return
        method = "WebSocket" if scope["type"] == "websocket" else scope["method"]
        if method == "WebSocket" or method in STATE_CHANGING:
            refusal = self._origin_refusal(headers, host)
            if refusal:
                log.warning("refused a cross-origin %s %s: %s", method, scope["path"], refusal)
                await refuse(scope, receive, send, error_response(403, refusal, code="origin_not_allowed"))
                return
        await self.app(scope, receive, send)

    def _origin_refusal(self, headers: dict[str, str], host: tuple[str, int | None] | None) -> str | None:
        """Why a state-changing request's origin is refused, or None when it may proceed."""
        origin = headers.get("origin")
        if origin is None:
            if headers.get("sec-fetch-site", "").strip().lower() == "cross-site":
                return f"cross-site requests may not change anything here; to allow a web page's origin, add it to {_ORIGINS_SETTING}"
            return None  # not a browser (curl, SDKs), or a browser's same-origin navigation
        if self.origins.any:
            return None
        parsed = origin_of(origin)
        if parsed is None:
            return f"requests from an opaque origin ({origin!r}: a sandboxed frame, a file or a redirect) may not change anything here"
        if self.origins.allows(parsed):
            return None
        scheme, name, port = parsed
        if scheme in ("http", "https") and host is not None and name == host[0] and port == (host[1] if host[1] is not None else DEFAULT_PORTS[scheme]):
            return None  # same origin: koe's own pages
        return f"requests from the web origin {origin!r} may not change anything here; to allow it, add it to {_ORIGINS_SETTING}"


async def refuse(scope: Scope, receive: Receive, send: Send, response: Response) -> None:
    """Answer `response` instead of the route: as it is to an HTTP request, and to a WebSocket
    handshake too where the server can send an HTTP response there (ASGI's denial response,
    which uvicorn has); elsewhere the handshake is closed (the server answers 403)."""
    if scope["type"] == "websocket" and "websocket.http.response" not in (scope.get("extensions") or {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    await response(scope, receive, send)


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name (the first of repeated ones), decoded as latin-1."""
    out: dict[str, str] = {}
    for name, value in scope.get("headers") or []:
        out.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return out


# -- request bodies ----------------------------------------------------------------------------
class BodyDeadline:
    """Answer 408 (and close the connection) when a request body stops arriving: each read of the
    body may wait at most `timeout_s` seconds. Reads after the body is complete are not timed
    (they wait for the client to disconnect)."""

    def __init__(self, app: ASGIApp, timeout_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        complete = False

        async def timed() -> Message:
            nonlocal complete
            if complete:
                return await receive()
            try:
                with anyio.fail_after(self.timeout_s):
                    message = await receive()
            except TimeoutError:
                log.warning("%s %s: the request body stalled for %g s; answering 408", scope["method"], scope["path"], self.timeout_s)
                raise HTTPException(
                    408,
                    f"the request body stopped arriving: nothing came for {self.timeout_s:g} s (server.body_timeout_s)",
                    headers={"Connection": "close"},
                ) from None
            complete = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        await self.app(scope, timed, send)


# -- draining ----------------------------------------------------------------------------------
class DrainGuard:
    """While the server drains: new requests get 503 + Retry-After, and so does one the shutdown
    cancels before it answered (`ShutdownCancelled`, or uvicorn's own cancellation of a task that
    outlived the grace: never its text/plain 500); a stream it cuts is left unfinished."""

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and self.drain.draining:  # an open stream ends itself (routes/speech_stream.py)
            await refuse(scope, receive, send, self.drain.response())
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.drain.draining:
            await self.drain.response()(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except ShutdownCancelled:
            if started:
                log.info("%s %s: stream cut short by the shutdown", scope["method"], scope["path"])
                return  # unfinished: the server closes the connection
            await self.drain.response()(scope, receive, send)
        except asyncio.CancelledError:
            if not (self.drain.draining and not started):
                raise
            log.warning("%s %s: cancelled by the shutdown before it could answer; 503", scope["method"], scope["path"])
            await self.drain.response()(scope, receive, send)


# -- connections (uvicorn) ---------------------------------------------------------------------
class _Throttled:
    """A warning logged at most once per `every_s` seconds, with how many times it happened meanwhile
    (a flood of refused connections must not flood the log)."""

    def __init__(self, message: str, every_s: float = 10.0) -> None:
        self.message, self.every_s = message, every_s
        self.count, self.last = 0, float("-inf")

    def note(self, *args: Any) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.last >= self.every_s:
            log.warning(self.message, self.count, *args)
            self.count, self.last = 0, now


class _ConnectionGuard:
    """Mixed into a uvicorn HTTP protocol class (h11 or httptools): refuse a connection over the cap
    with 503, and close one whose request line and headers do not arrive within `header_timeout_s`
    of connecting or of the previous response (with a 408 if part of a request came; silently if
    nothing did, like an idle keep-alive connection). Relies on the protocols' `cycle` (set once a
    request's headers are parsed), `connections`, `loop`, `transport` and `on_response_complete`."""

    header_timeout_s: float = 10.0
    max_connections: int = 128
    _deadline: asyncio.TimerHandle | None = None
    _answered: object = None  # the request cycle answered last; a new cycle means new headers arrived
    _partial = False  # some bytes of the next request have arrived
    _refusals = _Throttled("refused %d connection(s) over server.max_connections (%d open)")

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)  # type: ignore[misc]
        if len(self.connections) > self.max_connections:  # type: ignore[attr-defined]
            self._refusals.note(len(self.connections) - 1)  # type: ignore[attr-defined]
            message = f"too many open connections (server.max_connections is {self.max_connections}); retry shortly"
            _reply_and_close(transport, 503, message, "too_many_connections", {"Retry-After": "1"})
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        if self._deadline is not None:
            if self.cycle is not self._answered:  # type: ignore[attr-defined]
                self._disarm()
            else:
                self._partial = True

    def on_response_complete(self) -> None:
        answered = self.cycle  # type: ignore[attr-defined]
        super().on_response_complete()  # type: ignore[misc]
        if self.cycle is answered and not self.transport.is_closing():  # type: ignore[attr-defined]
            self._arm()  # no pipelined request started: the next one's headers are on the clock

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def handle_websocket_upgrade(self, *args: Any) -> None:
        self._disarm()  # the connection is the WebSocket protocol's now (no request cycle: the deadline would cut it)
        super().handle_websocket_upgrade(*args)  # type: ignore[misc]

    def _arm(self) -> None:
        self._disarm()
        self._answered, self._partial = self.cycle, False  # type: ignore[attr-defined]
        self._deadline = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)  # type: ignore[attr-defined]

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _headers_too_slow(self) -> None:
        self._deadline = None
        transport: asyncio.Transport = self.transport  # type: ignore[attr-defined]
        if transport.is_closing():
            return
        if not self._partial:
            transport.close()  # an idle connection: nothing to answer
            return
        log.info("closing a connection whose request headers did not arrive within %g s", self.header_timeout_s)
        message = f"the request headers did not arrive within {self.header_timeout_s:g} s (server.header_timeout_s)"
        _reply_and_close(transport, 408, message, "timeout", {})


def _reply_and_close(transport: asyncio.Transport, status: int, message: str, code: str, headers: dict[str, str]) -> None:
    """Write a complete JSON error response straight to the socket (no request is being answered) and close."""
    body = json.dumps(error_body(status, message, code=code)).encode()
    head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", "content-type: application/json", f"content-length: {len(body)}", "connection: close"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    transport.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
    transport.close()


def guarded_protocol(header_timeout_s: float, max_connections: int, base: type[asyncio.Protocol] | None = None) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (`base`, default: the one uvicorn picks) with the connection guards,
    for `uvicorn.Config(http=...)`.

    uvicorn itself has no header timeout (its keep-alive timer only runs between requests, and a
    byte of a new request stops it), and its `limit_concurrency` is checked only once a request's
    headers are complete (counting open connections and running tasks) and answers text/plain 503,
    so a client that never finishes its headers is never counted out.
    """
    if base is None:
        from uvicorn.protocols.http.auto import AutoHTTPProtocol

        base = AutoHTTPProtocol
    attrs = {"header_timeout_s": float(header_timeout_s), "max_connections": int(max_connections), "__module__": __name__}
    return type(f"Guarded{base.__name__}", (_ConnectionGuard, base), attrs)


def draining_ws_protocol(base: type[asyncio.Protocol] | None = None) -> type[asyncio.Protocol] | None:
    """uvicorn's WebSocket protocol (`base`, default: the one uvicorn picks; None when no WebSocket
    library is installed) whose `shutdown` leaves an accepted connection open, for `uvicorn.Config(ws=...)`.

    uvicorn closes every WebSocket (1012) the moment it starts shutting down; koe's streams instead
    get the drain's grace like HTTP requests: the route finishes the stream, or, when the grace runs
    out, cancels it and closes with an error (`routes.speech_stream`). A handshake not yet accepted
    is refused by uvicorn as before. uvicorn still cancels the route after its own backstop."""
    if base is None:
        from uvicorn.protocols.websockets.auto import AutoWebSocketsProtocol

        if AutoWebSocketsProtocol is None:
            return None
        base = AutoWebSocketsProtocol  # type: ignore[assignment]

    def shutdown(self: Any) -> None:
        accepted = getattr(self, "handshake_complete", False) and getattr(self, "initial_response", None) is None
        if accepted and not getattr(self, "close_sent", False) and not getattr(self, "disconnected", False):
            return  # the route ends it (its stream done, or the drain's grace over)
        base.shutdown(self)  # type: ignore[attr-defined]

    return type(f"Draining{base.__name__}", (base,), {"shutdown": shutdown, "__module__": __name__})
