"""Every error the server answers, in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`.

Messages never show the server's absolute paths: the KOE_HOME folder reads `KOE_HOME/...` and any
other absolute path of this machine its last component (`redact_paths`). A write that failed on a
full disk is a 507 (`InsufficientStorage`) whichever layer raised it. The CLI prints the service's
messages unredacted (a local user's own paths help them).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import re
from contextvars import ContextVar
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from koe.service.errors import KoeError, disk_full_error, is_disk_full

log = logging.getLogger(__name__)

# OpenAI's error `type` per status; anything else 4xx is an invalid request, 5xx a server error.
_TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error", 429: "rate_limit_error"}

# The KOE_HOME of the app answering the current request (set by `HomeContext`).
_HOME: ContextVar[Path | None] = ContextVar("koe_server_home", default=None)
# An absolute POSIX path (its components end at whitespace, quotes, ':' and brackets), or a Windows one.
_POSIX_PATH = re.compile(r"(?<![\w.~/:\\-])/[^\s'\"`:;,()<>\[\]{}|\\]+")
_WINDOWS_PATH = re.compile(r"(?<![\w])[A-Za-z]:\\[^\s'\"`:;,()<>\[\]{}|]*")


def redact_paths(text: str, home: str | os.PathLike | None = None) -> str:
    """`text` without this machine's absolute paths: `home` (KOE_HOME, as given or resolved) becomes
    `KOE_HOME`, any other absolute path whose top folder exists here (or a Windows path) its last
    component. URL paths such as `/v1/models` are left alone (no such top folder)."""
    if home is not None:
        roots = {os.fspath(home), os.fspath(Path(home).resolve())}
        for root in sorted((r.rstrip("/\\") for r in roots if len(r.rstrip("/\\")) > 1), key=len, reverse=True):
            text = re.sub(re.escape(root) + r"(?![\w.-])", "KOE_HOME", text)
    text = _POSIX_PATH.sub(_shorten_posix, text)
    return _WINDOWS_PATH.sub(lambda m: _last(m.group(0), "\\"), text)


def client_text(text: str) -> str:
    """`text` as a client may see it: `redact_paths` with the KOE_HOME of the request being answered."""
    return redact_paths(text, _HOME.get())


def _shorten_posix(m: re.Match[str]) -> str:
    path = m.group(0)
    top = path.strip("/").split("/", 1)[0]
    return _last(path, "/") if top and _is_top_folder(top) else path


@functools.lru_cache(maxsize=256)
def _is_top_folder(name: str) -> bool:
    return os.path.lexists(os.path.join(os.sep, name))


def _last(path: str, sep: str) -> str:
    parts = [p for p in path.split(sep) if p]
    return parts[-1] if parts else path


def error_body(status: int, message: str, *, param: str | None = None, code: str | None = None, redact: bool = True) -> dict:
    """OpenAI's error object for a response with `status` (paths redacted unless `redact=False`)."""
    kind = _TYPES.get(status) or ("server_error" if status >= 500 else "invalid_request_error")
    if redact:
        message = client_text(message)
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(
    status: int, message: str, *, param: str | None = None, code: str | None = None, headers: dict | None = None, redact: bool = True
) -> JSONResponse:
    """A JSON response holding `error_body`."""
    return JSONResponse(error_body(status, message, param=param, code=code, redact=redact), status_code=status, headers=headers)


def koe_error_response(e: KoeError) -> JSONResponse:
    """The response for a service error: its status, message (with hint), param and code; an error
    that says when to retry (`retry_after`: 429 busy, 503 model failed) sets `Retry-After`."""
    retry_after = getattr(e, "retry_after", None)
    headers = {"Retry-After": str(max(1, math.ceil(retry_after)))} if retry_after is not None and (e.status == 429 or retry_after > 0) else None
    return error_response(e.status, str(e), param=e.param, code=e.code, headers=headers)


def as_koe_error(e: BaseException) -> KoeError | None:
    """The service error to answer for `e`: itself, `InsufficientStorage` for a write that failed on a
    full disk (a raw `OSError`, SQLite's or safetensors' error, or a 500 `StorageError` over one), else None."""
    if isinstance(e, KoeError) and (e.status != 500 or not is_disk_full(e)):
        return e
    if is_disk_full(e):
        return disk_full_error("cannot write to KOE_HOME")
    return None


def _validation_message(e: RequestValidationError) -> tuple[str, str | None]:
    """One readable line per invalid field, e.g. "speed: Input should be less than or equal to 4"."""
    parts, param = [], None
    for err in e.errors():
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path")]
        field = ".".join(loc)
        param = param or (field or None)
        msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        if err.get("type") == "extra_forbidden":
            msg = "unknown field"
        elif err.get("type") == "json_invalid":
            msg = "the request body is not valid JSON"
        parts.append(f"{field}: {msg}" if field else msg)
    return "; ".join(parts) or "invalid request", param


def _home_of(app: object) -> Path | None:
    """The KOE_HOME folder of a koe app (None before its lifespan has set its state)."""
    state = getattr(getattr(app, "state", None), "koe", None)
    home = getattr(getattr(state, "home", None), "root", None)
    return Path(home) if home is not None else None


class HomeContext:
    """ASGI middleware: while a request is answered (its streamed body included), error messages know
    the app's KOE_HOME, so `error_body` writes it as `KOE_HOME`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = _HOME.set(_home_of(scope.get("app")))
        try:
            await self.app(scope, receive, send)
        finally:
            _HOME.reset(token)


def install_error_handlers(app: FastAPI) -> None:
    """Answer service errors, validation errors, HTTP errors and crashes in OpenAI's shape, with
    the server's paths redacted."""
    app.add_middleware(HomeContext)

    @app.exception_handler(KoeError)
    async def _koe(request: Request, e: KoeError) -> JSONResponse:
        answer = as_koe_error(e) or e
        if answer.status >= 500:
            log.error("%s %s: %s", request.method, request.url.path, e)
        return koe_error_response(answer)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(e)
        return error_response(400, message, param=param, code="invalid_value")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, e: StarletteHTTPException) -> JSONResponse:
        message = e.detail if isinstance(e.detail, str) else str(e.detail)
        own = e.status_code == 404 and message == "Not Found"
        if own:
            message = f"no such endpoint: {request.method} {request.url.path}"
        return error_response(e.status_code, message, code=_code(e.status_code), headers=getattr(e, "headers", None), redact=not own)

    @app.exception_handler(Exception)
    async def _crash(request: Request, e: Exception) -> JSONResponse:
        token = _HOME.set(_home_of(request.app))  # answered outside the middleware (by Starlette's last resort)
        try:
            answer = as_koe_error(e)
            if answer is not None:
                log.error("%s %s: %s", request.method, request.url.path, e, exc_info=e)
                return koe_error_response(answer)
            log.exception("%s %s failed", request.method, request.url.path)
            return error_response(500, f"internal error: {type(e).__name__}: {e}", code="internal_error")
        finally:
            _HOME.reset(token)


def _code(status: int) -> str | None:
    return {401: "invalid_api_key", 404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(status)
