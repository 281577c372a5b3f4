"""A fake Hugging Face hub on a loopback port: real HTTP, the hub's API shape, tiny repos, knobs.

`HubServer` serves model repos ({path: bytes}, one or more commits each, branches and tags) as the
hub does, enough for koe's pull and for huggingface_hub's own `model_info`, `hf_hub_download` and
`snapshot_download` when `HF_ENDPOINT` (or `endpoint=`) points at it:

- `GET /api/models/OWNER/NAME[/revision/REV][?blobs=true]`: the commit and its files (with
  `blobs`: size, git blob id, and for LFS files their SHA-256); unknown repo 401 `RepoNotFound`,
  unknown revision 404 `RevisionNotFound` (the `X-Error-Code`s huggingface_hub maps to its errors);
- `GET /api/models/OWNER/NAME/tree/REV[/PATH]?recursive=true`: the file listing of snapshot_download;
- `HEAD|GET /OWNER/NAME/resolve/REV/PATH`: a git file directly (`ETag` its blob id), an LFS file
  as a 302 to a "CDN" on another origin (`http://localhost:PORT/_lfs/...`, as the hub redirects to
  its CDN) with `X-Linked-Etag`/`X-Linked-Size`; `X-Repo-Commit` on both; unknown file 404
  `EntryNotFound`. No xet headers, so huggingface_hub takes its plain HTTP path.
- bodies honour `Range: bytes=START-[END]` (206 + `Content-Range`, 416 past the end).

Knobs for tests: `cut(repo, path, after=N)` drops the connection once N bytes of that file have
been sent (`then_down=True`: and the hub answers 503 to everything until `up()`), `throttle`
(bytes per second per response), `bad_sha` ("repo/path" listed with a wrong checksum), `down`
(503 to everything), `broken` (repos whose files answer 500), `listing` (a hostile hub: a function
that rewrites the listing's JSON body before it is sent).
Counters: `hits` (every request: method, path, Range, status, bytes sent), `fetched` (each
"repo/path" whose body was sent to its last byte), `ranges(repo, path)`, `body_bytes(repo, path)`.

`no_internet(monkeypatch)`: any name lookup other than loopback fails, and is recorded.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlparse

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".npy", ".onnx", ".wav", ".model")
LOOPBACK = {"127.0.0.1", "localhost", "::1", "localhost.localdomain"}


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_lfs(path: str, data: bytes) -> bool:
    """Files a hub repo keeps in LFS (as its usual .gitattributes): weights and other binaries, anything over 10 MB."""
    return path.endswith(LFS_SUFFIXES) or len(data) > 10 * 2**20


@dataclass
class Hit:
    """One request the hub answered."""

    method: str
    path: str
    range: str | None
    status: int
    sent: int = 0  # body bytes
    headers: dict = field(default_factory=dict)


@dataclass
class Cut:
    after: int
    times: int
    then_down: bool


class HubServer:
    """The fake hub; `url` is its endpoint (`HF_ENDPOINT`). Close it (or use it as a context manager)."""

    def __init__(self, repos: dict[str, dict[str, bytes]] | None = None) -> None:
        self.commits: dict[str, dict[str, dict[str, bytes]]] = {}  # repo -> sha -> files
        self.refs: dict[str, dict[str, str]] = {}  # repo -> branch/tag -> sha
        self.hits: list[Hit] = []
        self.fetched: list[str] = []
        self.bad_sha: set[str] = set()
        self.throttle: float | None = None  # bytes per second per response
        self.down = False
        self.broken: set[str] = set()  # repos whose files answer 500 (their listing still works)
        self.listing = None  # body -> body: rewrites `/api/models/...` listings (a hostile hub)
        self.cuts: dict[tuple[str, str], Cut] = {}
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.cdn = f"http://localhost:{self.port}"  # another origin, as the hub's CDN is
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-hub", daemon=True)
        self._thread.start()
        for repo, files in (repos or {}).items():
            self.push(repo, files)

    # -- content ------------------------------------------------------------------------------
    def push(self, repo: str, files: dict[str, bytes], *, branch: str = "main", tag: str | None = None) -> str:
        """A commit of `files` (the whole tree) on `branch` of `repo` (made if new); its SHA."""
        parent = self.refs.get(repo, {}).get(branch, "")
        digest = hashlib.sha1(repo.encode() + parent.encode())
        for path in sorted(files):
            digest.update(path.encode() + b"\0" + git_blob_id(files[path]).encode())
        sha = digest.hexdigest()
        self.commits.setdefault(repo, {})[sha] = dict(files)
        self.refs.setdefault(repo, {})[branch] = sha
        if tag:
            self.refs[repo][tag] = sha
        return sha

    def files(self, repo: str, rev: str = "main") -> dict[str, bytes]:
        return self.commits[repo][self._resolve(repo, rev)]

    @property
    def repos(self) -> _Repos:
        """Each repo's files on main, by repo: `hub.repos[repo] = files` pushes a commit of them."""
        return _Repos(self)

    def _resolve(self, repo: str, rev: str) -> str | None:
        if rev in self.commits.get(repo, {}):
            return rev
        return self.refs.get(repo, {}).get(rev)

    # -- knobs --------------------------------------------------------------------------------
    def cut(self, repo: str, path: str, *, after: int, times: int = 1, then_down: bool = False) -> None:
        """Drop the connection once `after` bytes of `repo/path` are sent, `times` times (then: the hub goes down)."""
        self.cuts[(repo, path)] = Cut(after, times, then_down)

    def up(self) -> None:
        self.down = False

    # -- counters -----------------------------------------------------------------------------
    def body_hits(self, repo: str | None = None, path: str | None = None) -> list[Hit]:
        """The GETs that sent a file's bytes (the CDN's for LFS files), optionally of one repo / file."""
        return [
            h
            for h in list(self.hits)
            if h.method == "GET"
            and h.headers.get("x-file")
            and (repo is None or h.headers["x-file"][0] == repo)
            and (path is None or h.headers["x-file"][1] == path)
        ]

    def ranges(self, repo: str, path: str) -> list[str | None]:
        return [h.range for h in self.body_hits(repo, path)]

    def body_bytes(self, repo: str | None = None, path: str | None = None) -> int:
        return sum(h.sent for h in self.body_hits(repo, path))

    def fetched_files(self, repo: str) -> list[str]:
        """The files of `repo` whose bytes were requested, in sorted order (each once)."""
        return sorted({h.headers["x-file"][1] for h in self.body_hits(repo)})

    def api_repos(self) -> list[str]:
        """The repos whose listing was asked for, in order."""
        return [h.headers["x-repo"] for h in list(self.hits) if h.headers.get("x-repo")]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def __enter__(self) -> HubServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the listing ----------------------------------------------------------------------------
    def _entry(self, repo: str, path: str, data: bytes) -> dict:
        wrong = f"{repo}/{path}" in self.bad_sha
        entry = {"rfilename": path, "size": len(data), "blobId": "0" * 40 if wrong and not is_lfs(path, data) else git_blob_id(data)}
        if is_lfs(path, data):
            sha256 = "0" * 64 if wrong else hashlib.sha256(data).hexdigest()
            entry["blobId"] = git_blob_id(f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(data)}\n".encode())
            entry["lfs"] = {"size": len(data), "sha256": sha256, "pointerSize": 134}
        return entry


class _Repos(MutableMapping):
    def __init__(self, hub: HubServer) -> None:
        self.hub = hub

    def __getitem__(self, repo: str) -> dict[str, bytes]:
        if repo not in self.hub.commits:
            raise KeyError(repo)
        return self.hub.files(repo)

    def __setitem__(self, repo: str, files: dict[str, bytes]) -> None:
        self.hub.push(repo, files)

    def __delitem__(self, repo: str) -> None:
        del self.hub.commits[repo], self.hub.refs[repo]

    def __iter__(self):
        return iter(list(self.hub.commits))

    def __len__(self) -> int:
        return len(self.hub.commits)


def _handler(hub: HubServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "fake-hub/1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def do_HEAD(self) -> None:
            self._serve(head=True)

        def do_GET(self) -> None:
            self._serve(head=False)

        # -- dispatch ---------------------------------------------------------------------------
        def _serve(self, head: bool) -> None:
            url = urlparse(self.path)
            parts = [unquote(p) for p in url.path.split("/")[1:]]
            self._hit = Hit(
                self.command,
                url.path,
                self.headers.get("Range"),
                0,
                headers={"authorization": self.headers.get("Authorization"), "user-agent": self.headers.get("User-Agent")},
            )
            with hub._lock:
                hub.hits.append(self._hit)
            try:
                if hub.down:
                    return self._error(503, "ServiceUnavailable", "the hub is down", head)
                if parts[:2] == ["api", "models"] and len(parts) >= 4:
                    return self._api(parts[2] + "/" + parts[3], parts[4:], parse_qs(url.query), head)
                if parts[0] == "_lfs" and len(parts) == 5:
                    return self._lfs(parts[1] + "/" + parts[2], parts[3], parts[4], head)
                if len(parts) >= 5 and parts[2] == "resolve":
                    return self._resolve(parts[0] + "/" + parts[1], parts[3], "/".join(parts[4:]), head)
                return self._error(404, None, "no such route", head)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _api(self, repo: str, rest: list[str], query: dict, head: bool) -> None:
            if repo not in hub.commits:
                return self._error(401, "RepoNotFound", "Repository not found", head)
            if rest and rest[0] == "revision" and len(rest) == 2:
                rev, kind = rest[1], "info"
            elif rest and rest[0] == "tree" and len(rest) >= 2:
                rev, kind = rest[1], "tree"
            elif not rest:
                rev, kind = "main", "info"
            else:
                return self._error(404, None, "no such route", head)
            sha = hub._resolve(repo, rev)
            if sha is None:
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
            files = hub.commits[repo][sha]
            if kind == "info":
                self._hit.headers["x-repo"] = repo
                blobs = query.get("blobs", ["false"])[0].lower() == "true"
                siblings = [hub._entry(repo, p, d) if blobs else {"rfilename": p} for p, d in sorted(files.items())]
                body = {
                    "_id": hashlib.md5(repo.encode()).hexdigest()[:24],
                    "id": repo,
                    "modelId": repo,
                    "author": repo.split("/")[0],
                    "sha": sha,
                    "private": False,
                    "disabled": False,
                    "gated": False,
                    "tags": [],
                    "siblings": siblings,
                }
                if hub.listing is not None:
                    body = hub.listing(body)
            else:
                prefix = "/".join(rest[2:])
                body = []
                for p, d in sorted(files.items()):
                    if prefix and not p.startswith(prefix + "/"):
                        continue
                    e = hub._entry(repo, p, d)
                    item = {"type": "file", "oid": e["blobId"], "size": e["size"], "path": p}
                    if "lfs" in e:
                        item["lfs"] = {"oid": e["lfs"]["sha256"], "size": e["size"], "pointerSize": 134}
                    body.append(item)
            self._send(200, json.dumps(body).encode(), {"Content-Type": "application/json"}, head)

        def _resolve(self, repo: str, rev: str, path: str, head: bool) -> None:
            if repo not in hub.commits:
                return self._error(401, "RepoNotFound", "Repository not found", head)
            sha = hub._resolve(repo, rev)
            if sha is None:
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
            data = hub.commits[repo][sha].get(path)
            if data is None:
                return self._error(404, "EntryNotFound", f"{path} does not exist on {rev}", head, {"X-Repo-Commit": sha})
            entry = hub._entry(repo, path, data)
            if "lfs" in entry:  # the hub redirects LFS files to its CDN, saying what they are
                sha256 = hashlib.sha256(data).hexdigest()
                location = f"{hub.cdn}/_lfs/{quote(repo)}/{sha}/{sha256}?path={quote(path)}"
                headers = {
                    "Location": location,
                    "X-Repo-Commit": sha,
                    "X-Linked-Etag": f'"{entry["lfs"]["sha256"]}"',
                    "X-Linked-Size": str(len(data)),
                    "ETag": f'"{entry["blobId"]}"',
                }
                return self._send(302, b"", headers, head)
            self._body(repo, path, data, {"X-Repo-Commit": sha, "ETag": f'"{entry["blobId"]}"'}, head)

        def _lfs(self, repo: str, sha: str, sha256: str, head: bool) -> None:
            for path, data in hub.commits.get(repo, {}).get(sha, {}).items():
                if hashlib.sha256(data).hexdigest() == sha256:
                    return self._body(repo, path, data, {"ETag": f'"{sha256}"'}, head)
            self._error(404, None, "no such object", head)

        # -- bodies -----------------------------------------------------------------------------
        def _body(self, repo: str, path: str, data: bytes, headers: dict, head: bool) -> None:
            self._hit.headers["x-file"] = (repo, path)
            if repo in hub.broken:
                return self._error(500, None, "internal error", head)
            start, end = 0, len(data) - 1
            status = 200
            spec = self.headers.get("Range")
            if spec and spec.startswith("bytes="):
                first, _, last = spec[6:].partition("-")
                start = int(first) if first else 0
                end = min(int(last), len(data) - 1) if last else len(data) - 1
                if start >= len(data) > 0 or start > end + 1:
                    return self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"}, head)
                status = 206
                headers = {**headers, "Content-Range": f"bytes {start}-{end}/{len(data)}"}
            headers = {**headers, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
            body = data[start : end + 1]
            self._hit.status = status
            self.send_response(status)
            for k, v in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(k, v)
            self.end_headers()
            if head:
                return
            cut = hub.cuts.get((repo, path))
            stop = len(body)
            if cut is not None and cut.times > 0 and start < cut.after < start + len(body):
                stop = cut.after - start
            sent = 0
            while sent < stop:
                piece = body[sent : min(stop, sent + 16384)]
                self.wfile.write(piece)
                sent += len(piece)
                self._hit.sent = sent
                if hub.throttle:
                    time.sleep(len(piece) / hub.throttle)
            self.wfile.flush()
            if stop < len(body):  # the connection drops mid-file
                cut.times -= 1
                if cut.then_down:
                    hub.down = True
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if end == len(data) - 1:  # the file's last byte went out
                with hub._lock:
                    hub.fetched.append(f"{repo}/{path}")

        def _send(self, status: int, body: bytes, headers: dict, head: bool) -> None:
            self._hit.status = status
            self.send_response(status)
            for k, v in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(k, v)
            self.end_headers()
            if not head and body:
                self.wfile.write(body)

        def _error(self, status: int, code: str | None, message: str, head: bool, extra: dict | None = None) -> None:
            headers = {"Content-Type": "application/json", "X-Error-Message": message, **(extra or {})}
            if code:
                headers["X-Error-Code"] = code
            self._send(status, json.dumps({"error": message}).encode(), headers, head)

    return Handler


def no_internet(monkeypatch) -> list[str]:
    """From now on (this test), looking up any host but loopback fails; the list of hosts that were tried."""
    tried: list[str] = []
    real = socket.getaddrinfo

    def loopback_only(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name not in LOOPBACK:
            tried.append(name)
            raise socket.gaierror(socket.EAI_NONAME, f"{name}: this test may not reach the internet")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)
    return tried
