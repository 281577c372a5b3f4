"""Recorded oracle runs (tests/oracle_harness.py): a recorded family's runs are read back from its
committed files, never run; recording writes them (live, or from the old recordings); a run with no
recording is an error that says how to record it; the key is the same on every machine.

A toy oracle (a scripts folder of this test's own, run by this Python) stands in for an upstream
package, registered for the test under the family name "toy".
"""

from __future__ import annotations

import sys

import oracle_harness
import pytest
import recorded_runs
import torch
from cpu_kind import cpu_kind, kind_of, width_of
from oracle_harness import _digest, cache_key, run_key, run_oracle, runs_folder
from recorded_runs import Digest, same

from koe.engines.oracle import UpstreamOracle

SCRIPT = """import json, random, sys
from pathlib import Path
import torch
from safetensors.torch import save_file
job = json.loads(Path(sys.argv[1]).read_text())
out = Path(sys.argv[2]); out.mkdir(parents=True, exist_ok=True)
if "write_to" in job:
    Path(job["write_to"]).write_text("written by the oracle")
draw = random.random()
save_file({"noise": torch.full((3,), draw)}, str(out / "tensors.safetensors"))
(out / "info.json").write_text(json.dumps({"draw": draw, "size": len(Path(job["fixture"]).read_bytes())}))
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy family: its oracle (recorded), its python (this one), a fixture, where its runs go."""
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "draw.py").write_text(SCRIPT)
    fixture = tmp_path / "fixture" / "model.bin"
    fixture.parent.mkdir()
    fixture.write_bytes(b"weights " * 100)
    oracle = UpstreamOracle(
        package="toy-tts==1.0.0", venv=".oracle-toy", python_env="KOE_ORACLE_TOY_PYTHON", scripts=str(scripts), recorded=("tests/test_oracle_runs.py",)
    )
    monkeypatch.setitem(oracle_harness.ORACLES, "toy", oracle)
    monkeypatch.setattr(oracle_harness, "RUNS_ROOT", tmp_path / "engines")
    monkeypatch.setenv("KOE_ORACLE_TOY_PYTHON", sys.executable)
    monkeypatch.setenv("KOE_ORACLE_CACHE", "0")
    monkeypatch.delenv("KOE_ORACLE_RECORD", raising=False)
    return oracle, fixture, tmp_path


def record(monkeypatch, job, workdir):
    monkeypatch.setenv("KOE_ORACLE_RECORD", "toy")
    result = run_oracle("draw", job, workdir, family="toy")
    monkeypatch.delenv("KOE_ORACLE_RECORD")
    return result


def commit_recording(kind: str | None = None) -> None:
    """What `make goldens-toy` does once the recording pass passed (on this CPU kind, or on `kind`)."""
    folder = runs_folder("toy")
    recorded_runs.commit(runs_folder("toy", staging=True), folder.parent, kind or folder.name)


def test_a_recorded_run_is_read_back_without_upstream(toy, monkeypatch) -> None:
    oracle, fixture, root = toy
    job = {"fixture": str(fixture)}
    tensors, info = record(monkeypatch, job, root / "run1")
    assert torch.equal(tensors["noise"], torch.full((3,), info["draw"]))
    commit_recording()
    monkeypatch.setenv("KOE_ORACLE_TOY_PYTHON", str(root / "no-venv" / "python"))  # upstream cannot start
    again, again_info = run_oracle("draw", job, root / "run2", family="toy")
    assert again_info == info and torch.equal(again["noise"], tensors["noise"])
    assert [p.name for p in runs_folder("toy").iterdir()] == [f"{run_key(oracle, 'draw', job)}.safetensors"]


def test_a_run_without_recording_says_how_to_record_it(toy, monkeypatch) -> None:
    oracle, fixture, root = toy
    record(monkeypatch, {"fixture": str(fixture), "steps": [{"n": 1}, {"n": 2}]}, root / "run1")
    commit_recording()
    fixture.write_bytes(b"other weights")  # koe's side changed its fixture: the recording is stale
    with pytest.raises(RuntimeError, match=r"no recorded run of toy's oracle script draw .*make goldens-toy") as stale:
        run_oracle("draw", {"fixture": str(fixture), "steps": [{"n": 1}, {"n": 3}]}, root / "run2", family="toy")
    # which parts of the job, down to the field, and which file's bytes
    assert f"differs in job['fixture'] (the bytes of {fixture}), job['steps'][1]['n']): " in str(stale.value)


def test_recording_again_reuses_the_old_recordings_and_drops_the_unused(toy, monkeypatch) -> None:
    oracle, fixture, root = toy
    other = fixture.with_name("other.bin")
    other.write_bytes(b"more weights")
    _, first = record(monkeypatch, {"fixture": str(fixture)}, root / "run1")
    record(monkeypatch, {"fixture": str(other)}, root / "run1")
    commit_recording()
    monkeypatch.setenv("KOE_ORACLE_TOY_PYTHON", str(root / "no-venv" / "python"))  # an old recording is copied, not run
    _, again = record(monkeypatch, {"fixture": str(fixture)}, root / "run2")
    assert again == first
    staged = sorted(p.name for p in runs_folder("toy", staging=True).iterdir())
    assert staged == [f"{run_key(oracle, 'draw', {'fixture': str(fixture)})}.safetensors"]  # the other run is no longer made


def test_a_run_that_writes_outside_its_output_cannot_be_recorded(toy, monkeypatch) -> None:
    oracle, fixture, root = toy
    with pytest.raises(RuntimeError, match="writes outside its output folder"):
        record(monkeypatch, {"fixture": str(fixture), "write_to": str(root / "run1" / "weights.txt")}, root / "run1")


def test_the_recording_key_holds_nothing_of_this_machine(toy) -> None:
    """The cache's key adds this machine's venv and python; the recording's is the same everywhere."""
    oracle, fixture, root = toy
    job = {"fixture": str(fixture)}
    python = sys.executable
    assert cache_key(oracle, python, "draw", job) != cache_key(oracle, python + "3", "draw", job)
    assert run_key(oracle, "draw", job) == run_key(UpstreamOracle(**{**vars(oracle), "venv": ".oracle-elsewhere", "python_env": "OTHER"}), "draw", job)
    assert run_key(oracle, "draw", job) != run_key(UpstreamOracle(**{**vars(oracle), "package": "toy-tts==1.0.1"}), "draw", job)


def test_a_recording_holds_the_info_and_the_script(toy, monkeypatch) -> None:
    oracle, fixture, root = toy
    record(monkeypatch, {"fixture": str(fixture)}, root / "run1")
    (path,) = runs_folder("toy", staging=True).iterdir()
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        assert f.metadata()["script"] == "draw"
    tensors, info = recorded_runs.read(path)
    assert info["size"] == 800 and set(tensors) == {"noise"}


def test_a_large_tensor_is_recorded_as_its_digest_and_compared_bit_for_bit(tmp_path) -> None:
    wave = torch.randn(recorded_runs.KEPT_BYTES)  # 4 bytes a value: past the kept size
    codes = torch.arange(12).reshape(3, 4)
    recorded_runs.write(tmp_path / "run.safetensors", "generate", {"wav": wave, "codes": codes}, {"n": 1}, {"script": "generate"})
    assert (tmp_path / "run.safetensors").stat().st_size < 4096
    tensors, info = recorded_runs.read(tmp_path / "run.safetensors")
    assert isinstance(tensors["wav"], Digest) and torch.equal(tensors["codes"], codes) and info == {"n": 1}
    assert same(wave, tensors["wav"]) and same(wave.numpy(), tensors["wav"]) and same(codes, tensors["codes"])
    nudged = wave.clone()
    nudged[-1] = torch.nextafter(nudged[-1], torch.tensor(1e9))  # one value, one bit
    assert not same(nudged, tensors["wav"]) and not same(wave.double(), tensors["wav"]) and not same(wave[:-1], tensors["wav"])
    assert len(tensors["wav"]) == wave.shape[0] and tensors["wav"].head[0] == float(wave[0])
    with pytest.raises(TypeError, match=r"kept as its digest .*same\(actual, expected\)"):
        tensors["wav"].numpy()


def test_a_float_wav_written_again_is_the_same_input(tmp_path) -> None:
    """libsndfile writes the time into a float WAV's PEAK chunk: not part of the key; the samples are."""
    import time

    import numpy as np
    import soundfile as sf

    clip = np.sin(np.arange(2400, dtype=np.float32) / 10)
    sf.write(str(tmp_path / "a.wav"), clip, 24000, subtype="FLOAT")
    time.sleep(1.1)
    sf.write(str(tmp_path / "b.wav"), clip, 24000, subtype="FLOAT")
    assert (tmp_path / "a.wav").read_bytes() != (tmp_path / "b.wav").read_bytes()
    assert _digest(tmp_path / "a.wav") == _digest(tmp_path / "b.wav")
    clip[7] += 0.5
    sf.write(str(tmp_path / "c.wav"), clip, 24000, subtype="FLOAT")
    assert _digest(tmp_path / "c.wav") != _digest(tmp_path / "a.wav")


def test_an_ogg_written_again_is_the_same_input(tmp_path) -> None:
    """libsndfile draws a random stream serial for each Ogg file (Opus, Vorbis): not part of the key."""
    import numpy as np
    import soundfile as sf

    clip = (np.sin(np.arange(9600, dtype=np.float32) / 7)[:, None] * [0.3, 0.2]).astype(np.float32)
    for name in ("a", "b"):
        sf.write(str(tmp_path / f"{name}.ogg"), clip, 48000, format="OGG", subtype="OPUS")
    assert (tmp_path / "a.ogg").read_bytes() != (tmp_path / "b.ogg").read_bytes()
    assert _digest(tmp_path / "a.ogg") == _digest(tmp_path / "b.ogg")
    sf.write(str(tmp_path / "c.ogg"), clip * 0.5, 48000, format="OGG", subtype="OPUS")
    assert _digest(tmp_path / "c.ogg") != _digest(tmp_path / "a.ogg")


def test_only_the_declared_tests_read_recordings(toy, monkeypatch) -> None:
    """A test outside the oracle's `recorded` paths runs upstream live (one whose run cannot be replayed)."""
    oracle, fixture, root = toy
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "tests/elsewhere/test_x.py::test_y (call)")
    _, first = run_oracle("draw", {"fixture": str(fixture)}, root / "run1", family="toy")
    _, second = run_oracle("draw", {"fixture": str(fixture)}, root / "run2", family="toy")
    assert first["draw"] != second["draw"] and not runs_folder("toy").exists()  # two live runs, nothing recorded


def test_a_cpu_kind_without_recordings_runs_upstream_live(toy, monkeypatch) -> None:
    """Runs recorded on another kind of CPU are not this one's (its floats differ): upstream runs here."""
    oracle, fixture, root = toy
    job = {"fixture": str(fixture)}
    record(monkeypatch, job, root / "run1")
    commit_recording(kind="other-avx512")
    assert runs_folder("toy").name == cpu_kind() and not runs_folder("toy").exists()
    _, first = run_oracle("draw", job, root / "run2", family="toy")
    _, second = run_oracle("draw", job, root / "run3", family="toy")
    assert first["draw"] != second["draw"]  # two live runs (the toy draws afresh each time)


def test_recording_on_one_kind_drops_another_kinds_stale_runs(toy, monkeypatch) -> None:
    oracle, fixture, root = toy
    record(monkeypatch, {"fixture": str(fixture)}, root / "run1")
    commit_recording(kind="other-avx512")
    record(monkeypatch, {"fixture": str(fixture)}, root / "run1")
    commit_recording()  # the same runs on this kind: the other kind's stay
    assert sorted(p.name for p in runs_folder("toy").parent.iterdir()) == sorted([cpu_kind(), "other-avx512"])
    fixture.write_bytes(b"other weights")
    record(monkeypatch, {"fixture": str(fixture)}, root / "run2")
    commit_recording()  # other runs now: the other kind's are stale
    assert [p.name for p in runs_folder("toy").parent.iterdir()] == [cpu_kind()]


def test_another_kinds_runs_stay_where_only_their_input_files_differ(toy, monkeypatch) -> None:
    """Fixtures written by float code differ between kinds (torch's vectorized random draws, an Opus
    encoder): a kind's first recording keeps another kind's runs of the same jobs on their own files;
    once this kind's own runs change, the other kind's go."""
    oracle, fixture, root = toy
    fixture.write_bytes(b"weights drawn on the other kind")
    record(monkeypatch, {"fixture": str(fixture)}, root / "run1")
    commit_recording(kind="other-avx512")
    fixture.write_bytes(b"weights drawn here")
    record(monkeypatch, {"fixture": str(fixture)}, root / "run2")
    commit_recording()
    assert sorted(p.name for p in runs_folder("toy").parent.iterdir()) == sorted([cpu_kind(), "other-avx512"])
    record(monkeypatch, {"fixture": str(fixture), "steps": 2}, root / "run3")
    commit_recording()  # another job on this kind: the other kind's runs are not this tree's any more
    assert [p.name for p in runs_folder("toy").parent.iterdir()] == [cpu_kind()]


def test_the_cpu_kind_names_vendor_and_widest_instruction_set() -> None:
    def info(vendor: str, flags: str) -> str:
        return f"processor\t: 0\nvendor_id\t: {vendor}\nflags\t\t: fpu sse2 {flags}\n\nprocessor\t: 1\nvendor_id\t: {vendor}\n"

    assert kind_of(info("GenuineIntel", "avx2 avx512f avx512_vnni")) == "intel-avx512vnni"
    assert kind_of(info("AuthenticAMD", "avx2 avx512f avx512_vnni avx512_bf16")) == "amd-avx512bf16"
    assert kind_of(info("AuthenticAMD", "avx avx2")) == "amd-avx2"
    assert kind_of(info("GenuineIntel", "avx2 avx512f avx512_bf16 amx_bf16 amx_tile")) == "intel-amx"
    assert kind_of(info("HygonGenuine", "sse4_2")) == "hygongenuine-sse"
    assert kind_of("", "arm64") == "arm64"
    assert cpu_kind() == kind_of(open("/proc/cpuinfo").read())


def test_a_golden_is_kept_by_width_or_by_kind(tmp_path, monkeypatch) -> None:
    """A topic's golden lives under its CPU's vector width, or its whole kind where the topic says
    `BY_CPU_KIND = True`; where none was made on this kind of CPU, upstream makes one, and a family
    whose upstream cannot run here says which golden is missing and why."""
    from golden_files import GoldenFiles

    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "golden_plain.py").write_text("SEED = 1\n")
    (folder / "golden_bf16.py").write_text("SEED = 1\nBY_CPU_KIND = True  # why\n")
    files = GoldenFiles("toy", folder)
    assert files.path("plain") == folder / "goldens" / width_of(cpu_kind()) / "plain.npz"
    assert files.path("bf16") == folder / "goldens" / cpu_kind() / "bf16.npz"
    with pytest.raises(RuntimeError, match=rf"(?s)no golden .*bf16.npz was made on this kind of CPU \({cpu_kind()}\).*no oracle is declared for 'toy'"):
        files.load_golden("bf16")
    monkeypatch.delenv("KOE_GOLDENS_HERE")
    with pytest.raises(FileNotFoundError, match=r"make goldens-toy TOPICS=plain"):
        files.load_golden("plain")
