"""Every error the server answers, in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`."""

from __future__ import annotations

import logging
import math

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from koe.service.errors import Busy, KoeError

log = logging.getLogger(__name__)

# OpenAI's error `type` per status; anything else 4xx is an invalid request, 5xx a server error.
_TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error", 429: "rate_limit_error"}


def error_body(status: int, message: str, *, param: str | None = None, code: str | None = None) -> dict:
    """OpenAI's error object for a response with `status`."""
    kind = _TYPES.get(status) or ("server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(status: int, message: str, *, param: str | None = None, code: str | None = None, headers: dict | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, param=param, code=code), status_code=status, headers=headers)


def koe_error_response(e: KoeError) -> JSONResponse:
    """The response for a service error: its status, message (with hint), param and code."""
    headers = {"Retry-After": str(max(1, math.ceil(e.retry_after)))} if isinstance(e, Busy) else None
    return error_response(e.status, str(e), param=e.param, code=e.code, headers=headers)


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


def install_error_handlers(app: FastAPI) -> None:
    """Answer service errors, validation errors, HTTP errors and crashes in OpenAI's shape."""

    @app.exception_handler(KoeError)
    async def _koe(request: Request, e: KoeError) -> JSONResponse:
        if e.status >= 500:
            log.error("%s %s: %s", request.method, request.url.path, e)
        return koe_error_response(e)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(e)
        return error_response(400, message, param=param, code="invalid_value")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, e: StarletteHTTPException) -> JSONResponse:
        message = e.detail if isinstance(e.detail, str) else str(e.detail)
        if e.status_code == 404 and message == "Not Found":
            message = f"no such endpoint: {request.method} {request.url.path}"
        return error_response(e.status_code, message, code=_code(e.status_code), headers=getattr(e, "headers", None))

    @app.exception_handler(Exception)
    async def _crash(request: Request, e: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return error_response(500, f"internal error: {type(e).__name__}: {e}", code="internal_error")


def _code(status: int) -> str | None:
    return {401: "invalid_api_key", 404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(status)
