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

Recorded runs: a family whose oracle declares `recorded` test paths has its runs committed, one
file a run (`tests/engines/<family>/oracle_runs/<cpu kind>/<key>.safetensors`: upstream's tensors,
its info in the file's metadata), keyed by `run_key` (the cache's key without this machine's venv)
and kept by the kind of CPU they were made on (`cpu_kind`: upstream's floats differ between kinds).
On a kind with recordings its tests read them back and never start upstream, and a run with no
recording is an error that says how to record it; on a kind with none, upstream runs live.
`make goldens-<family>` records them on this machine's kind: `scripts/goldens.py` runs the declared
tests with `KOE_ORACLE_RECORD=<family>`, each run live or from this kind's old recordings, into
`oracle_runs.recording/`, which replaces `oracle_runs/<kind>/` when they pass (runs no test makes
any more are gone; another kind's recordings stay only while they hold the same runs).
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
import recorded_runs
import torch
from cpu_kind import cpu_kind
from recorded_runs import same
from safetensors.torch import load_file

from koe.engines.oracle import UpstreamOracle, declared

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT / "tests" / "oracle_shared"  # oracle_io.py: every script's job and result files
ORACLES: dict[str, UpstreamOracle] = declared()  # family -> its oracle, registered or under construction
DEFAULT_FAMILY = "qwen3_tts"  # run_oracle's default: the first family, whose tests call it without one
ORACLE_DIR = ROOT / ORACLES[DEFAULT_FAMILY].scripts
RUNS_ROOT = ROOT / "tests" / "engines"  # <family>/oracle_runs: the recorded runs


def oracle_python(family: str = DEFAULT_FAMILY) -> str:
    oracle = ORACLES[family]
    path = os.environ.get(oracle.python_env, str(ROOT / oracle.venv / "bin" / "python"))
    if not Path(path).exists():
        raise RuntimeError(f"oracle venv not found at {path}: run `make oracle` (or set {oracle.python_env})")
    return path


def run_oracle(
    script: str, job: dict, workdir: Path, timeout: float = 900, family: str = DEFAULT_FAMILY, keep: tuple[str, ...] = ()
) -> tuple[dict[str, torch.Tensor], dict]:
    """Run `<family's oracle folder>/<script>.py` on `job`; returns (tensors, info). A recorded
    family's run is read back from its recording (recorded again under `KOE_ORACLE_RECORD`): its
    large tensors as digests (`recorded_runs`: compare with `same`), but those named by `keep`
    (fnmatch patterns), which the test reads as data."""
    oracle = ORACLES[family]
    if not recorded_here(oracle):
        return run_script(oracle, oracle_python(family), script, job, workdir, timeout)
    key = run_key(oracle, script, job)
    name = f"{key}.safetensors"
    if family not in recording():
        if not runs_folder(family).is_dir():  # nothing recorded on this kind of CPU: upstream runs here
            return run_script(oracle, oracle_python(family), script, job, workdir, timeout)
        path = runs_folder(family) / name
        if not path.is_file():
            raise RuntimeError(
                f"no recorded run of {family}'s oracle script {script} for this job ({name}; "
                f"{_missed(oracle, script, job, runs_folder(family))}): its inputs, its scripts or its requirements changed. Record the family's runs again with `make goldens-{family}` "
                f"and commit {runs_folder(family)}/ (a test outside {', '.join(oracle.recorded)} "
                f"must be added to the oracle's `recorded` paths first)"
            )
        return recorded_runs.read(path)
    staged = runs_folder(family, staging=True) / name
    if not staged.is_file():
        old = runs_folder(family) / name
        run = recorded_runs.read(old) if old.is_file() else None
        if run is None or any(isinstance(t, recorded_runs.Digest) and recorded_runs.kept_whole(n, keep) for n, t in run[0].items()):
            run = run_script(oracle, oracle_python(family), script, job, workdir, timeout, replayable=True)
        recorded_runs.write(staged, script, *run, key_parts(oracle, script, job), keep)  # an old recording in today's form
    return recorded_runs.read(staged)


# -- recorded runs ----------------------------------------------------------------------------------


def recorded_here(oracle: UpstreamOracle) -> bool:
    """Whether the running test's runs of `oracle` are recorded: its file is in the oracle's
    `recorded` paths (a test elsewhere, say one whose run cannot be replayed, runs upstream live)."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "").partition("::")[0]
    return bool(test) and any(test == p or test.startswith(p.rstrip("/") + "/") for p in oracle.recorded)


def recording() -> set[str]:
    """The families whose runs are being recorded (`KOE_ORACLE_RECORD`, comma separated)."""
    return {f.strip() for f in os.environ.get("KOE_ORACLE_RECORD", "").split(",") if f.strip()}


def runs_folder(family: str, staging: bool = False) -> Path:
    """`tests/engines/<family>/oracle_runs/<this CPU's kind>` (the committed recordings made on this
    kind of CPU: `cpu_kind`), or the folder a recording pass writes (`oracle_runs.recording`, made
    on first use)."""
    family_folder = RUNS_ROOT / family
    folder = family_folder / recorded_runs.STAGING if staging else family_folder / recorded_runs.FOLDER / cpu_kind()
    if staging:
        folder.mkdir(parents=True, exist_ok=True)
    return folder


def run_script(
    oracle: UpstreamOracle, python: str, script: str, job: dict, workdir: Path, timeout: float = 900, replayable: bool = False
) -> tuple[dict[str, torch.Tensor], dict]:
    """`run_oracle` for a given oracle and python: from the cache when it holds this run. A run that
    could not be replayed (it writes outside its output folder, or its info names this run's paths)
    is never cached, and is an error when `replayable` is asked for (a recording)."""
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
    info = json.dumps(result[1])
    unreplayable = (
        "writes outside its output folder"
        if any(_digest(Path(p)) != d for p, d in before.items())
        else "names this run's paths in its info"  # a replay would give old paths
        if any(p in info for p in (str(workdir), str(workdir.resolve()), *named))
        else None
    )
    if unreplayable and replayable:
        raise RuntimeError(f"{oracle.scripts}/{script}.py {unreplayable}: a recording would not replay that")
    if hit is not None and not unreplayable:
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
    """`run_key`, and the stamp `make` leaves in the oracle's venv (rebuilt: new key) and the python
    run: this machine's cache."""
    stamp = Path(python).parent.parent / ".installed"
    venv = f"{python} {stamp.stat().st_mtime_ns if stamp.exists() else 'no stamp'}"
    return hashlib.sha256(f"{run_key(oracle, script, job)} {venv}".encode()).hexdigest()


def run_key(oracle: UpstreamOracle, script: str, job: dict) -> str:
    """A hash of everything an oracle's output depends on that is the same on every machine
    (`key_parts`)."""
    h = hashlib.sha256()
    for label, data in key_parts(oracle, script, job).items():
        h.update(f"{label}:{len(data.encode())}:{data}".encode())
    return h.hexdigest()


def key_parts(oracle: UpstreamOracle, script: str, job: dict) -> dict[str, str]:
    """What a run's output depends on, part by part: what it runs (the pinned package or source,
    its paths), its requirement files' bytes, every file of its scripts folder and of the shared one
    (the script, what it imports, the stubs), the script's name, the job with every file or folder
    it names replaced by its bytes' digest (the fixture models, the reference clips: where a test's
    temp files are is no input), and the environment the floats depend on (MKL_CBWR)."""
    digests = {p: _digest(Path(p)) for p in _named_paths(job)}
    return {
        "oracle": repr((oracle.package, oracle.source, oracle.source_paths, oracle.requirements, oracle.nodeps, oracle.scripts)),
        "requirements": " ".join(_digest(ROOT / name) for name in (*oracle.requirements, *oracle.nodeps)),
        "scripts": _digest(ROOT / oracle.scripts) + _digest(SHARED),
        "script": script,
        "job": json.dumps(_replaced(job, {p: f"<{d}>" for p, d in digests.items()}), sort_keys=True, ensure_ascii=False),
        "env": os.environ.get("MKL_CBWR", ""),
    }


def _missed(oracle: UpstreamOracle, script: str, job: dict, folder: Path) -> str:
    """Why no recording in `folder` is this run's, in words: what differs from the closest recording
    of the same script."""
    parts = key_parts(oracle, script, job)
    best: list[str] | None = None
    for path in sorted(folder.glob("*.safetensors")):
        recorded = recorded_runs.key_parts_of(path)
        if recorded.get("script") != script:
            continue
        differ = [k for k in parts if recorded.get(k) != parts[k]]
        if "job" in differ:
            differ = [k for k in differ if k != "job"] + _job_differences(json.loads(recorded["job"]), json.loads(parts["job"]), _replaced(job, {}))
        if best is None or len(differ) < len(best):
            best = differ
    if best is None:
        return f"no run of {script} is recorded"
    return "the closest recording of " + script + " differs in " + ", ".join(best)


def _job_differences(old, new, job, where: str = "job", most: int = 6) -> list[str]:
    """Where a recorded job (`old`, files as digests) and this one (`new`) differ, leaf by leaf
    (`job`: this job as written, to name a file whose bytes changed), at most `most` places."""
    if isinstance(old, dict) and isinstance(new, dict):
        places = [
            place
            for k in sorted(set(old) | set(new))
            for place in _job_differences(old.get(k), new.get(k), job.get(k) if isinstance(job, dict) else None, f"{where}[{k!r}]", most)
        ]
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        places = [
            place
            for i, (o, n) in enumerate(zip(old, new))
            for place in _job_differences(o, n, job[i] if isinstance(job, list) else None, f"{where}[{i}]", most)
        ]
    elif old == new:
        places = []
    elif isinstance(new, str) and new.startswith("<") and isinstance(old, str) and old.startswith("<"):
        places = [f"{where} (the bytes of {job})"]
    else:
        places = [where]
    return places[:most] + ([f"{len(places) - most} more"] if len(places) > most else [])


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
        with open(path, "rb") as f:
            magic = f.read(4)
        if magic in (b"RIFF", b"OggS"):  # audio whose writers put a time or a random number in it
            return hashlib.sha256(_ogg_without_serial(_wav_without_time(path.read_bytes()))).hexdigest()
        return hashlib.file_digest(open(path, "rb"), "sha256").hexdigest()
    if not path.is_dir():
        return "missing"
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(path)).encode() + b"\0" + _digest(p).encode())
    return h.hexdigest()


def _wav_without_time(data: bytes) -> bytes:
    """A WAV file's bytes with the time in its PEAK chunk zeroed: libsndfile writes the second it
    wrote a float WAV there, which no reader's samples depend on (the same clip written twice is
    the same input)."""
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return data
    data, at = bytearray(data), 12
    while at + 8 <= len(data):
        size = int.from_bytes(data[at + 4 : at + 8], "little")
        if data[at : at + 4] == b"PEAK" and size >= 8:
            data[at + 12 : at + 16] = bytes(4)  # after the chunk's version word: the timestamp
        at += 8 + size + (size & 1)
    return bytes(data)


def _ogg_without_serial(data: bytes) -> bytes:
    """An Ogg file's bytes with each page's stream serial number and checksum zeroed: libsndfile
    draws a random serial for every file it writes (and the checksum covers it), which no decoder's
    samples depend on."""
    if data[:4] != b"OggS":
        return data
    data, at = bytearray(data), 0
    while at + 27 <= len(data) and data[at : at + 4] == b"OggS":
        segments = data[at + 26]
        body = sum(data[at + 27 : at + 27 + segments])
        data[at + 14 : at + 18] = bytes(4)  # the stream's serial number
        data[at + 22 : at + 26] = bytes(4)  # the page's CRC
        at += 27 + segments + body
    return bytes(data)


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
        yield tensors[f"codes_{i}_{j}"], tensors[f"wav_{i}_{j}"]
        j += 1


def assert_same_outputs(results, expected, label: str) -> None:
    """koe's (codes, waveform) pairs equal the oracle's bit for bit, one per utterance, at least one."""
    expected = list(expected)
    assert len(results) == len(expected) > 0, label
    for j, ((codes, wav), (want_codes, want_wav)) in enumerate(zip(results, expected)):
        assert want_codes.shape[0] > 0, f"{label}[{j}]: oracle produced no frames"
        assert same(codes, want_codes), f"{label}[{j}]: codes differ"
        assert wav.dtype == np.float32 and same(wav, want_wav), f"{label}[{j}]: waveform differs"
