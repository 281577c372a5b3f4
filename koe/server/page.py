"""The web page at `/`: speak, clone, design and stream from a browser, over koe's own HTTP API.

Static files shipped in the package (`koe/server/web/`: one HTML page, one stylesheet, plain ES
modules; no framework, no build step, nothing from a CDN). The page calls the same public
endpoints any client does, from the server's own origin, so the Host/Origin guards stay on: the
browser sends `Origin: <this server>` on its writes, which the guard lets through as same-origin.

The page and its files need no token (a browser cannot send one when it opens a page; they hold
no data); the page asks for the token when the API answers 401 and sends it as a Bearer header
(on the streamed-text WebSocket, where a browser cannot set headers, as the `koe.bearer.` subprotocol).
Every answer carries a Content-Security-Policy that allows only this server (scripts, styles,
fetches) plus `blob:` audio the page makes itself, and forbids framing (no clickjacking).
`server.web_page = false` turns the page off (404).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

from fastapi import APIRouter, Request, Response

from koe.server.errors import error_response

WEB_FILES = "web"  # the folder in koe.server holding the page
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self' blob:; "
    "connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "microphone=(self), camera=(), geolocation=()",
    "Cache-Control": "no-cache",  # revalidated each time (ETag): an upgraded koe never serves a stale page
}


@dataclass(frozen=True)
class WebFile:
    body: bytes
    media_type: str
    etag: str


def web_files() -> dict[str, WebFile]:
    """Every file of the page by its URL path (`/` is index.html), read once from the package."""
    root = resources.files("koe.server").joinpath(WEB_FILES)
    files: dict[str, WebFile] = {}

    def walk(folder, prefix: str) -> None:
        for entry in folder.iterdir():
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
                continue
            suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
            if suffix not in TYPES:
                continue
            body = entry.read_bytes()
            files[f"/web/{prefix}{entry.name}"] = WebFile(body, TYPES[suffix], '"' + hashlib.sha256(body).hexdigest()[:32] + '"')

    walk(root, "")
    files["/"] = files.pop("/web/index.html")
    return files


def page_router(enabled: bool = True) -> APIRouter:
    """`GET /` and `GET /web/{file}`: the page's files (a fixed set read at start-up: no path from
    the request ever reaches the file system). Disabled, both are 404s."""
    router = APIRouter(include_in_schema=False)
    files = web_files() if enabled else {}

    def answer(path: str, request: Request) -> Response:
        file = files.get(path)
        if file is None:
            return error_response(404, "no such page" if enabled else "the web page is off (server.web_page = false)", code="not_found")
        headers = {**HEADERS, "ETag": file.etag}
        if request.headers.get("if-none-match") == file.etag:
            return Response(status_code=304, headers=headers)
        return Response(file.body, media_type=file.media_type, headers=headers)

    @router.get("/")
    async def index(request: Request) -> Response:
        return answer("/", request)

    @router.get("/web/{name:path}")
    async def asset(name: str, request: Request) -> Response:
        return answer(f"/web/{name}", request)

    return router
