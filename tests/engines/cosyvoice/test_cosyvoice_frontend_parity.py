"""CosyVoice's model inputs against upstream's `CosyVoiceFrontEnd` (its source at ace7c47 in
`.oracle-cosyvoice`): `frontend_zero_shot`, `frontend_cross_lingual`, `frontend_instruct2` and
`frontend_vc` on random-weight v2 and v3 folders in the released layout, built by upstream as
`CosyVoice2`/`CosyVoice3` build it (the yaml's tokenizer and mel, onnxruntime on the folder's
`campplus.onnx` and speech tokenizer), on clips at 16, 22.05, 24, 44.1 and 48 kHz, mono and stereo.

What holds, at one torch thread: the same keys; every tensor's dtype, shape and values equal
(`torch.equal`): the text ids, the prompt mel at 24 kHz (resampled from each rate, through the
yaml's `feat_extractor`: v2's up to 8 kHz, v3's to Nyquist), the speech tokens, the lengths, the
trim to twice the tokens; the speaker embeddings within onnxruntime's rounding of CAM++ (as in
test_cosyvoice_onnx_parity). Clips upstream refuses (over 30 s, under 16 kHz) koe refuses too.
"""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle_harness import run_oracle, same

from koe.engines.cosyvoice.features import ClipError
from koe.engines.cosyvoice.fixtures import write_random_model
from koe.engines.cosyvoice.frontend import InputFrontEnd

pytestmark = pytest.mark.oracle

EMBEDDING_TOLERANCE = 1e-5
EMBEDDINGS = ("llm_embedding", "flow_embedding")
VARIANTS = {"v2": "CosyVoice2-0.5B", "v3": "Fun-CosyVoice3-0.5B-2512"}


def _speechy(seconds: float, sr: int, channels: int = 1, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    f0 = 120 + 40 * np.sin(2 * np.pi * 0.7 * t)
    x = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / sr) / k for k in range(1, 7))
    x = x * (0.5 + 0.5 * np.sin(2 * np.pi * 3.1 * t)) + 0.02 * rng.standard_normal(len(t))
    x = (0.4 * x / np.max(np.abs(x))).astype(np.float32)
    return np.stack([x, 0.6 * x - 0.02], axis=1) if channels == 2 else x


CLIPS = [  # (seconds, rate, channels, subtype)
    (3.2, 16000, 1, "PCM_16"),  # mel frames twice the tokens: nothing trimmed
    (2.0735, 24000, 2, "FLOAT"),  # an odd frame count: the mel trimmed
    (4.71, 44100, 1, "PCM_24"),
    (1.337, 22050, 1, "FLOAT"),  # upsampled to 24 kHz, down to 16 kHz
    (2.5, 48000, 2, "PCM_16"),
    (30.4, 16000, 1, "PCM_16"),  # over 30 s: the tokenizer refuses it
    (1.0, 8000, 1, "PCM_16"),  # under 16 kHz: refused
]
CASES = [
    {"name": "zs_en", "mode": "zero_shot", "text": "Hello there, how are you today?", "prompt_text": "This is the prompt.", "prompt": 0},
    {"name": "zs_zh", "mode": "zero_shot", "text": "今天天气真不错，我们去公园散步吧。", "prompt_text": "希望你以后能够做的比我还好呦。", "prompt": 1},
    {
        "name": "zs_marks",
        "mode": "zero_shot",
        "text": "[breath]Well,<strong>really</strong>? [laughter]",
        "prompt_text": "You are a helpful assistant.<|endofprompt|>Yes.",
        "prompt": 2,
    },
    {"name": "zs_48k", "mode": "zero_shot", "text": "A.", "prompt_text": "", "prompt": 4},
    {"name": "xl_22k", "mode": "cross_lingual", "text": "<|en|>Cross lingual speech.", "prompt": 3},
    {"name": "xl_stereo", "mode": "cross_lingual", "text": "你好。", "prompt": 1},
    {"name": "in_v2", "mode": "instruct2", "text": "Say it with joy!", "prompt_text": "用开心的语气说<|endofprompt|>", "prompt": 0},
    {"name": "in_v3", "mode": "instruct2", "text": "[AA1] [ǜ] phones", "prompt_text": "You are a helpful assistant. Speak slowly.<|endofprompt|>", "prompt": 2},
    {"name": "vc", "mode": "vc", "prompt": 0, "source": 2},
    {"name": "vc_stereo", "mode": "vc", "prompt": 4, "source": 3},
    {"name": "too_long", "mode": "zero_shot", "text": "x", "prompt_text": "y", "prompt": 5},
    {"name": "too_low", "mode": "cross_lingual", "text": "x", "prompt": 6},
    {"name": "vc_too_long", "mode": "vc", "prompt": 0, "source": 5},
]
REFUSED = {"too_long": "at most 30 s", "too_low": "8000 Hz; CosyVoice needs at least 16000 Hz", "vc_too_long": "at most 30 s"}


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    d = tmp_path_factory.mktemp("cosyvoice-frontend")
    folders = {}
    for i, (name, variant) in enumerate(VARIANTS.items()):
        folders[name] = write_random_model(d / variant, variant, parts=("yaml", "blank", "campplus.onnx", "speech_tokenizer"), seed=20 + i)
    clips = []
    for i, (seconds, sr, channels, subtype) in enumerate(CLIPS):
        path = d / f"clip{i}.wav"
        sf.write(path, _speechy(seconds, sr, channels, seed=i), sr, subtype=subtype)
        clips.append(str(path))
    job = {"folders": {k: str(v) for k, v in folders.items()}, "clips": clips, "cases": CASES}
    tensors, info = run_oracle("frontend_inputs", job, d / "work", family="cosyvoice", keep=tuple(f"*/{key}" for key in EMBEDDINGS))
    front_ends = {name: InputFrontEnd.from_folder(folder) for name, folder in folders.items()}
    return {"tensors": tensors, "info": info, "clips": clips, "front_ends": front_ends}


def _read(path: str):
    return sf.read(path, dtype="float32")


def _koe_inputs(fe: InputFrontEnd, case: dict, clips: list[str]) -> dict[str, torch.Tensor]:
    samples, sr = _read(clips[case["prompt"]])
    if case["mode"] == "vc":
        source, source_sr = _read(clips[case["source"]])
        return fe.convert(source, source_sr, fe.prompt(samples, sr, trim=False))
    prompt = fe.prompt(samples, sr)
    if case["mode"] == "zero_shot":
        return fe.zero_shot(case["text"], case["prompt_text"], prompt)
    if case["mode"] == "cross_lingual":
        return fe.cross_lingual(case["text"], prompt)
    return fe.instruct(case["text"], case["prompt_text"], prompt)


@pytest.mark.parametrize("version", list(VARIANTS))
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_model_inputs_equal_upstreams(oracle, version, case):
    tensors, info = oracle["tensors"], oracle["info"]
    fe = oracle["front_ends"][version]
    where = f"{version}/{case['name']}"
    if case["name"] in REFUSED:
        assert where in info["errors"] and where not in info["keys"]
        with pytest.raises(ClipError, match=REFUSED[case["name"]]):
            _koe_inputs(fe, case, oracle["clips"])
        return
    got = _koe_inputs(fe, case, oracle["clips"])
    assert sorted(got) == info["keys"][where]
    for key, mine in got.items():
        want = tensors[f"{where}/{key}"]
        assert mine.dtype == want.dtype and mine.shape == want.shape, key
        if key in EMBEDDINGS:
            assert (mine - want).abs().max().item() < EMBEDDING_TOLERANCE, key
        else:
            assert same(mine, want), key


@pytest.mark.parametrize("version", list(VARIANTS))
def test_prompts_are_trimmed_to_twice_the_tokens(oracle, version):
    """The cases cover both cuts: a mel with an odd frame count, and more tokens than half the frames."""
    tensors = oracle["tensors"]
    cut_mel = cut_tokens = False
    for case in CASES:
        if case["mode"] == "vc" or case["name"] in REFUSED:
            continue
        where = f"{version}/{case['name']}"
        tokens, feat = tensors[f"{where}/flow_prompt_speech_token"], tensors[f"{where}/prompt_speech_feat"]
        assert feat.shape[1] == 2 * tokens.shape[1]
        fe = oracle["front_ends"][version]
        samples, sr = _read(oracle["clips"][case["prompt"]])
        whole = fe.prompt(samples, sr, trim=False)
        cut_mel |= whole.speech_feat.shape[1] > feat.shape[1]
        cut_tokens |= whole.speech_token.shape[1] > tokens.shape[1]
    assert cut_mel and cut_tokens
