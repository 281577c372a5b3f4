"""The web page's files as the server answers them (in-process): what is served, with which headers,
and what is not. The page itself is driven in a real browser in tests/test_web_page.py."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from test_server import make_home

from koe.server import create_app
from koe.server.page import CSP, web_files


@pytest.fixture(scope="module")
def client(tmp_path_factory, session_tmp):
    home = make_home(tmp_path_factory.mktemp("home"), session_tmp, token="a-token-of-sixteen-chars")
    with TestClient(create_app(home)) as c:
        yield c


def test_the_page_and_its_files_need_no_token_and_carry_the_policy(client):
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"] == "text/html; charset=utf-8"
    assert r.headers["content-security-policy"] == CSP and "frame-ancestors 'none'" in CSP and "script-src 'self'" in CSP
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["referrer-policy"] == "no-referrer"
    # every file the page names is served from this server, with its type
    names = re.findall(r'(?:src|href)="([^"]+)"', r.text)
    assert names and all(n.startswith(("/", "#")) and not n.startswith("//") for n in names), names  # this server or this page
    for name in (n for n in names if n.startswith("/web/")):
        asset = client.get(name)
        assert asset.status_code == 200, name
        assert asset.headers["content-security-policy"] == CSP
    assert client.get("/web/js/main.js").headers["content-type"] == "text/javascript; charset=utf-8"
    assert client.get("/web/koe.css").headers["content-type"] == "text/css; charset=utf-8"
    # the API itself still needs the token
    assert client.get("/v1/models").status_code == 401


def test_the_modules_import_only_each_other():
    files = web_files()
    for path, file in files.items():
        if not path.endswith(".js"):
            continue
        for target in re.findall(r'from "([^"]+)"', file.body.decode()):
            assert target.startswith("./"), (path, target)  # no CDN, no bare package names
            assert f"/web/js/{target[2:]}" in files, (path, target)
        assert "innerHTML" not in file.body.decode(), path  # text goes in as text, never parsed as HTML


def test_etag_revalidation_and_unknown_files(client):
    first = client.get("/web/js/main.js")
    again = client.get("/web/js/main.js", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    for path in ("/web/nope.js", "/web/../app.py", "/web/%2e%2e/page.py", "/web/js/../../page.py", "/index.html"):
        r = client.get(path)
        assert r.status_code == 404, path
        assert "error" in r.json()


def test_the_page_can_be_turned_off(tmp_path, session_tmp):
    home = make_home(tmp_path, session_tmp, web_page=False)
    with TestClient(create_app(home)) as c:
        r = c.get("/")
        assert r.status_code == 404 and "server.web_page" in r.json()["error"]["message"]
        assert c.get("/web/js/main.js").status_code == 404
        assert c.get("/health").status_code == 200
