"""The OpenAI-compatible HTTP server: `create_app(settings | home)` and `run(settings)` (`koe serve`).

Models load in the lifespan (the configured default) or on first use; all model work runs on the
scheduler's threads, never on the event loop. See docs/server.md; the guards (Host and Origin,
timeouts, connection cap, graceful drain) are in guards.py and docs/security.md; the API pages
(`/docs`, `/redoc`, served from local assets so they work offline) in docs_page.py; the web page at `/`
in page.py (koe/server/web/).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
from fastapi import Depends, FastAPI, Security
from fastapi.middleware.cors import CORSMiddleware
from fastapi.security import HTTPBearer

from koe import __version__
from koe.runtime import compute
from koe.server.auth import BearerAuth, check_binding
from koe.server.docs_page import docs_router
from koe.server.errors import install_error_handlers
from koe.server.guards import AllowedOrigins, BodyDeadline, BrowserGuard, DrainGuard, HostNames, draining_ws_protocol, guarded_protocol, own_names
from koe.server.limits import BodyLimit, message_limit
from koe.server.page import page_router
from koe.server.routes import conversions, models, speech, speech_stream, voices
from koe.server.state import Drain, ServerState
from koe.service.config.settings import ServerSettings, Settings
from koe.service.errors import ConfigError, KoeError, Unavailable
from koe.service.home import KoeHome
from koe.service.synthesis.scheduler import Scheduler
from koe.service.synthesis.synthesizer import Synthesizer

log = logging.getLogger(__name__)

_FORM_SLACK = 64 * 1024  # multipart boundaries and the small text fields around an upload
BACKLOG = 2048  # pending connections the kernel holds (uvicorn's default)
DRAIN_MARGIN_S = 3.0  # after the grace: time for cancelled requests to answer before uvicorn cancels them


def create_app(
    config: Settings | KoeHome,
    synthesizer: Synthesizer | None = None,
    *,
    batch_window: float | None = None,
    first_chunk_s: float | None = None,
    chunk_s: float | None = None,
) -> FastAPI:
    """The FastAPI app over a KOE_HOME (given as settings or an open `KoeHome`).

    Streamed responses send about `first_chunk_s` seconds of audio first, then `chunk_s` at a time
    (None: each model's defaults).

    Pass a `synthesizer` to share one (it is then not closed at shutdown). Limits, queue sizes and
    the batch window (`batch_window`, in seconds, overrides `server.batch_window_ms`) come from
    `settings.server`; the resident-model limit and idle unload from `settings.models`.
    Requests pass, outermost first: the drain (503 while shutting down), the Host and Origin guard,
    CORS (only for `server.allowed_origins`), the body deadline and the body size limit.
    `app.state.drain` is the `Drain` that `run` drives on SIGTERM.
    """
    home = config if isinstance(config, KoeHome) else KoeHome(config)
    settings = home.settings
    server = settings.server
    owns = synthesizer is None
    hosts = HostNames(server.allowed_hosts, own_names(server.host))  # both raise ConfigError for a malformed entry
    origins = AllowedOrigins(server.allowed_origins)
    drain = Drain(server.shutdown_grace_s)
    synth = synthesizer or Synthesizer(home, max_input_chars=server.max_input_chars, allow_model_paths=False)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        window = server.batch_window_ms / 1000 if batch_window is None else batch_window
        scheduler = Scheduler(synth, queue_size=server.queue_size, max_batch_size=server.max_batch_size, batch_window=window)
        app.state.koe = ServerState(settings, home, synth, scheduler, owns, first_chunk_s, chunk_s, drain)
        synth.cache.start_reaper()
        await anyio.to_thread.run_sync(compute.run, _preload, synth)  # on a thread that ends with it (koe.runtime.compute)
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(scheduler.close)
            if owns:
                synth.close()

    token = server.token.get_secret_value() if server.token else None
    app = FastAPI(
        title="koe",
        version=__version__,
        summary="Open text-to-speech models behind OpenAI's speech API",
        description=WEBSOCKET_NOTE,
        lifespan=lifespan,
        docs_url=None,  # FastAPI's pages load from a CDN; docs_page serves them from local assets
        redoc_url=None,
    )
    install_error_handlers(app)
    auth = [Depends(BearerAuth(token))]
    if token:  # only documents it: the schema names the Bearer scheme, so /docs offers "Authorize" for "Try it out"
        auth.append(Security(HTTPBearer(auto_error=False, scheme_name="token", description="server.token, sent as 'Authorization: Bearer TOKEN'")))
    for router in (speech.router, conversions.router, voices.router, models.router):
        app.include_router(router, dependencies=auth)
    app.include_router(speech_stream.router)  # a WebSocket: checks the token itself, before it accepts
    app.include_router(models.health_router)
    app.include_router(docs_router(app.title, app.openapi_url or "/openapi.json"))  # no token: see docs_page
    app.include_router(page_router(server.web_page))  # the web page at /; no token: see page.py
    json_limit = message_limit(server.max_input_chars)

    def limit_for(path: str) -> tuple[int, str]:
        if path.rstrip("/") in ("/v1/audio/voices", "/v1/audio/voices/import"):  # a clip, or a voice archive
            return server.max_upload_bytes + _FORM_SLACK, "the upload (server.max_upload_bytes)"
        if path.rstrip("/") == "/v1/audio/conversions":  # the speech, and a clip of the voice
            return 2 * server.max_upload_bytes + _FORM_SLACK, "the uploads (server.max_upload_bytes each)"
        return json_limit, "the request body (server.max_input_chars)"

    app.add_middleware(BodyLimit, limit_for=limit_for)
    app.add_middleware(BodyDeadline, timeout_s=server.body_timeout_s)
    if server.allowed_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins.serialized(),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
            expose_headers=["X-Koe-Model", "X-Koe-Voice", "X-Koe-Seed", "X-Koe-Duration", "X-Koe-Batch-Size", "X-Koe-Warnings", "Retry-After"],
        )
    app.add_middleware(BrowserGuard, hosts=hosts, origins=origins)
    app.add_middleware(DrainGuard, drain=drain)
    app.state.drain = drain
    return app


# OpenAPI describes no WebSockets: the API page says what else there is.
WEBSOCKET_NOTE = (
    "Besides these routes: `WS /v1/audio/speech/stream`, streamed text in and audio out over a WebSocket. "
    'The client sends JSON text messages: `{"type": "start", ...}` (the fields of `POST /v1/audio/speech` but `stream_format`; '
    '`input` is the first piece), `{"type": "text", "text": "..."}` as the text comes, then `{"type": "end"}`. '
    "The server sends `speech.started`, the audio as binary messages as it is made (one file in `response_format`), "
    "then `speech.audio.done` (usage, duration, seed, warnings) and closes with 1000; or one `error` message "
    "(this API's error object) and a close code by kind (1008 client error, 1009 text too long, 1011 server error, "
    "1012 shutting down, 1013 busy); a stream lasts at most `server.max_stream_s`. The handshake passes the same Host, Origin "
    "and token checks as these routes (the token as a Bearer header, or, from a browser, as the subprotocol "
    "`koe.bearer.<base64url token>` offered beside `koe`); "
    "koe's server documentation (server.md, Streamed text) has the protocol in full."
)


def _preload(synth: Synthesizer) -> None:
    """Load the default model (the configured one, or the only installed one) now, so the first
    request does not wait for it. A failure is logged; requests try again and report it."""
    default = synth.settings.models.default
    try:
        ref = synth.home.models.resolve(default)
    except KoeError as e:
        if default:
            log.error("the default model %r is not usable: %s", default, e)
        return  # no default and several (or no) models: each loads on first use
    try:
        synth.planner.check_precision(ref, synth.planner.details(ref).capabilities)  # a mode it does not run: said, not remembered as broken
        with synth.cache.use(ref):
            log.info("model %s is loaded", ref.name)
    except KoeError as e:
        log.error("the default model %r could not be loaded (%s); requests will try again", ref.name, e)


def run(settings: Settings) -> None:
    """Serve on `settings.server.host:port` until interrupted (what `koe serve` calls).

    Refuses (`ConfigError`) to bind beyond loopback without a strong access token. Then it takes
    the port (`listen`) before anything else, so a busy port or an address this machine does not
    have is one clear error at once, not after the default model has loaded. Once it serves, it
    prints the banner (`banner`) on stderr. On SIGTERM or Ctrl-C it drains: stops accepting, gives
    in-flight requests `server.shutdown_grace_s` seconds, then cancels the rest (they get 503 +
    Retry-After, SSE streams an `error` event).
    """
    check_binding(settings.server)
    s = settings.server
    sockets = listen(s)
    try:
        app = create_app(settings)

        def started() -> None:
            state: ServerState = app.state.koe
            print(banner(settings, [d.ref.name for d in state.home.models.list()]), file=sys.stderr, flush=True)

        server = draining_server(uvicorn_config(app, s), app.state.drain, on_started=started)
        try:
            server.run(sockets=sockets)
        except KeyboardInterrupt:
            pass
    finally:
        for sock in sockets:
            sock.close()
    if not server.started:
        raise SystemExit(3)  # uvicorn has logged why (as uvicorn.run does)


def listen(server: ServerSettings) -> list[socket.socket]:
    """Sockets bound to `server.host:port` and listening, as uvicorn would bind them (every address
    the host resolves to; SO_REUSEADDR on POSIX, so a restart finds the port free; IPv6 sockets IPv6
    only). A port another program holds, or an address this machine does not have, is a `KoeError`
    saying so: `run` calls this before any model loads."""
    host, port = server.host, server.port
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ConfigError(f"cannot listen on {host!r}: {e.strerror}", hint=_HOST_HINT) from e
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(found):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            if os.name == "posix":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
    except OSError as e:
        for sock in sockets:
            sock.close()
        raise _cannot_listen(e, server) from e
    return sockets


_HOST_HINT = "server.host (or --host) must be an address of this machine: 127.0.0.1, ::1, 0.0.0.0 (all of them), ..."


def _cannot_listen(e: OSError, server: ServerSettings) -> KoeError:
    where = f"[{server.host}]:{server.port}" if ":" in server.host else f"{server.host}:{server.port}"
    if e.errno == errno.EADDRINUSE:
        other = server.port + 1 if server.port < 65535 else 8000
        return Unavailable(
            f"cannot listen on {where}: address already in use (another koe serve, or another program, has that port)",
            hint=f"stop it, or pick another port, e.g. koe serve --port {other}",
        )
    if e.errno == errno.EADDRNOTAVAIL:
        return ConfigError(f"cannot listen on {where}: no network interface of this machine has that address", hint=_HOST_HINT)
    if e.errno == errno.EACCES:
        return ConfigError(f"cannot listen on {where}: permission denied", hint="ports below 1024 need privileges: pick another, e.g. koe serve --port 8000")
    return Unavailable(f"cannot listen on {where}: {e.strerror or e}")


def banner(settings: Settings, models: list[str]) -> str:
    """What `koe serve` prints once it serves: the URL, the web page, the API pages, the installed
    `models` (the default marked) and whether clients need the token (never the token itself)."""
    s = settings.server
    wildcard = s.host in ("0.0.0.0", "::")
    shown = ("::1" if ":" in s.host else "127.0.0.1") if wildcard else s.host
    url = f"http://{f'[{shown}]' if ':' in shown else shown}:{s.port}"
    default = settings.models.default
    names = [f"{n} (default)" if n == default else n for n in models]
    if default and default not in models:
        names.append(f"{default} (default)")
    lines = [
        f"koe {__version__} is serving on {url}",
        *([f"  listening  on every address of this machine ({s.host}): from elsewhere, use its name or address"] if wildcard else []),
        f"  web page   {url}/" if s.web_page else "  web page   off (server.web_page)",
        f"  API        {url}/v1 (OpenAI's speech API); reference at {url}/docs",
        f"  models     {', '.join(names) if names else 'none installed: koe models pull ID, or koe models import PATH'}",
        "  token      required: clients send 'Authorization: Bearer TOKEN' (server.token)"
        if s.token
        else "  token      not required: only this machine can connect (loopback)",
    ]
    return "\n".join(lines)


def uvicorn_config(app: FastAPI, server: ServerSettings):  # -> uvicorn.Config (uvicorn is imported only when serving)
    """How `run` configures uvicorn: the guarded HTTP protocol (header deadline, connection cap), the
    WebSocket protocol that leaves open streams to the drain (`draining_ws_protocol`; messages at
    most `message_limit` bytes, no compression; none when no WebSocket library is installed), and
    uvicorn's own shutdown timeout as a backstop behind the drain's grace."""
    import uvicorn

    ws = draining_ws_protocol()
    return uvicorn.Config(
        app,
        host=server.host,
        port=server.port,
        log_level="info",
        ws=ws or "none",
        ws_max_size=message_limit(server.max_input_chars),
        ws_per_message_deflate=False,
        http=guarded_protocol(server.header_timeout_s, server.max_connections),
        timeout_graceful_shutdown=server.shutdown_grace_s + DRAIN_MARGIN_S,
    )


def draining_server(config, drain: Drain, on_started: Callable[[], None] | None = None):  # -> uvicorn.Server (imported only when serving)
    """A uvicorn server whose shutdown drives `drain`: `begin()` as it stops accepting, `expire()`
    after the grace period (uvicorn itself would only cancel the tasks, and answer text/plain 500).
    `on_started()` is called once it serves (the lifespan has run: the default model is loaded)."""
    import uvicorn

    class DrainingServer(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.started and on_started is not None:
                on_started()

        async def shutdown(self, sockets=None) -> None:
            log.info("shutting down: in-flight requests get %g s to finish (server.shutdown_grace_s)", drain.grace_s)
            drain.begin()
            timer = asyncio.get_running_loop().call_later(drain.grace_s, drain.expire)
            try:
                await super().shutdown(sockets)
            finally:
                timer.cancel()

    return DrainingServer(config)
