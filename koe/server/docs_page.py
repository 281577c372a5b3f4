"""The API pages, `/docs` (Swagger UI) and `/redoc` (ReDoc), from assets the server serves itself.

FastAPI's own pages load their JavaScript and CSS from a CDN, so they are blank offline (and tell a
third party whenever someone opens them). These pages load Swagger UI and ReDoc from the
`fastapi-offline` package (their released bundles, MIT), served under `/docs/assets/`. Every page
is answered with a Content-Security-Policy that lets the browser fetch nothing but this server
(ReDoc's sidebar logo, an image from its vendor's CDN, is blocked and hides itself).

Without the package the server still starts (the API does not need it): it logs a warning once and
`/docs` / `/redoc` answer 503 with a page saying what to install; `/openapi.json` always works.

The pages and assets need no token (a browser cannot send one when it opens a page, and they hold
nothing but the API's shape); they pass the Host allow-list like every request (docs/security.md).
"""

from __future__ import annotations

import base64
import hashlib
import html
import logging
import re
from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse

from koe.server.errors import error_response

log = logging.getLogger(__name__)

PACKAGE = "fastapi-offline"  # the distribution that ships the bundles
REQUIREMENT = "fastapi-offline>=1.7"  # what the `server` extra asks for
DOCS_URL = "/docs"
REDOC_URL = "/redoc"
OAUTH_REDIRECT_URL = "/docs/oauth2-redirect"
ASSETS_URL = "/docs/assets"
# the files the pages load, with the content type each is served as
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}
ASSET_CACHE = "public, max-age=86400"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)


@dataclass(frozen=True)
class DocsAssets:
    """Where the bundles are (`folder`, None when the package is missing or incomplete), and why not."""

    folder: Path | None
    version: str | None = None
    problem: str | None = None

    @property
    def available(self) -> bool:
        return self.folder is not None


def find_assets() -> DocsAssets:
    """The installed bundles of `fastapi-offline` (its `static/` folder), or why they cannot be used."""
    try:
        folder = Path(str(resources.files("fastapi_offline") / "static"))
    except (ImportError, TypeError) as e:
        return DocsAssets(None, problem=f"the package {PACKAGE} is not installed ({e.__class__.__name__})")
    missing = [name for name in ASSETS if not (folder / name).is_file()]
    if missing:
        return DocsAssets(None, problem=f"the package {PACKAGE} is incomplete: missing {', '.join(missing)}")
    try:
        version = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        version = None
    return DocsAssets(folder, version)


def content_security_policy(page: str) -> str:
    """A policy that lets `page` load only from this server: its inline scripts by their hash,
    styles inline (Swagger UI and ReDoc write their own), images and fonts also as data: URLs,
    ReDoc's search worker from a blob:, and no framing (clickjacking a page a token is typed into)."""
    hashes = " ".join("'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'" for script in _INLINE_SCRIPT.findall(page))
    return "; ".join(
        (
            "default-src 'self'",
            f"script-src 'self' {hashes}".strip(),
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            "font-src 'self' data:",
            "connect-src 'self'",
            "worker-src 'self' blob:",
            "frame-ancestors 'none'",
            "base-uri 'self'",
            "form-action 'self'",
            "object-src 'none'",
        )
    )


def _page(response: HTMLResponse, status: int = 200) -> HTMLResponse:
    body = bytes(response.body).decode()
    headers = {"Content-Security-Policy": content_security_policy(body), "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}
    return HTMLResponse(body, status_code=status, headers=headers)


def missing_page(assets: DocsAssets, openapi_url: str) -> HTMLResponse:
    """The 503 page `/docs` and `/redoc` answer without the package: what is wrong and what to install."""
    problem = assets.problem or f"the package {PACKAGE} is missing"
    body = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>koe - API page unavailable</title></head>
<body>
<h1>The API page is not available</h1>
<p>{html.escape(problem[:1].upper() + problem[1:])}: it ships the Swagger UI and ReDoc files this page is made of.</p>
<p>Install it into the server's environment and restart <code>koe serve</code>:</p>
<pre>pip install 'koe[server]'      # or: pip install '{html.escape(REQUIREMENT)}'</pre>
<p>The API itself works; its schema is at <a href="{html.escape(openapi_url)}">{html.escape(openapi_url)}</a>.</p>
</body></html>
"""
    return _page(HTMLResponse(body), status=503)


def docs_router(title: str, openapi_url: str, assets: DocsAssets | None = None) -> APIRouter:
    """The routes of the API pages (`/docs`, `/docs/oauth2-redirect`, `/redoc`, `/docs/assets/NAME`),
    none of them in the schema. `assets`: where the bundles are (default: `find_assets()`)."""
    assets = assets if assets is not None else find_assets()
    if not assets.available:
        log.warning("the API page (/docs) is unavailable: %s; pip install '%s'", assets.problem, REQUIREMENT)
    router = APIRouter(include_in_schema=False)

    def urls(request: Request) -> tuple[str, str]:
        root = request.scope.get("root_path", "").rstrip("/")
        return root + openapi_url, root + ASSETS_URL

    @router.get(DOCS_URL)
    async def swagger_ui(request: Request) -> HTMLResponse:
        spec, base = urls(request)
        if not assets.available:
            return missing_page(assets, spec)
        return _page(
            get_swagger_ui_html(
                openapi_url=spec,
                title=f"{title} - API",
                oauth2_redirect_url=OAUTH_REDIRECT_URL,
                swagger_js_url=f"{base}/swagger-ui-bundle.js",
                swagger_css_url=f"{base}/swagger-ui.css",
                swagger_favicon_url=f"{base}/favicon.png",
                swagger_ui_parameters={"validatorUrl": None},  # Swagger UI would otherwise send the schema to validator.swagger.io
            )
        )

    @router.get(OAUTH_REDIRECT_URL)
    async def oauth_redirect() -> HTMLResponse:
        return _page(get_swagger_ui_oauth2_redirect_html())

    @router.get(REDOC_URL)
    async def redoc(request: Request) -> HTMLResponse:
        spec, base = urls(request)
        if not assets.available:
            return missing_page(assets, spec)
        return _page(
            get_redoc_html(
                openapi_url=spec,
                title=f"{title} - API",
                redoc_js_url=f"{base}/redoc.standalone.js",
                redoc_favicon_url=f"{base}/favicon.png",
                with_google_fonts=False,
            )
        )

    @router.api_route(ASSETS_URL + "/{name}", methods=["GET", "HEAD"])
    async def asset(name: str):
        if name not in ASSETS or assets.folder is None:
            return error_response(404, f"no such asset: {name!r}", code="not_found")
        return FileResponse(assets.folder / name, media_type=ASSETS[name], headers={"Cache-Control": ASSET_CACHE, "X-Content-Type-Options": "nosniff"})

    return router
