"""`koe train finetune` and `koe.train.finetune` on a tiny random OmniVoice model: a folder of clip +
transcript pairs in, a model folder out that `koe speak` uses; every problem of the data listed at
once with nothing written; settings the recipe refuses and settings of other families, each one
clear message."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from koe.engines.omnivoice.fixtures import write_random_model

pytest_plugins = ["cli_fixtures"]

TEXTS = ["The first clip.", "第二个。", "A third, longer clip of speech.", "Four."]
FAST = ["--steps", "2", "--lr", "1e-3", "--warmup-updates", "0", "--batch-tokens", "300", "--min-sample-tokens", "5", "--workers", "2", "--no-progress"]


def _clip(path, seconds: float, seed: int, rate: int = 24000, level: float = 0.2) -> None:
    rng = np.random.default_rng(seed)
    n = int(rate * seconds)
    x = level * np.sin(2 * np.pi * (140 + 30 * seed) * np.arange(n) / rate) + 0.1 * level * rng.standard_normal(n)
    sf.write(path, x.astype(np.float32), rate, subtype="PCM_16")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("omnivoice-train")
    base = write_random_model(root / "base")
    pairs = root / "pairs"
    pairs.mkdir()
    for i, text in enumerate(TEXTS):
        _clip(pairs / f"utt{i}.wav", 0.4 + 0.2 * i, i)
        (pairs / f"utt{i}.txt").write_text(text + "\n", encoding="utf-8")
    return base, pairs


def test_a_run_makes_a_model_koe_speak_uses(setup, home, koe, tmp_path):
    base, pairs = setup
    out = tmp_path / "mine"
    r = koe("train", "finetune", "--model", base, "--data", pairs, "--out", out, *FAST)
    assert "the fine-tuned model (2 updates)" in " ".join(r.output.split()), r.output
    assert (out / "model.safetensors").is_file() and (out / "training" / "checkpoint-2" / "optimizer.bin").is_file()
    assert (out / "training" / "data" / "data_config.json").is_file()
    wav = tmp_path / "hi.wav"
    koe("speak", "--model", out, "--seed", "1", "Hello.", "-o", wav)
    assert wav.stat().st_size > 1000
    longer = koe("train", "finetune", "--model", base, "--data", pairs, "--out", out, *FAST, "--seed", "3", ok=False)
    assert longer.exit_code == 2 and "holds a run made with other settings (seed)" in " ".join(longer.output.split()), longer.output


def test_every_problem_of_the_data_is_listed_and_nothing_is_written(setup, home, koe, tmp_path):
    _, pairs = setup
    _clip(tmp_path / "silent.wav", 0.5, 0, level=0.0)
    (tmp_path / "junk.wav").write_bytes(b"not audio at all")
    rows = [("silent.wav", "Quiet."), ("junk.wav", "Junk."), ("missing.wav", "Gone."), (str(pairs / "utt0.wav"), "Fine.")]
    data = tmp_path / "data.csv"
    data.write_text("audio,text\n" + "".join(f"{a},{t}\n" for a, t in rows), encoding="utf-8")
    out = tmp_path / "out"
    r = koe("train", "finetune", "--model", setup[0], "--data", data, "--out", out, *FAST, ok=False)
    text = " ".join(r.output.split())
    assert r.exit_code == 2, r.output
    for expected in ("3 problems in the dataset", "data.csv:2: silent", "data.csv:3: junk.wav cannot be decoded", "data.csv:4: no such file"):
        assert expected in text, (expected, text)
    assert not out.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--steps", "0", "--schedule", "linear"], "steps must be at least 1; schedule must be one of cosine, constant"),
        (["--workers", "5"], "4 clips for 5 data-loader workers"),
        (["--epochs", "3"], "unknown training settings: epochs"),
    ],
)
def test_refusals_are_one_clear_message(setup, home, koe, tmp_path, args, message):
    base, pairs = setup
    full = ["train", "finetune", "--model", base, "--data", pairs, "--out", tmp_path / "out", *FAST]
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


def test_from_python_with_the_familys_settings(setup, tmp_path):
    import koe.train
    from koe.service.errors import InvalidRequest

    base, pairs = setup
    steps = []
    done = koe.train.finetune(
        base, pairs, tmp_path / "py", steps=2, lr=1e-3, warmup_updates=0, batch_tokens=300, min_sample_tokens=5, workers=1, grad_accum=2, on_step=steps.append
    )
    assert done.updates == steps[-1].optimizer_steps == 2 and len(steps) == 4 and (done.folder / "model.safetensors").is_file()
    with pytest.raises(InvalidRequest, match="unknown training settings: frames_per_batch"):
        koe.train.finetune(base, pairs, tmp_path / "bad", frames_per_batch=100)
