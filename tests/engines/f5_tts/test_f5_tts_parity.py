"""F5-TTS end to end against upstream f5-tts==1.1.22 (its own venv), bit for bit on the CPU in float32.

Upstream's side is `preprocess_ref_audio_text` + `infer_process` right after `seed_everything(N)`
(what `F5TTS.infer(seed=N)` does), on random-weight models in the layout koe loads, for both arch
families. koe's side is the public API: `koe.load(folder)`, `prepare_voice`, `generate`.
Upstream's multi-batch output is float64 (its cross-fade uses np.linspace); koe returns float32,
equal to it cast to float32.
"""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
from oracle_harness import run_oracle, same

import koe
from koe.engines.f5_tts.fixtures import write_random_model

pytestmark = pytest.mark.oracle

EN_REF = "Some call me nature, others call me mother nature."
ZH_REF = "对，这就是我，万人敬仰的太乙真人。"
LONG = (
    "I don't really care what you call me. I've been a silent spectator, watching species evolve, empires rise and fall. "
    "But always remember, I am mighty and enduring. Respect me and I'll nurture you; ignore me and you shall face the consequences. "
    "The rivers run where I let them, and the mountains keep their shape because I allow it."
)


def _speechy(seconds: float, sr: int, channels: int = 1, level: float = 0.3, gaps: tuple[float, ...] = (), seed: int = 0) -> np.ndarray:
    """Voiced-like bursts (a few harmonics, amplitude-modulated), silent from each `gaps` start for 1.2 s."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    f0 = 140 + 20 * np.sin(2 * np.pi * 0.7 * t)
    x = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / sr) / k for k in range(1, 5))
    x = x * (0.55 + 0.45 * np.sin(2 * np.pi * 3.1 * t)) + 0.02 * rng.standard_normal(len(t))
    for g in gaps:
        x[int(g * sr) : int((g + 1.2) * sr)] = 0.0
    x = (level * x / np.max(np.abs(x))).astype(np.float32)
    if channels == 2:
        x = np.stack([x, 0.8 * x], axis=1)
    return x


@pytest.fixture(scope="module")
def refs(tmp_path_factory):
    d = tmp_path_factory.mktemp("f5-refs")
    clips = {
        "en24": (_speechy(3.0, 24000), 24000),
        "en16": (_speechy(2.5, 16000, seed=1), 16000),
        "st44": (_speechy(2.8, 44100, channels=2, seed=2), 44100),
        "long": (_speechy(14.5, 24000, gaps=(4.0, 9.5), seed=3), 24000),
        "quiet": (_speechy(3.0, 22050, level=0.02, seed=4), 22050),
    }
    paths = {}
    for name, (x, sr) in clips.items():
        paths[name] = str(d / f"{name}.wav")
        sf.write(paths[name], x, sr, subtype="PCM_16")
    return paths


CASES = [
    # id, reference, ref_text, text, seed, settings
    ("en", "en24", EN_REF, "Hello world, this is koe speaking.", 1, {"nfe_step": 8}),
    ("zh", "en24", ZH_REF, "你好，世界！我们一起说中文，好不好？", 2, {"nfe_step": 8}),
    ("mixed", "en16", EN_REF, "今天 the weather 很好, right?", 3, {"nfe_step": 16}),
    ("nocfg", "en24", EN_REF, "No guidance at all here.", 4, {"nfe_step": 8, "cfg_strength": 0.0}),
    ("nosway", "st44", EN_REF, "A uniform time grid.", 5, {"nfe_step": 16, "sway_sampling_coef": 0.0}),
    ("cfg", "en24", EN_REF, "Odd settings, on purpose.", 6, {"nfe_step": 9, "cfg_strength": 1.3, "sway_sampling_coef": -0.6}),
    ("speed", "en16", EN_REF, "Faster than usual, please.", 7, {"nfe_step": 8, "speed": 1.6}),
    ("short", "en24", EN_REF, "Hi!", 8, {"nfe_step": 8}),
    ("fixdur", "en24", EN_REF, "Exactly this long.", 9, {"nfe_step": 8, "fix_duration": 6.5}),
    ("batches", "en24", EN_REF, LONG, 10, {"nfe_step": 8}),
    ("batchfix", "en24", EN_REF, LONG, 11, {"nfe_step": 8, "fix_duration": 40.0, "cross_fade_duration": 0.3}),
    ("nofade", "en24", EN_REF, LONG, 12, {"nfe_step": 8, "cross_fade_duration": 0.0}),
    ("long", "long", EN_REF, "The reference was long and got clipped.", 13, {"nfe_step": 8}),
    ("quiet", "quiet", EN_REF, "A quiet reference is raised, then lowered.", 14, {"nfe_step": 8}),
    ("rms", "en24", EN_REF, "A loudness target above the clip's.", 15, {"nfe_step": 8, "target_rms": 0.5}),
    ("swaynone", "en24", EN_REF, "No sway: None is a value.", 16, {"nfe_step": 8, "cfg_strength": 0.0, "speed": 1.3, "sway_sampling_coef": None}),
]


@pytest.fixture(scope="module", params=["F5TTS_v1_Base", "F5TTS_Base"])
def compared(request, refs, tmp_path_factory):
    folder = write_random_model(tmp_path_factory.mktemp(request.param), request.param)
    job = {
        "model": str(folder),
        "cases": [
            {"id": cid, "kind": "infer", "ref_audio": refs[ref], "ref_text": ref_text, "text": text, "seed": seed, "settings": settings}
            for cid, ref, ref_text, text, seed, settings in CASES
        ],
    }
    tensors, info = run_oracle("generate", job, tmp_path_factory.mktemp("oracle"), family="f5_tts")
    engine = koe.load(folder, device="cpu")
    yield engine, refs, tensors, info
    engine.close()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_generate_equals_upstream(compared, case):
    engine, refs, tensors, info = compared
    cid, ref, ref_text, text, seed, settings = case
    voice = engine.prepare_voice(refs[ref], ref_text=ref_text)
    assert voice.ref_text == info[cid]["ref_text"]
    result = engine.generate(text, voice=voice, seed=seed, **settings)
    expected = tensors.get(f"{cid}.wav_float32", tensors[f"{cid}.wav"])  # float32, as koe's engine returns it
    assert result.sample_rate == info[cid]["sample_rate"] == 24000
    assert result.audio.dtype == np.float32 and result.audio.shape == expected.shape
    assert same(result.audio, expected)
    if cid.startswith("batch") or cid == "nofade":  # several batches; cross-faded ones come back float64 from upstream
        assert result.metadata["segments"][0]["batches"] > 1
        assert info[cid]["dtype"] == ("float32" if cid == "nofade" else "float64")


def test_streaming_gives_the_one_shot_samples(compared):
    engine, refs, _, _ = compared
    voice = engine.prepare_voice(refs["en24"], ref_text=EN_REF)
    one = engine.generate(LONG, voice=voice, seed=10, nfe_step=8)
    chunks = list(engine.stream(LONG, voice=voice, seed=10, nfe_step=8, chunk_s=0.5))
    assert len(chunks) > 3 and chunks[-1].final
    np.testing.assert_array_equal(np.concatenate([c.samples for c in chunks]), one.audio)
