"""The API pages (`/docs`, `/redoc`) work offline: everything they load is served by koe itself.

Every URL a page names (src, href, and the URLs in its inline script) is parsed: each must be
relative (same origin) and answer 200 with the right content type. The pages pass the server's
guards like every request; without the package that ships the bundles they say what to install.
"""

from __future__ import annotations

import base64
import hashlib
import html
import logging
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient
from test_server_e2e import live_server

from koe.server import create_app
from koe.server.docs_page import ASSETS, REQUIREMENT, find_assets
from koe.service import KoeHome, load_settings

TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png", ".json": "application/json"}
EXTERNAL = re.compile(r"(?i)(?:https?:)?//[a-z0-9\[]")  # a scheme-relative or absolute URL: another host
CDNS = ("cdn.jsdelivr.net", "unpkg.com", "cdnjs", "fonts.googleapis.com", "fastapi.tiangolo.com")


class Links(HTMLParser):
    """Every src / href / spec-url of a page, and the text of its inline scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.urls += [v for k, v in attrs if k in ("src", "href", "spec-url", "action", "data") and v]
        self._in_script = tag == "script" and not dict(attrs).get("src")

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.scripts.append(data)


def page_links(page_html: str) -> Links:
    links = Links()
    links.feed(page_html)
    for script in links.scripts:  # the URLs Swagger UI's start-up script hands it
        links.urls += re.findall(r"""\burl:\s*['"]([^'"]+)['"]""", script)
        links.urls += re.findall(r"""['"](/[^'"\s]*)['"]""", script)
    return links


def make_app(tmp_path: Path, **server):
    return create_app(KoeHome(load_settings(tmp_path / "home", flags={"server": server}, environ={})))


@pytest.fixture()
def client(tmp_path):
    with TestClient(make_app(tmp_path)) as c:
        yield c


def assert_served_locally(get, page: str) -> Links:
    """`page` names no other host, and every URL it names answers 200 with its file's content type."""
    r = get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), r.text
    page_html = r.text
    assert not EXTERNAL.search(page_html), EXTERNAL.search(page_html)
    assert not [c for c in CDNS if c in page_html]
    links = page_links(page_html)
    assert links.urls, page_html
    for url in links.urls:
        parts = urlsplit(url)
        assert not parts.scheme and not parts.netloc and parts.path.startswith("/"), url
        suffix = Path(parts.path).suffix
        a = get(url)
        assert a.status_code == 200, (url, a.status_code)
        if suffix in TYPES:
            assert a.headers["content-type"].startswith(TYPES[suffix]), (url, a.headers["content-type"])
            assert a.headers.get("x-content-type-options") == "nosniff" or suffix == ".json"
    return links


def test_the_swagger_page_loads_only_from_this_server(client):
    links = assert_served_locally(client.get, "/docs")
    names = {Path(urlsplit(u).path).name for u in links.urls}
    assert {"swagger-ui-bundle.js", "swagger-ui.css", "favicon.png", "openapi.json"} <= names
    assert "validatorUrl" in links.scripts[0] and '"validatorUrl": null' in links.scripts[0]  # no schema sent to validator.swagger.io


def test_redoc_and_the_oauth_redirect_page_load_only_from_this_server(client):
    links = assert_served_locally(client.get, "/redoc")
    assert {Path(urlsplit(u).path).name for u in links.urls} >= {"redoc.standalone.js", "favicon.png", "openapi.json"}
    r = client.get("/docs/oauth2-redirect")
    assert r.status_code == 200 and not EXTERNAL.search(r.text) and "swaggerUIRedirectOauth2" in r.text


@pytest.mark.parametrize("page", ["/docs", "/redoc", "/docs/oauth2-redirect"])
def test_the_pages_tell_the_browser_to_load_nothing_from_elsewhere(client, page):
    r = client.get(page)
    csp = dict(d.strip().split(" ", 1) for d in r.headers["content-security-policy"].split(";"))
    assert csp["default-src"] == "'self'" and csp["frame-ancestors"] == "'none'" and csp["connect-src"] == "'self'"
    for directive, sources in csp.items():
        assert not EXTERNAL.search(sources) and "*" not in sources and "http" not in sources, (directive, sources)
    assert "'unsafe-inline'" not in csp["script-src"] and "'unsafe-eval'" not in csp["script-src"]
    for script in page_links(r.text).scripts:  # each inline script is allowed by its hash, nothing else inline is
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp["script-src"]


def test_every_asset_is_served_with_its_content_type_and_nothing_else_is(client):
    for name, kind in ASSETS.items():
        r = client.get(f"/docs/assets/{name}")
        assert r.status_code == 200 and r.headers["content-type"] == kind and len(r.content) > 1000, name
        assert "max-age" in r.headers["cache-control"] and r.headers["etag"]
        assert client.head(f"/docs/assets/{name}").status_code == 200
    for name in ("core.py", "..%2F__init__.py", "%2e%2e/core.py", "swagger-ui.css.map", ""):
        assert client.get(f"/docs/assets/{name}").status_code == 404, name


def test_the_schema_still_works_and_does_not_list_the_pages(client):
    spec = client.get("/openapi.json").json()
    assert spec["info"]["title"] == "koe" and "/v1/audio/speech" in spec["paths"]
    assert not [p for p in spec["paths"] if p.startswith(("/docs", "/redoc"))]


def test_behind_a_proxy_prefix_the_page_names_the_prefixed_urls(tmp_path):
    with TestClient(make_app(tmp_path), root_path="/koe") as c:
        links = page_links(c.get("/docs").text)
    assert {u for u in links.urls if u.startswith("/koe/")} >= {"/koe/openapi.json", "/koe/docs/assets/swagger-ui-bundle.js"}


def test_the_pages_need_no_token_but_pass_the_host_guard(tmp_path):
    with TestClient(make_app(tmp_path, token="a-long-enough-secret-token")) as c:
        assert c.get("/v1/models").status_code == 401  # the API still needs the token
        assert_served_locally(c.get, "/docs")  # a browser opening the page cannot send one
        assert c.get("/docs", headers={"Host": "evil.example"}).status_code == 421  # DNS rebinding
        assert c.get("/docs/assets/swagger-ui-bundle.js", headers={"Host": "evil.example"}).status_code == 421
        assert c.get("/openapi.json", headers={"Host": "evil.example"}).status_code == 421


def test_a_real_server_serves_the_page_and_its_assets(tmp_path):
    settings = load_settings(tmp_path / "home", environ={})
    with live_server(create_app(KoeHome(settings)), settings.server) as server:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            links = assert_served_locally(http.get, "/docs")
            js = next(u for u in links.urls if u.endswith("swagger-ui-bundle.js"))
            assert http.get(js).content == (find_assets().folder / "swagger-ui-bundle.js").read_bytes()


def test_without_the_package_the_page_says_what_to_install(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "fastapi_offline", None)  # as if it were not installed: importing it fails
    assert not find_assets().available and "fastapi-offline is not installed" in find_assets().problem
    with caplog.at_level(logging.WARNING, logger="koe.server.docs_page"), TestClient(make_app(tmp_path)) as c:
        for page in ("/docs", "/redoc"):
            r = c.get(page)
            assert r.status_code == 503 and r.headers["content-type"].startswith("text/html")
            text = html.unescape(r.text)
            assert "fastapi-offline is not installed" in text and f"pip install '{REQUIREMENT}'" in text and "koe[server]" in text
            assert 'href="/openapi.json"' in r.text and not EXTERNAL.search(r.text)
        assert c.get("/docs/assets/swagger-ui.css").status_code == 404
        assert c.get("/openapi.json").status_code == 200 and c.get("/v1/models").status_code == 200  # the API is unaffected
    assert any("/docs" in m and REQUIREMENT in m for m in caplog.messages)


def test_an_incomplete_package_is_named_with_its_missing_files(tmp_path, monkeypatch):
    fake = tmp_path / "site" / "fastapi_offline"
    (fake / "static").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "static" / "swagger-ui.css").write_text("body {}")
    monkeypatch.delitem(sys.modules, "fastapi_offline", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assets = find_assets()
    assert not assets.available
    assert "incomplete" in assets.problem and "swagger-ui-bundle.js" in assets.problem and "swagger-ui.css" not in assets.problem


def test_with_a_token_the_schema_names_the_bearer_scheme_so_the_page_can_send_it(tmp_path):
    with TestClient(make_app(tmp_path / "on", token="a-long-enough-secret-token")) as c:
        spec = c.get("/openapi.json").json()
        assert spec["components"]["securitySchemes"]["token"] == {
            "type": "http",
            "scheme": "bearer",
            "description": "server.token, sent as 'Authorization: Bearer TOKEN'",
        }
        assert spec["paths"]["/v1/models"]["get"]["security"] == [{"token": []}]
        assert "security" not in spec["paths"]["/health"]["get"]  # /health needs none
        assert c.get("/v1/models", headers={"Authorization": "Bearer a-long-enough-secret-token"}).status_code == 200
        assert c.get("/v1/models", headers={"Authorization": "Bearer wrong"}).status_code == 401
    with TestClient(make_app(tmp_path / "off")) as c:
        assert "securitySchemes" not in c.get("/openapi.json").json().get("components", {})
