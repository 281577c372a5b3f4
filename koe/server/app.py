"""The OpenAI-compatible HTTP server: `create_app(settings | home)` and `run(settings)` (`koe serve`).

Models load in the lifespan (the configured default) or on first use; all model work runs on the
scheduler's threads, never on the event loop. See docs/server.md; the guards (Host and Origin,
timeouts, connection cap, graceful drain) are in guards.py and docs/security.md; the API pages
(`/docs`, `/redoc`, served from local assets so they work offline) in docs_page.py; the web page at `/`
in page.py (koe/server/web/).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import Depends, FastAPI, Security
from fastapi.middleware.cors import CORSMiddleware
from fastapi.security import HTTPBearer

from koe import __version__
from koe.runtime import compute
from koe.service.errors import KoeError
from koe.service.home import KoeHome
from koe.service.scheduler import Scheduler
from koe.service.settings import ServerSettings, Settings
from koe.service.synthesizer import Synthesizer
from koe.server.auth import BearerAuth, check_binding
from koe.server.docs_page import docs_router
from koe.server.errors import install_error_handlers
from koe.server.guards import AllowedOrigins, BodyDeadline, BrowserGuard, DrainGuard, HostNames, guarded_protocol, own_names
from koe.server.limits import BodyLimit
from koe.server.page import page_router
from koe.server.routes import models, speech, voices
from koe.server.state import Drain, ServerState

log = logging.getLogger(__name__)

_FORM_SLACK = 64 * 1024  # multipart boundaries and the small text fields around an upload
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
        lifespan=lifespan,
        docs_url=None,  # FastAPI's pages load from a CDN; docs_page serves them from local assets
        redoc_url=None,
    )
    install_error_handlers(app)
    auth = [Depends(BearerAuth(token))]
    if token:  # only documents it: the schema names the Bearer scheme, so /docs offers "Authorize" for "Try it out"
        auth.append(Security(HTTPBearer(auto_error=False, scheme_name="token", description="server.token, sent as 'Authorization: Bearer TOKEN'")))
    for router in (speech.router, voices.router, models.router):
        app.include_router(router, dependencies=auth)
    app.include_router(models.health_router)
    app.include_router(docs_router(app.title, app.openapi_url or "/openapi.json"))  # no token: see docs_page
    app.include_router(page_router(server.web_page))  # the web page at /; no token: see page.py
    json_limit = server.max_input_chars * 8 + 64 * 1024

    def limit_for(path: str) -> tuple[int, str]:
        if path.rstrip("/") in ("/v1/audio/voices", "/v1/audio/voices/import"):  # a clip, or a voice archive
            return server.max_upload_bytes + _FORM_SLACK, "the upload (server.max_upload_bytes)"
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
        with synth.cache.use(ref):
            log.info("model %s is loaded", ref.name)
    except KoeError as e:
        log.error("the default model %r could not be loaded (%s); requests will try again", ref.name, e)


def run(settings: Settings) -> None:
    """Serve on `settings.server.host:port` until interrupted (what `koe serve` calls).

    Refuses (`ConfigError`) to bind beyond loopback without a strong access token. On SIGTERM or
    Ctrl-C it drains: stops accepting, gives in-flight requests `server.shutdown_grace_s` seconds,
    then cancels the rest (they get 503 + Retry-After, SSE streams an `error` event).
    """
    check_binding(settings.server)
    app = create_app(settings)
    s = settings.server
    server = draining_server(uvicorn_config(app, s), app.state.drain)
    log.info("koe %s serving on http://%s:%d (auth %s)", __version__, s.host, s.port, "on" if s.token else "off")
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    if not server.started:
        raise SystemExit(3)  # uvicorn has logged why (as uvicorn.run does)


def uvicorn_config(app: FastAPI, server: ServerSettings):  # -> uvicorn.Config (uvicorn is imported only when serving)
    """How `run` configures uvicorn: the guarded HTTP protocol (header deadline, connection cap), no
    WebSockets, and uvicorn's own shutdown timeout as a backstop behind the drain's grace."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=server.host,
        port=server.port,
        log_level="info",
        ws="none",
        http=guarded_protocol(server.header_timeout_s, server.max_connections),
        timeout_graceful_shutdown=server.shutdown_grace_s + DRAIN_MARGIN_S,
    )


def draining_server(config, drain: Drain):  # -> uvicorn.Server (uvicorn is imported only when serving)
    """A uvicorn server whose shutdown drives `drain`: `begin()` as it stops accepting, `expire()`
    after the grace period (uvicorn itself would only cancel the tasks, and answer text/plain 500)."""
    import uvicorn

    class DrainingServer(uvicorn.Server):
        async def shutdown(self, sockets=None) -> None:
            log.info("shutting down: in-flight requests get %g s to finish (server.shutdown_grace_s)", drain.grace_s)
            drain.begin()
            timer = asyncio.get_running_loop().call_later(drain.grace_s, drain.expire)
            try:
                await super().shutdown(sockets)
            finally:
                timer.cancel()

    return DrainingServer(config)
