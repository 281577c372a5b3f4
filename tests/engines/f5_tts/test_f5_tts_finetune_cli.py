"""`koe train finetune` and `koe.train.finetune` on a tiny random F5-TTS model: a folder of clip +
transcript pairs (and a CSV) in, a model folder out that `koe speak` uses; every problem of the
data listed at once with nothing written; settings the recipe refuses, unknown settings and a
model of another family, each one clear message."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from koe.engines.f5_tts.finetune.run import EXPORT_NAME
from koe.engines.f5_tts.fixtures import write_random_model

pytest_plugins = ["cli_fixtures"]

TEXTS = ["The first clip.", "第二个。", "A third, longer clip of speech.", "Four."]


def _clip(path, seconds: float, seed: int, rate: int = 24000, level: float = 0.2) -> None:
    rng = np.random.default_rng(seed)
    n = int(rate * seconds)
    x = level * np.sin(2 * np.pi * (140 + 30 * seed) * np.arange(n) / rate) + 0.1 * level * rng.standard_normal(n)
    sf.write(path, x.astype(np.float32), rate, subtype="PCM_16")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("f5-train")
    base = write_random_model(root / "base", "F5TTS_v1_Base")
    pairs = root / "pairs"
    pairs.mkdir()
    for i, text in enumerate(TEXTS):
        _clip(pairs / f"utt{i}.wav", 0.5 + 0.2 * i, i)
        (pairs / f"utt{i}.txt").write_text(text + "\n", encoding="utf-8")
    return base, pairs


FAST = ["--epochs", "2", "--lr", "1e-3", "--warmup-updates", "1", "--frames-per-batch", "150", "--max-clips", "2", "--no-progress"]


def test_a_run_makes_a_model_koe_speak_uses(setup, home, koe, tmp_path):
    base, pairs = setup
    out = tmp_path / "mine"
    r = koe("train", "finetune", "--model", base, "--data", pairs, "--out", out, *FAST)
    assert "the fine-tuned model (" in r.output and "epoch 2/2" in r.output, r.output
    assert (out / EXPORT_NAME).is_file() and (out / "training" / "model_last.pt").is_file()
    wav = tmp_path / "hi.wav"
    koe("speak", "--model", out, "--ref", pairs / "utt2.wav", "--ref-text", TEXTS[2], "--seed", "1", "Hello.", "-o", wav)
    assert wav.stat().st_size > 1000
    again = koe("train", "finetune", "--model", base, "--data", pairs, "--out", out, *FAST)  # finished: exported again
    assert r.output.split("the fine-tuned model (")[1].split()[0] == again.output.split("the fine-tuned model (")[1].split()[0]
    longer = koe("train", "finetune", "--model", base, "--data", pairs, "--out", out, *FAST, "--epochs", "3", ok=False)
    assert longer.exit_code == 2 and "holds a run made with other settings (epochs)" in " ".join(longer.output.split()), longer.output


def test_every_problem_of_the_data_is_listed_and_nothing_is_written(setup, home, koe, tmp_path):
    _, pairs = setup
    _clip(tmp_path / "silent.wav", 1.0, 0, level=0.0)
    _clip(tmp_path / "short.wav", 0.2, 1)
    _clip(tmp_path / "long.wav", 31.0, 2, rate=8000)
    _clip(tmp_path / "wide.wav", 2.0, 3)  # 188 mel frames: more than a batch of 150
    (tmp_path / "junk.wav").write_bytes(b"not audio at all")
    rows = [
        ("silent.wav", "Quiet."),
        ("short.wav", "Short."),
        ("long.wav", "Long."),
        ("wide.wav", "Wide."),
        ("junk.wav", "Junk."),
        ("missing.wav", "Gone."),
        (str(pairs / "utt0.wav"), "   "),
        (str(pairs / "utt1.wav"), "Twice."),
        (str(pairs / "utt1.wav"), "Twice again."),
    ]
    data = tmp_path / "data.csv"
    data.write_text("audio,text\n" + "".join(f"{a},{t}\n" for a, t in rows), encoding="utf-8")
    out = tmp_path / "out"
    r = koe("train", "finetune", "--model", setup[0], "--data", data, "--out", out, *FAST, ok=False)
    text = " ".join(r.output.split())
    assert r.exit_code == 2, r.output
    assert "data.csv:8" in text and "empty transcript" in text and "the same clip utt1.wav more than once" in text, text
    assert not out.exists()  # the rows' problems come first: the files are not read yet
    data.write_text("audio,text\n" + "".join(f"{a},{t}\n" for a, t in rows[:6]), encoding="utf-8")
    r = koe("train", "finetune", "--model", setup[0], "--data", data, "--out", out, *FAST, ok=False)
    text = " ".join(r.output.split())
    for expected in (
        "6 problems in the dataset",
        "data.csv:2: silent",
        "data.csv:3: 0.20 s long",
        "data.csv:4: 31.00 s long",
        "data.csv:5: 188 mel frames, more than a batch's 150",
        "data.csv:6: junk.wav cannot be decoded",
        "data.csv:7: no such file",
    ):
        assert expected in text, (expected, text)
    assert not out.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--epochs", "0"], "epochs must be at least 1"),
        (["--grad-accum", "0", "--lr", "-1"], "lr must be positive; grad_accum must be at least 1"),
        (["--device", "mps"], "device 'mps': give cpu, cuda or cuda:N"),
        (["--data", "/nonexistent/clips"], "no such file or folder"),
        (["--out", "HOLDER"], "holds something other than a fine-tuning run; its files would be replaced"),
    ],
)
def test_refusals_are_one_clear_message(setup, home, koe, tmp_path, args, message):
    base, pairs = setup
    full = ["train", "finetune", "--model", base, "--data", pairs, "--out", tmp_path / "out", "--no-progress"]
    if "HOLDER" in args:  # a folder with someone's files in it
        (tmp_path / "holder").mkdir()
        (tmp_path / "holder" / "notes.txt").write_text("mine")
        args = [str(tmp_path / "holder") if a == "HOLDER" else a for a in args]
    for flag, value in zip(args[::2], args[1::2]):
        if flag in full:
            full[full.index(flag) + 1] = value
        else:
            full += [flag, value]
    r = koe(*full, ok=False)
    assert r.exit_code == 2 and message in " ".join(r.output.split()), r.output
    assert not (tmp_path / "out").exists()


def test_models_info_says_how_a_model_trains(setup, home, koe):
    assert "training: koe train finetune" in koe("models", "info", setup[0]).output


def test_another_familys_model_is_refused_naming_the_families_that_fine_tune(setup, home, koe, tmp_path):
    from koe.engines.qwen3_tts.fixtures import write_random_model as write_qwen

    qwen = write_qwen(tmp_path / "qwen", "base", "tiny")
    r = koe("train", "finetune", "--model", qwen, "--data", setup[1], "--out", tmp_path / "out", ok=False)
    text = " ".join(r.output.split())
    assert r.exit_code == 2 and "models have no finetune training in koe (families that train:" in text, text
    assert "F5-TTS" in text.split("families that train:")[1], text
    r = koe("train", "speaker", "--model", setup[0], "--data", setup[1], "--speaker", "x", "--out", tmp_path / "o2", ok=False)
    assert r.exit_code == 2 and "F5-TTS models have no speaker training in koe" in " ".join(r.output.split()), r.output


def test_from_python_with_the_familys_settings(setup, tmp_path):
    import koe.train
    from koe.service.errors import InvalidRequest

    base, pairs = setup
    steps = []
    done = koe.train.finetune(base, pairs, tmp_path / "py", epochs=1, lr=1e-3, warmup_updates=1, frames_per_batch=150, on_step=steps.append)
    assert done.updates == steps[-1].optimizer_steps > 0 and (done.folder / EXPORT_NAME).is_file()
    stopped = koe.train.finetune(base, pairs, tmp_path / "stop", epochs=3, lr=1e-3, warmup_updates=1, frames_per_batch=150, should_stop=lambda: True)
    assert stopped.updates == 1  # the first update, its checkpoint, and out
    with pytest.raises(InvalidRequest, match="unknown training settings: batch_size"):
        koe.train.finetune(base, pairs, tmp_path / "bad", batch_size=2)
