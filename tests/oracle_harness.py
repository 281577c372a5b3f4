"""Run an oracle script in an upstream package's own virtualenv and read back what it wrote.

Each family declares its oracle in its own folder (`koe.engines.oracle`: the pinned package or
source checkout, its venv, its scripts folder, the variable naming another venv's python);
`make oracle` builds them and `ORACLES` below is read from the declarations: the registered specs'
and those of the families under construction (not registered yet), whose parity tests call
`run_oracle(script, job, workdir, family="cosyvoice")` the same way. A missing oracle is an error,
never a skip.

Outputs are cached on disk by content (`cache_key`: the oracle's declaration and requirement
files, the stamp of its venv, its scripts, the job, and the bytes of every file or folder the job
names), so a rerun reuses what an unchanged oracle computed for unchanged inputs: in
`$KOE_ORACLE_CACHE`, else `.pytest_cache/koe-oracle/` (a fresh clone has none, so CI runs every
oracle; `KOE_ORACLE_CACHE=0` turns the cache off). A run that writes outside its output folder
(a file or folder its job names, existing or not), or whose info names a path of this run or of
its job, is not cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from koe.engines.oracle import UpstreamOracle, declared

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT / "tests" / "oracle_shared"  # oracle_io.py: every script's job and result files
ORACLES: dict[str, UpstreamOracle] = declared()  # family -> its oracle, registered or under construction
DEFAULT_FAMILY = "qwen3_tts"  # run_oracle's default: the first family, whose tests call it without one
ORACLE_DIR = ROOT / ORACLES[DEFAULT_FAMILY].scripts


def oracle_python(family: str = DEFAULT_FAMILY) -> str:
    oracle = ORACLES[family]
    path = os.environ.get(oracle.python_env, str(ROOT / oracle.venv / "bin" / "python"))
    if not Path(path).exists():
        raise RuntimeError(f"oracle venv not found at {path}: run `make oracle` (or set {oracle.python_env})")
    return path


def run_oracle(script: str, job: dict, workdir: Path, timeout: float = 900, family: str = DEFAULT_FAMILY) -> tuple[dict[str, torch.Tensor], dict]:
    """Run `<family's oracle folder>/<script>.py` on `job`; returns (tensors, info)."""
    return run_script(ORACLES[family], oracle_python(family), script, job, workdir, timeout)


def run_script(oracle: UpstreamOracle, python: str, script: str, job: dict, workdir: Path, timeout: float = 900) -> tuple[dict[str, torch.Tensor], dict]:
    """`run_oracle` for a given oracle and python: from the cache when it holds this run."""
    scripts = ROOT / oracle.scripts
    workdir.mkdir(parents=True, exist_ok=True)
    job_path = workdir / f"{script}-job.json"
    out = workdir / f"{script}-out"
    job_path.write_text(json.dumps(job))
    folder = cache_folder()
    key = cache_key(oracle, python, script, job) if folder else None
    hit = folder / key if folder else None
    if hit is not None and (hit / "complete").is_file():
        shutil.copytree(hit / "out", out, dirs_exist_ok=True)
        return _read(out)
    named = _named_paths(job)
    before = {p: _digest(Path(p)) for p in named}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(scripts / "stubs"), str(scripts), str(SHARED)])
    env["OMP_NUM_THREADS"] = "1"
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    proc = subprocess.run(
        [python, str(scripts / f"{script}.py"), str(job_path), str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"oracle script {script} failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
    result = _read(out)
    wrote_elsewhere = any(_digest(Path(p)) != d for p, d in before.items())
    info = json.dumps(result[1])
    names_this_run = any(p in info for p in (str(workdir), str(workdir.resolve()), *named))  # a replay would give old paths
    if hit is not None and not wrote_elsewhere and not names_this_run:
        _store(hit, out)
    return result


def _read(out: Path) -> tuple[dict[str, torch.Tensor], dict]:
    tensors = load_file(str(out / "tensors.safetensors")) if (out / "tensors.safetensors").exists() else {}
    info = json.loads((out / "info.json").read_text()) if (out / "info.json").exists() else {}
    return tensors, info


# -- the cache of oracle outputs ---------------------------------------------------------------------


def cache_folder() -> Path | None:
    """Where oracle outputs are kept: `$KOE_ORACLE_CACHE`, else `.pytest_cache/koe-oracle`; None when
    KOE_ORACLE_CACHE is 0 (off)."""
    value = os.environ.get("KOE_ORACLE_CACHE", "")
    if value.strip().lower() in ("0", "off", "no", "false"):
        return None
    return Path(value) if value else ROOT / ".pytest_cache" / "koe-oracle"


def cache_key(oracle: UpstreamOracle, python: str, script: str, job: dict) -> str:
    """A hash of everything an oracle's output depends on: its declaration (the pinned package),
    its requirement files, the stamp `make` leaves in its venv (rebuilt: new key) and the python
    run, every file of its scripts folder and of the shared one (the script, what it imports, the
    stubs), the script's name, the job, and the bytes of every file or folder the job names (the
    fixture models, the reference clips); the environment the floats depend on (MKL_CBWR)."""
    h = hashlib.sha256()

    def add(label: str, data: bytes | str) -> None:
        data = data.encode() if isinstance(data, str) else data
        h.update(f"{label}:{len(data)}:".encode() + data)

    add("oracle", repr(oracle))
    for name in (*oracle.requirements, *oracle.nodeps):
        add(name, (ROOT / name).read_bytes())
    stamp = Path(python).parent.parent / ".installed"
    add("venv", f"{python} {stamp.stat().st_mtime_ns if stamp.exists() else 'no stamp'}")
    add("scripts", _digest(ROOT / oracle.scripts) + _digest(SHARED))
    add("script", script)
    digests = {p: _digest(Path(p)) for p in _named_paths(job)}
    add("job", json.dumps(_replaced(job, {p: f"<{d}>" for p, d in digests.items()}), sort_keys=True))  # where a test's temp files are is no input
    add("env", os.environ.get("MKL_CBWR", ""))
    return h.hexdigest()


def _named_paths(job) -> list[str]:
    """The absolute paths under the temp folder or this checkout among `job`'s strings (at any depth), sorted."""
    found: set[str] = set()

    def walk(value) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, str) and value.startswith(os.sep) and len(value) < 4096 and _is_ours(Path(value)):
            found.add(value)

    walk(job)
    return sorted(found)


def _replaced(value, names: dict[str, str]):
    """`value` (a job) with each string found in `names` replaced by what it maps to."""
    if isinstance(value, dict):
        return {k: _replaced(v, names) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_replaced(v, names) for v in value]
    return names.get(value, value) if isinstance(value, str) else value


def _is_ours(path: Path) -> bool:
    """A place under the temp folder or this checkout (a file or folder a test made, or one an
    oracle is to write): its bytes are part of the key. Other strings (texts, system paths) count
    as they are written."""
    try:
        path = path.resolve()
        return any(path.is_relative_to(top) and path != top for top in (Path(tempfile.gettempdir()).resolve(), ROOT))
    except (OSError, ValueError):
        return False


def _digest(path: Path) -> str:
    """sha256 of a file's bytes, or of a folder's files (relative names and bytes, caches left out);
    "missing" when there is nothing there."""
    if path.is_file():
        return hashlib.file_digest(open(path, "rb"), "sha256").hexdigest()
    if not path.is_dir():
        return "missing"
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(path)).encode() + b"\0" + _digest(p).encode())
    return h.hexdigest()


def _store(entry: Path, out: Path) -> None:
    """Keep `out` as cache entry `entry` (written aside, then renamed: a partial entry is never read)."""
    partial = entry.with_name(entry.name + f".partial-{os.getpid()}")
    entry.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(out, partial / "out")
    (partial / "complete").write_text("")
    try:
        partial.rename(entry)
    except OSError:  # another run stored it first
        shutil.rmtree(partial, ignore_errors=True)


# -- Qwen3-TTS generate oracle (tests/oracle/qwen_generate.py): its outputs and koe's against them
def generated(tensors: dict, i: int):
    """The oracle's outputs of call `i`: (codes, waveform) per utterance, as it saved them."""
    j = 0
    while f"wav_{i}_{j}" in tensors:
        yield tensors[f"codes_{i}_{j}"], tensors[f"wav_{i}_{j}"].numpy()
        j += 1


def assert_same_outputs(results, expected, label: str) -> None:
    """koe's (codes, waveform) pairs equal the oracle's bit for bit, one per utterance, at least one."""
    expected = list(expected)
    assert len(results) == len(expected) > 0, label
    for j, ((codes, wav), (want_codes, want_wav)) in enumerate(zip(results, expected)):
        assert want_codes.shape[0] > 0, f"{label}[{j}]: oracle produced no frames"
        assert torch.equal(codes, want_codes), f"{label}[{j}]: codes differ"
        assert wav.dtype == np.float32 and np.array_equal(wav, want_wav), f"{label}[{j}]: waveform differs"
