"""`koe train speaker` / `koe train export` and `koe.train` from Python, end to end on a tiny
1.7B-like Base model: the run, its artefacts, resuming, the trained model in `koe speak`, the
server's voice list and the drop-in, and every refusal as one clear message."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from koe.engines.qwen3_tts.fixtures import write_random_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from finetune_data import write_dataset

pytest_plugins = ["cli_fixtures"]


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    root = tmp_path_factory.mktemp("train-cli")
    return {
        "1.7b": write_random_model(root / "base-1b7", "base", "tiny-1b7"),
        "0.6b": write_random_model(root / "base-0b6", "base", "tiny"),
        "cv": write_random_model(root / "cv", "custom_voice", "tiny-1b7"),
        "data": write_dataset(root / "data"),
    }


def train_args(bases, out: Path, *extra: str) -> list[str]:
    return [
        "train",
        "speaker",
        "--model",
        str(bases["1.7b"]),
        "--data",
        str(bases["data"]["jsonl"]),
        "--speaker",
        "Alice",
        "--out",
        str(out),
        "--epochs",
        "2",
        "--lr",
        "1e-3",
        *extra,
    ]


@pytest.fixture(scope="module")
def trained(bases, tmp_path_factory):
    from product_helpers import run_koe

    out = tmp_path_factory.mktemp("trained") / "alice"
    result = run_koe(*train_args(bases, out))
    assert result.exit_code == 0, result.output
    return out, result


def test_a_run_makes_a_custom_voice_model_and_keeps_its_artefacts(trained):
    out, result = trained
    assert "a CustomVoice model with the speaker alice (4 optimizer steps" in result.output
    assert "the speaker is saved as 'alice'" in result.output
    assert {p.name for p in (out / "training").iterdir()} >= {"prepared.jsonl", "prepared.summary.json", "train.log", "checkpoint", "run.json"}
    assert len((out / "training" / "train.log").read_text().splitlines()) == 12
    summary = json.loads((out / "training" / "prepared.summary.json").read_text())
    assert summary["clips"] == 11 and summary["frames"] > 11
    assert json.loads((out / "config.json").read_text())["talker_config"]["spk_id"] == {"alice": 3000}


def test_the_trained_speaker_speaks_through_the_cli(trained, home, koe, tmp_path):
    out, _ = trained
    wav = tmp_path / "hello.wav"
    r = koe("speak", "--model", str(out), "--speaker", "alice", "--seed", "1", "Hello there.", "-o", str(wav))
    assert r.exit_code == 0, r.output
    assert wav.stat().st_size > 1000
    listed = koe("models", "import", str(out), "--name", "alice-voice")
    assert listed.exit_code == 0, listed.output
    info = koe("models", "info", "alice-voice", "--json")
    assert json.loads(info.output)["speakers"] == ["alice"]


def test_the_drop_in_and_the_server_know_the_speaker(trained, tmp_path):
    from fastapi.testclient import TestClient

    from koe.compat.qwen_tts import Qwen3TTSModel
    from koe.server import create_app
    from koe.service import KoeHome, load_settings

    out, _ = trained
    tts = Qwen3TTSModel.from_pretrained(str(out))
    assert tts.get_supported_speakers() == ["alice"]
    wavs, rate = tts.generate_custom_voice("Hi.", speaker="alice", max_new_tokens=20)  # random weights: upstream's 4096 frames else
    assert rate == 24000 and 0 < wavs[0].size <= 20 * 1920
    home = KoeHome(load_settings(tmp_path / "home", flags={"models": {"default": "alice"}}, environ={}))
    home.models.import_model(out, "alice", link=True)
    with TestClient(create_app(home)) as client:
        voices = client.get("/v1/audio/voices", params={"model": "alice"}).json()
        assert "alice" in [v.get("id") or v.get("name") for v in voices["data"]], voices
        speech = client.post("/v1/audio/speech", json={"model": "alice", "input": "Hello.", "voice": "alice", "response_format": "wav", "seed": 3})
        assert speech.status_code == 200 and speech.content[:4] == b"RIFF", speech.text[:300]


def test_running_again_reuses_the_data_and_goes_on_from_the_checkpoint(bases, home, koe, tmp_path):
    out = tmp_path / "run"
    first = koe(*train_args(bases, out, "--stop-after", "train"))
    assert first.exit_code == 0 and "checkpoint in" in first.output, first.output
    assert not (out / "model.safetensors").exists()
    more = koe(*train_args(bases, out)[:-4], "--epochs", "3", "--lr", "1e-3")
    assert more.exit_code == 0, more.output
    assert "using the data prepared before" in more.output and "(6 optimizer steps" in more.output
    log = (out / "training" / "train.log").read_text().splitlines()
    assert len(log) == 19 and log[12] == "# resumed from the checkpoint: epoch 3, batch 1, 4 optimizer steps"


def test_export_of_a_stopped_run(bases, home, koe, tmp_path):
    out = tmp_path / "stopped"
    assert koe(*train_args(bases, out, "--stop-after", "train")).exit_code == 0
    r = koe("train", "export", "--out", str(out), "--export-dtype", "bfloat16")
    assert r.exit_code == 0, r.output
    weights = load_file(str(out / "model.safetensors"))
    assert {t.dtype for t in weights.values()} == {__import__("torch").bfloat16}


def test_stop_after_prepare(bases, home, koe, tmp_path):
    out = tmp_path / "prep"
    r = koe(*train_args(bases, out, "--stop-after", "prepare"))
    assert r.exit_code == 0 and "prepared:" in r.output, r.output
    assert not (out / "training" / "checkpoint").exists()


@pytest.mark.parametrize(
    "case, args, message",
    [
        ("0.6b", None, "only works where the two widths match: the 1.7B Base model (2048 and 2048), not the 0.6B"),
        ("cv", None, "is a custom_voice model; speaker fine-tuning starts from a Base model"),
        ("name", ["--speaker", "a b"], "speaker name 'a b': use 1-64 letters"),
        ("lr", ["--lr", "-1"], "lr must be a positive number"),
        ("precision", ["--precision", "int8"], "precision must be one of float32, bfloat16"),
        ("stage", ["--stop-after", "export"], "stop_after must be one of prepare, train"),
        ("dtype", ["--export-dtype", "int8"], "export dtype 'int8' is not one of"),
        ("data", ["--data", "/nonexistent/clips"], "no such file or folder"),
        ("lora", ["--lora-rank", "-1"], "lora_rank must be >= 0"),
        ("device", ["--device", "mps"], "device 'mps': give cpu, cuda or cuda:N"),
    ]
    + ([] if __import__("torch").cuda.is_available() else [("cuda", ["--device", "cuda"], "device 'cuda': no CUDA GPU is available here")]),
)
def test_refusals_are_one_clear_message_before_any_work(bases, home, koe, tmp_path, case, args, message):
    out = tmp_path / "out"
    full = train_args(bases, out)
    if case in ("0.6b", "cv"):
        full[full.index("--model") + 1] = str(bases[case])
    for flag, value in zip((args or [])[::2], (args or [])[1::2]):
        if flag in full:
            full[full.index(flag) + 1] = value
        else:
            full += [flag, value]
    r = koe(*full, ok=False)
    assert r.exit_code == 2, r.output
    assert message in " ".join(r.output.split()), r.output
    assert not (out / "training" / "checkpoint").exists()


def test_bad_rows_are_all_listed(bases, home, koe, tmp_path):
    data = tmp_path / "bad.jsonl"
    clip = str(bases["data"]["clips"] / "utt000.wav")
    data.write_text(
        json.dumps({"audio": clip, "text": "  ", "ref_audio": clip})
        + "\n"
        + json.dumps({"audio": str(tmp_path / "missing.wav"), "text": "hi", "ref_audio": clip})
        + "\n"
    )
    r = koe("train", "speaker", "--model", str(bases["1.7b"]), "--data", str(data), "--speaker", "bob", "--out", str(tmp_path / "o"), ok=False)
    assert r.exit_code == 2
    assert "bad.jsonl:1" in r.output and "bad.jsonl:2" in r.output, r.output


_BOUNDED_RUNS = r"""
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # the bug (reading it all) fails with MemoryError, not the machine
import koe.engines.qwen3_tts.finetune.run, koe.service.training  # imported before measuring
from typer.testing import CliRunner
from koe.cli.main import app
base, out, *datas = sys.argv[1:]
results = []
for i, data in enumerate(["/nonexistent/warm-up.jsonl", *datas]):
    before, started = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.monotonic()
    r = CliRunner().invoke(app, ["train", "speaker", "--model", base, "--data", data, "--speaker", "x", "--out", f"{out}/{i}"])
    results.append({"code": r.exit_code, "output": r.output, "seconds": time.monotonic() - started,
                    "grew_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024})
print(json.dumps(results[1:]))
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not Path("/dev/zero").exists(), reason="POSIX files")
def test_data_that_never_ends_is_refused_in_seconds_and_bounded_memory(bases, tmp_path):
    os.mkfifo(fifo := tmp_path / "clips.jsonl")
    with (huge := tmp_path / "huge.jsonl").open("wb") as f:
        f.truncate(3 << 30)  # sparse: over the 2 GiB cap, no disk
    (folder := tmp_path / "pairs").mkdir()
    shutil.copy(bases["data"]["pairs"] / "utt000.wav", folder)
    with (folder / "utt000.txt").open("wb") as f:
        f.truncate(5 << 30)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOE_")} | {"KOE_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [sys.executable, "-c", _BOUNDED_RUNS, str(bases["1.7b"]), str(tmp_path / "out"), "/dev/zero", str(fifo), str(huge), str(folder)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = [
        "zero: a character device, not a regular file",
        "clips.jsonl: a FIFO (named pipe), not a regular file",
        "huge.jsonl: 3 GiB, more than the 2 GiB a dataset file may be",
        "utt000.txt: 5 GiB, more than the 1 MiB a transcript may be",
    ]
    for result, message in zip(json.loads(proc.stdout), expected, strict=True):
        shown = " ".join(result["output"].split())
        assert result["code"] == 2 and message in shown and "Traceback" not in shown, result
        assert result["seconds"] < 10 and result["grew_mb"] < 64, result


def _ends_in_one_error_line(result, *words: str) -> None:
    """Exit 2, no traceback, stderr's last line one `error:` line with each of `words` in it (notes may come before)."""
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    last = [ln for ln in result.stderr.splitlines() if ln.strip()][-1]
    assert last.startswith("error:") and all(w in last for w in words), result.stderr


def test_damaged_run_files_are_one_named_line(bases, trained, home, koe, tmp_path):
    out, run = trained[0], tmp_path / "run"
    (run / "training" / "checkpoint").mkdir(parents=True)
    shutil.copy(out / "training" / "run.json", run / "training")
    for f in (out / "training" / "checkpoint").iterdir():  # links to the trained run's files but a torn state.json
        (run / "training" / "checkpoint" / f.name).symlink_to(f)
    state = run / "training" / "checkpoint" / "state.json"
    state.unlink()
    state.write_text((out / "training" / "checkpoint" / "state.json").read_text()[:100])
    for args in (["train", "export", "--out", str(run)], train_args(bases, run)):
        _ends_in_one_error_line(
            koe(*args, ok=False),
            "checkpoint is damaged: state.json cannot be read (not valid JSON",
            "(remove the folder",
            "to train again from the first epoch",
        )
    (run / "training" / "run.json").write_text('{"base": ')
    for args in (["train", "export", "--out", str(run)], train_args(bases, run)):
        _ends_in_one_error_line(koe(*args, ok=False), "the training run's file is damaged:", "run.json: not valid JSON", f"(remove {run} (or use another")


def test_an_output_folder_holding_something_else_is_refused(bases, home, koe, tmp_path):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    r = koe(*train_args(bases, out), ok=False)
    assert r.exit_code == 2 and "is not a koe training run" in r.output


def test_from_python(bases, tmp_path):
    import koe
    import koe.train

    steps = []
    result = koe.train.speaker(
        bases["1.7b"], bases["data"]["pairs"], "carol", tmp_path / "carol", ref=bases["data"]["ref"], epochs=1, lr=1e-3, on_step=steps.append
    )
    assert result.finished and result.speaker == "carol" and len(steps) == 6 and steps[-1].grad_norm is not None
    tts = koe.load(tmp_path / "carol")
    assert tts.capabilities.speakers == ("carol",)
    shutil.rmtree(tmp_path / "carol" / "training")
    assert koe.load(tmp_path / "carol").capabilities.speakers == ("carol",)


def test_lora_from_the_command_line(bases, home, koe, tmp_path):
    out = tmp_path / "lora"
    r = koe(*train_args(bases, out, "--lora-rank", "4", "--lora-alpha", "4"))
    assert "a CustomVoice model with the speaker alice" in r.output
    settings = json.loads((out / "training" / "checkpoint" / "state.json").read_text())["settings"]
    assert settings["lora_rank"] == 4 and settings["lora_alpha"] == 4.0
    assert not [k for k in load_file(str(out / "model.safetensors")) if "lora" in k]


def test_prepare_from_python_runs_the_family_data_stage(bases, tmp_path):
    """`koe.train.prepare` goes through the family's trainer module (koe.service.training), as `koe train` does."""
    import koe.train
    from koe.service.errors import InvalidRequest

    out = koe.train.prepare(bases["1.7b"], bases["data"]["pairs"], tmp_path / "prepared.jsonl", ref=bases["data"]["ref"])
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert out == tmp_path / "prepared.jsonl" and rows and all(row["audio_codes"] for row in rows)
    with pytest.raises(InvalidRequest) as bad:
        koe.train.prepare(bases["1.7b"], tmp_path / "no-such-data", tmp_path / "x.jsonl")
    assert bad.value.param == "data" and not (tmp_path / "x.jsonl").exists()


def test_a_family_without_a_trainer_is_refused_naming_those_that_train(tmp_path):
    import koe.train
    from koe.engines import registry
    from koe.service.errors import InvalidRequest

    untrained = [f for f in registry.families() if "speaker" not in (getattr(registry.spec(f), "trainers", None) or {})]
    if not untrained:
        pytest.skip("every registered family trains")
    folder = registry.write_fixture(tmp_path / "m", untrained[0])
    with pytest.raises(InvalidRequest, match="have no speaker training in koe") as refused:
        koe.train.prepare(folder, tmp_path / "data", tmp_path / "p.jsonl")
    assert registry.spec(registry.DEMO_FAMILY).title in refused.value.hint
