"""`koe.compat.f5_tts.F5TTS` against upstream's `f5_tts.api.F5TTS`: same constructor, same
`infer(...)`, same `(wav, sr, spec)` (dtype included); and a training-style `.pt` checkpoint
loads in both."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import yaml
from oracle_harness import run_oracle, same

import koe
from koe.compat import f5_tts as compat
from koe.compat.f5_tts import F5TTS
from koe.engines.f5_tts.fixtures import write_random_model

pytestmark = pytest.mark.oracle

REF_TEXT = "Some call me nature, others call me mother nature."
LONG = (
    "I don't really care what you call me. I've been a silent spectator, watching species evolve, empires rise and fall. "
    "But always remember, I am mighty and enduring. Respect me and I'll nurture you; ignore me and you shall face the consequences."
)
CASES = [
    ("one", "A single batch of text.", 5, {"nfe_step": 8}),
    ("many", LONG, 6, {"nfe_step": 7, "cfg_strength": 1.5}),
    ("swaynone", "No sway: None is a value.", 7, {"nfe_step": 8, "cfg_strength": 0.0, "speed": 1.3, "sway_sampling_coef": None}),
]


def _clip(path, seconds=3.0, sr=24000):
    t = np.arange(int(seconds * sr)) / sr
    x = 0.3 * np.sin(2 * np.pi * 150 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    sf.write(path, x.astype(np.float32), sr, subtype="PCM_16")
    return str(path)


@pytest.fixture(scope="module", params=["safetensors", "pt"])
def setup(request, tmp_path_factory):
    """Both sides build the arch by name; the tiny fixture's arch (same schema) stands in for the
    released size, as the oracle script does for upstream's configs/<name>.yaml."""
    folder = write_random_model(tmp_path_factory.mktemp(f"f5-{request.param}"), "F5TTS_v1_Base", checkpoint=request.param)
    ref = _clip(folder.parent / "ref.wav")
    job = {
        "model": str(folder),
        "cases": [
            {"id": cid, "kind": "api", "ref_audio": ref, "ref_text": REF_TEXT, "text": text, "seed": seed, "settings": settings}
            for cid, text, seed, settings in CASES
        ],
    }
    tensors, info = run_oracle("generate", job, tmp_path_factory.mktemp("oracle"), family="f5_tts")
    ckpt = next(folder.glob("model_*"))
    tiny = yaml.safe_load((folder / "config.yaml").read_text())["model"]
    mp = pytest.MonkeyPatch()
    mp.setitem(compat.ARCHS, "F5TTS_v1_Base", tiny)
    tts = F5TTS(model="F5TTS_v1_Base", ckpt_file=str(ckpt), vocab_file=str(folder / "vocab.txt"), vocoder_local_path=str(folder / "vocos"), device="cpu")
    yield folder, tts, ref, tensors, info
    mp.undo()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_infer_equals_upstream(setup, case, tmp_path):
    folder, tts, ref, tensors, info = setup
    cid, text, seed, settings = case
    wav, sr, spec = tts.infer(ref, REF_TEXT, text, seed=seed, file_wave=str(tmp_path / "out.wav"), **settings)
    expected = tensors[f"{cid}.wav"]
    assert sr == info[cid]["sample_rate"] == 24000 and tts.seed == seed
    assert str(wav.dtype) == info[cid]["dtype"]  # float64 when batches were cross-faded, as upstream
    assert same(wav, expected)
    assert spec.ndim == 2 and spec.shape[0] == 100
    written, rate = sf.read(tmp_path / "out.wav", dtype="float32")
    assert rate == 24000 and len(written) == len(wav)


def test_koe_load_reads_the_same_checkpoint(setup):
    folder, tts, ref, tensors, _ = setup
    engine = koe.load(folder, device="cpu")
    result = engine.generate("A single batch of text.", voice=engine.prepare_voice(ref, ref_text=REF_TEXT), seed=5, nfe_step=8)
    assert same(result.audio, tensors["one.wav"])
    engine.close()


def test_unsupported_constructor_arguments_are_clear_errors(setup):
    folder = setup[0]
    with pytest.raises(ValueError, match="E2-TTS"):
        F5TTS(model="E2TTS_Base", ckpt_file="x", vocab_file="y")
    with pytest.raises(ValueError, match="Euler"):
        F5TTS(ckpt_file=str(next(folder.glob("model_*"))), ode_method="midpoint")
    with pytest.raises(ValueError, match="transcript"):
        setup[1].infer(setup[2], "  ", "Hello there.")
