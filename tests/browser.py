"""The real-browser harness for koe serve's pages: headless Chromium (the system's, driven by Playwright) against a
real `koe serve` process on a loopback port, with tiny random-weight models in a KOE_HOME of its own.

A test module loads the fixtures as a plugin and imports the helpers:

    pytest_plugins = ["browser"]
    from browser import expect_console_errors, shot, watch_of

(Importing the fixtures by name, `from browser import page, server  # noqa: F401`, works too, but ruff then reports
F811 at every test that takes one: astral-sh/ruff#10662. PYTEST_DONT_REWRITE: this module has no bare asserts, and
the marker keeps pytest from warning that it cannot rewrite a plugin the test module has already imported.)

- `chromium` (module): the browser, on the system Chromium (`KOE_CHROMIUM`, else `chromium` on PATH), offline
  (no background calls to Google's hosts), with a fake microphone that plays `MIC_SECONDS` of a voiced-sounding clip.
- `koe_serve` (module): a factory, `koe_serve(token=..., queue_size=..., ...)` -> `KoeServer`, each stopped at the end
  of the module; `server` (module) is `koe_serve()` with the defaults. A module defines its own `server` fixture to
  change the settings: the page fixtures open whatever fixture is named `server`.
- `page`, `phone_page`, `dark_page` (function): a fresh browser context and page for `server` (URLs relative to it:
  `page.goto("/")`), watched (`PageWatch`): console errors, uncaught page errors, Content-Security-Policy violations
  and any request to another origin (which is aborted) fail the test at teardown.
  `open_page(server, phone=..., color_scheme=...)` makes more.
- `expect_console_errors(page, r"...")` allows console errors a test provokes (a 4xx it asked for);
  `watch_of(page)` is the page's watch (what it saw, `check()` to fail now); `shot(page, name)` is a screenshot.

Playwright's sync API handles the browser's events only while the test is inside one of its calls: to wait for the
page, use its waits (`expect(...)`, `page.wait_for_function`, `page.wait_for_timeout`), not `time.sleep`. The page's
requests to the server never wait for this process (only off-origin ones are routed here, to be refused).

The fake microphone is what getUserMedia gets: the clip, looped, through Chromium's default processing (automatic
gain control raises its level; ask for `{autoGainControl: false, echoCancellation: false, noiseSuppression: false}`
to get it as it is). MediaRecorder records it as audio/webm (Opus).

Chromium is not in pip: Debian's `chromium` package (`sudo apt-get install chromium`; `make browser` installs it when
run as root). Playwright's own browser download (`playwright install`) is not used.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import tomlkit
from fixtures_models import model_folder
from product_helpers import speechy, write_wav

# -- the browser -----------------------------------------------------------------------------------
# No sandbox (CI runs as root, in containers), no GPU, and nothing Chromium would fetch by itself (field trials,
# component updates, sync, QUIC probes): the only network the page sees is the server's.
CHROMIUM_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",  # containers give /dev/shm 64 MB, too little for Chromium's shared memory
    "--autoplay-policy=no-user-gesture-required",  # <audio> plays without a click
    "--use-fake-device-for-media-stream",  # a fake microphone (and camera) ...
    "--use-fake-ui-for-media-stream",  # ... that getUserMedia gets without a prompt
)
MIC_SECONDS = 3.0  # the fake microphone plays this much of `speechy` at MIC_RATE, then loops
MIC_RATE = 48000
INSTALL_HINT = (
    "the browser tests need Chromium: `sudo apt-get install chromium` (Debian/Ubuntu; `make browser` does it as root), "
    "or set KOE_CHROMIUM to a Chromium or Chrome executable"
)


def find_chromium() -> str | None:
    """The Chromium to drive: `$KOE_CHROMIUM`, else `chromium` or `chromium-browser` on PATH; None if there is none."""
    if os.environ.get("KOE_CHROMIUM"):
        return os.environ["KOE_CHROMIUM"]
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    """The Playwright browser on the system Chromium, headless, offline, with a fake microphone that plays
    `MIC_SECONDS` of `speechy` (harmonics at 140, 280 and 420 Hz with a syllable-like envelope), looped. Fails (never
    skips) when Chromium or Playwright is missing: CI must run these tests.

    Module scope, not session: Playwright's sync API keeps an asyncio loop marked as running in the main thread
    while it is started, so every later test that calls `asyncio.run` (tests/test_server_drain.py) would fail."""
    path = find_chromium()
    if path is None:
        pytest.fail(f"no Chromium found: {INSTALL_HINT}", pytrace=False)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"KOE_CHROMIUM={path} is not an executable file: {INSTALL_HINT}", pytrace=False)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the browser tests need Playwright: pip install -e '.[dev]' (make venv-dev)", pytrace=False)
    fake_mic = write_wav(tmp_path_factory.mktemp("browser") / "mic.wav", speechy(MIC_SECONDS, MIC_RATE), MIC_RATE)
    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=path, args=[*CHROMIUM_FLAGS, f"--use-file-for-fake-audio-capture={fake_mic}"])
    except Exception as e:
        playwright.stop()
        pytest.fail(f"Chromium ({path}) did not start: {e}", pytrace=False)
    yield browser
    browser.close()
    playwright.stop()


# -- the server ------------------------------------------------------------------------------------
# The tiny random-weight models a server gets, by store name: (tests/fixtures_models kind).
MODELS = {"cv": "custom_voice", "base": "base", "design": "voice_design"}
START_TIMEOUT_S = 120.0  # importing torch and loading the default model on a busy 2-core CI machine
STOP_TIMEOUT_S = 20.0


@dataclass
class KoeServer:
    """A running `koe serve` process: its address, token, KOE_HOME and log."""

    url: str
    home: Path
    token: str | None
    process: subprocess.Popen
    log_path: Path

    def headers(self) -> dict[str, str]:
        """The Authorization header when the server has a token."""
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def health(self) -> dict:
        return httpx.get(f"{self.url}/health", timeout=10).json()

    def stats(self, model: str = "cv") -> dict:
        """`model`'s queue stats from /health (waiting, running, completed, cancelled, failed, ...); {} before its first use."""
        return self.health()["queues"].get(model, {})

    def log(self) -> str:
        """What the server has written to stdout and stderr so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        """SIGTERM (the server drains), then SIGKILL after `STOP_TIMEOUT_S`."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def koe_command() -> list[str]:
    """The `koe` command of this Python environment: its console script, else the CLI module."""
    script = Path(sys.executable).parent / "koe"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "koe.cli.main"]


def serve_environment(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment for the server, as `product_helpers.clean_koe_home` makes it (every KOE_* variable
    unset, KOE_HOME = `home`), offline from the Hugging Face hub with an empty cache of its own, one torch thread
    (the browser needs the other core), unbuffered logs; `extra` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOE_")}
    env.update(
        KOE_HOME=str(home),
        HF_HUB_OFFLINE="1",
        HF_HOME=str(home.parent / "hf"),
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        PYTHONWARNINGS="ignore",
    )
    env.update(extra or {})
    return env


def install_models(home: Path, models_root: Path, names: tuple[str, ...]) -> None:
    """The tiny random-weight models `names` (keys of MODELS) linked into KOE_HOME `home`."""
    from koe.service import KoeHome, load_settings

    h = KoeHome(load_settings(home, environ={}))
    try:
        for name in names:
            h.models.import_model(model_folder(models_root, MODELS[name]), name, link=True)
    finally:
        h.close()


def write_config(home: Path, sections: dict[str, dict]) -> Path:
    """KOE_HOME/koe.toml with `sections` ({"server": {...}, ...}; None values left out)."""
    doc = {name: {k: v for k, v in values.items() if v is not None} for name, values in sections.items()}
    path = home / "koe.toml"
    path.write_text(tomlkit.dumps({k: v for k, v in doc.items() if v}))
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_koe_serve(
    home: Path,
    models_root: Path,
    *,
    token: str | None = None,
    models: tuple[str, ...] = ("cv", "base", "design"),
    default: str | None = "cv",
    synthesis: dict | None = None,
    env: dict[str, str] | None = None,
    **server_settings,
) -> KoeServer:
    """`koe serve --port P` (the real command, a child process) on a free loopback port over a fresh KOE_HOME `home`
    holding the tiny models `models` (built under `models_root`), `default` the default model. Settings go in
    koe.toml: `token`, `server_settings` ([server]: queue_size, max_batch_size, max_input_chars, shutdown_grace_s, ...)
    and `synthesis` ([synthesis]: max_new_tokens, seed, ...). Returns once /health answers; on failure the error
    shows the server's log."""
    home.mkdir(parents=True, exist_ok=True)
    install_models(home, models_root, models)
    write_config(home, {"server": {"token": token, **server_settings}, "models": {"default": default}, "synthesis": synthesis or {}})
    for _ in range(3):  # another process may take the free port before the server binds it
        port = free_port()
        log_path = home.parent / f"serve-{port}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [*koe_command(), "serve", "--port", str(port)],
                env=serve_environment(home, env),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        server = KoeServer(f"http://127.0.0.1:{port}", home, token, process, log_path)
        if _wait_until_healthy(server):
            return server
        server.stop()
        if "address already in use" not in server.log().lower():
            break
    pytest.fail(f"koe serve did not start (exit code {server.process.returncode}); its log:\n{server.log()}", pytrace=False)


def _wait_until_healthy(server: KoeServer) -> bool:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and server.process.poll() is None:
        try:
            if httpx.get(f"{server.url}/health", timeout=2).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def koe_serve(tmp_path_factory, session_tmp) -> Iterator[Callable[..., KoeServer]]:
    """A factory of `koe serve` processes (`start_koe_serve`'s keywords), each in its own KOE_HOME, all stopped at the
    end of the module."""
    servers: list[KoeServer] = []

    def start(**settings) -> KoeServer:
        server = start_koe_serve(tmp_path_factory.mktemp("serve") / "home", session_tmp, **settings)
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.stop()


@pytest.fixture(scope="module")
def server(koe_serve) -> KoeServer:
    """`koe serve` with the defaults: models cv (CustomVoice, the default), base and design; no token."""
    return koe_serve()


# -- the page --------------------------------------------------------------------------------------
DESKTOP = {"viewport": {"width": 1280, "height": 800}}
PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 2, "is_mobile": True, "has_touch": True}
# The page reports Content-Security-Policy violations to the watch (an exposed binding; init scripts and bindings
# are not subject to the page's CSP).
_CSP_REPORTER = """
document.addEventListener("securitypolicyviolation", (e) => {
  const report = window.__koeCspViolation;
  if (report) report(`${e.effectiveDirective} blocked ${e.blockedURI || "(inline)"} (${e.sourceFile || e.documentURI}:${e.lineNumber})`);
});
"""
KINDS = ("console error", "page error", "CSP violation", "request off the server's origin")
_WATCHES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


@dataclass
class PageWatch:
    """What a page did that a test must not let pass: console errors, uncaught page errors, CSP violations and
    requests to another origin than the server's (aborted), each a list of one-line strings. `expect(kind, pattern)`
    allows what a test provokes; `check()` fails with everything else."""

    origin: str
    tmp_path: Path
    page: object = None
    seen: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})
    allowed: dict[str, list[re.Pattern]] = field(default_factory=lambda: {k: [] for k in KINDS})

    def expect(self, kind: str, pattern: str) -> None:
        """Allow `kind` problems (one of KINDS) that `pattern` matches (re.search)."""
        self.allowed[kind].append(re.compile(pattern))

    def expect_console_errors(self, pattern: str) -> None:
        """Allow console errors that `pattern` matches, e.g. r"status of 429" for a 429 the test provoked."""
        self.expect("console error", pattern)

    def problems(self) -> list[str]:
        """Everything seen that no `expect` allows, as "kind: what"."""
        return [f"{kind}: {what}" for kind, seen in self.seen.items() for what in seen if not any(p.search(what) for p in self.allowed[kind])]

    def settle(self) -> None:
        """Let what the page has done reach this process: a CSP violation is reported by a binding call, which lands
        a little after the console error; a closed page has nothing more to say."""
        if self.page is not None and not self.page.is_closed():
            try:
                self.page.evaluate("() => new Promise((resolve) => setTimeout(resolve, 50))")
            except Exception:  # navigating or crashed: what it reported so far is what there is
                pass

    def check(self) -> None:
        """Fail the test if the page did anything not allowed (after `settle`)."""
        self.settle()
        if problems := self.problems():
            pytest.fail("the page did what it must not:\n  " + "\n  ".join(problems), pytrace=False)

    # -- what the page reports
    def _on_console(self, msg) -> None:
        if msg.type == "error":
            where = msg.location
            self.seen["console error"].append(f"{msg.text} ({where.get('url', '')}:{where.get('lineNumber', '')})")

    def _on_page_error(self, error) -> None:
        self.seen["page error"].append(f"{error.name}: {error.message}")

    def _on_csp(self, source, text: str) -> None:
        self.seen["CSP violation"].append(text)

    def off_origin(self) -> re.Pattern:
        """URLs not on the server's origin. The browser matches it itself, so the page's own requests never wait
        for this process (a route handler runs only while the test is inside a Playwright call)."""
        return re.compile(rf"^(?!{re.escape(self.origin)}/)")

    def _block(self, route) -> None:
        self.seen["request off the server's origin"].append(f"{route.request.method} {route.request.url}")
        route.abort("blockedbyclient")


def watch_of(page) -> PageWatch:
    """The watch of a page the fixtures opened."""
    return _WATCHES[page]


def expect_console_errors(page, pattern: str) -> None:
    """Allow console errors of `page` that `pattern` matches (re.search), e.g. r"status of 404" for a 404 the test
    asked for; anything else still fails the test."""
    watch_of(page).expect_console_errors(pattern)


def new_watched_page(browser, server: KoeServer, tmp_path: Path, *, phone: bool = False, color_scheme: str = "light", **context_options):
    """A fresh context (downloads accepted, the microphone granted to the server's origin) and page on `server`,
    watched. Returns (context, page, watch); close the context when done."""
    context = browser.new_context(**(PHONE if phone else DESKTOP), color_scheme=color_scheme, accept_downloads=True, base_url=server.url, **context_options)
    context.grant_permissions(["microphone"], origin=server.url)
    watch = PageWatch(origin_of(server.url), tmp_path)
    context.expose_binding("__koeCspViolation", watch._on_csp)
    context.add_init_script(_CSP_REPORTER)
    context.route(watch.off_origin(), watch._block)
    page = watch.page = context.new_page()
    page.on("console", watch._on_console)
    page.on("pageerror", watch._on_page_error)
    _WATCHES[page] = watch
    return context, page, watch


@pytest.fixture
def open_page(chromium, tmp_path) -> Iterator[Callable]:
    """A factory: `open_page(server, phone=False, color_scheme="light", **context_options)` -> a watched page (its URLs
    relative to the server: `page.goto("/docs")`). At teardown the test fails if any page broke its watch."""
    opened: list[tuple] = []

    def open_(server: KoeServer, **options):
        context, page, watch = new_watched_page(chromium, server, tmp_path, **options)
        opened.append((context, watch))
        return page

    yield open_
    for _, watch in opened:
        watch.settle()
    for context, _ in opened:
        context.close()
    for _, watch in opened:
        watch.check()


@pytest.fixture
def page(open_page, server):
    """A watched desktop page (1280x800, light) on the module's `server`."""
    return open_page(server)


@pytest.fixture
def phone_page(open_page, server):
    """A watched phone-sized page (390x844, touch, mobile) on the module's `server`."""
    return open_page(server, phone=True)


@pytest.fixture
def dark_page(open_page, server):
    """A watched desktop page in the dark color scheme on the module's `server`."""
    return open_page(server, color_scheme="dark")


# -- screenshots -----------------------------------------------------------------------------------
def shot(page, name: str) -> Path:
    """A full-page screenshot `<name>.png`: in `$KOE_SCREENSHOTS` when set (`make screenshots`: docs/images/web),
    else in the test's tmp folder. Animations are stopped and the caret hidden, so the picture is the same each run.
    The file's path."""
    folder = Path(os.environ["KOE_SCREENSHOTS"]) if os.environ.get("KOE_SCREENSHOTS") else watch_of(page).tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=path, full_page=True, animations="disabled", caret="hide")
    return path


# -- the page, as the web tests drive it ---------------------------------------------------------
def ready(page, path: str = "/"):
    """Open the page and wait until it has loaded its lists (models, voices, library, history)."""
    page.goto(path)
    page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    return page


def audio_duration(page, selector: str = "#speak-audio") -> float:
    """The seconds of the audio element `selector` holds, once it has loaded them."""
    page.wait_for_function(f"() => document.querySelector('{selector}').readyState >= 1", timeout=15_000)
    return page.evaluate(f"() => document.querySelector('{selector}').duration")


def download(page, selector: str) -> tuple[str, bytes]:
    """Click `selector` and return the download it starts: (suggested file name, bytes)."""
    with page.expect_download() as info:
        page.click(selector)
    d = info.value
    return d.suggested_filename, open(d.path(), "rb").read()
