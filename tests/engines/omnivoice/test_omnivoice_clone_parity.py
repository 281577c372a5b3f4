"""OmniVoice cloning against upstream omnivoice==0.2.1, bit for bit on the CPU in float32: the voice
prompt of clips at several rates, mono and stereo, quiet and with pauses, from files and from
(waveform, rate) tuples; the audio tokenizer's encode and decode alone; speech cloned from them."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle_harness import run_oracle, same

from koe.compat.omnivoice import OmniVoice, VoiceClonePrompt
from koe.engines.base import SynthesisRequest, VoiceReference, collect
from koe.engines.omnivoice.fixtures import write_random_model
from koe.engines.omnivoice.generate import Settings, unmask
from koe.engines.omnivoice.reference import ReferenceError, load_clip
from koe.engines.omnivoice.synthesis import OmniVoiceModel, Output
from koe.engines.registry import load_engine

pytestmark = pytest.mark.oracle

EN = "Hello world, this is a test of the voice."
ZH = "你好世界，我们在中国。"


def _speechy(seconds: float, sr: int, channels: int = 1, seed: int = 0, level: float = 0.3, pause: tuple[float, float] | None = None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    f0 = 140 + 20 * np.sin(2 * np.pi * 0.7 * t)
    x = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / sr) / k for k in range(1, 5))
    x = x * (0.55 + 0.45 * np.sin(2 * np.pi * 3.1 * t)) + 0.02 * rng.standard_normal(len(t))
    x = level * x / np.max(np.abs(x))
    if pause is not None:
        x[int(pause[0] * sr) : int(pause[1] * sr)] = 0.0
    x = x.astype(np.float32)
    return np.stack([x, 0.8 * x], axis=1) if channels == 2 else x


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("omnivoice-clips")
    made = {
        "mono16": (_speechy(1.7, 16000), 16000, "PCM_16"),
        "stereo44": (_speechy(1.3, 44100, channels=2, seed=1), 44100, "FLOAT"),
        "quiet24": (_speechy(1.5, 24000, seed=2, level=0.05), 24000, "FLOAT"),
        "pauses48": (_speechy(2.6, 48000, seed=3, pause=(0.8, 1.6)), 48000, "PCM_16"),
        "lead22": (np.concatenate([np.zeros(11025, np.float32), _speechy(1.2, 22050, seed=4)]), 22050, "PCM_24"),
        "silent24": (np.zeros(24000, np.float32), 24000, "FLOAT"),
    }
    paths = {}
    for name, (x, sr, subtype) in made.items():
        paths[name] = str(d / f"{name}.wav")
        sf.write(paths[name], x, sr, subtype=subtype)
    return paths


PROMPTS = [
    ("mono16", "A prompt, spoken", False, True),
    ("stereo44", "你好，中国", True, True),
    ("quiet24", "quiet words.", False, True),
    ("pauses48", "  words with a pause ", False, True),
    ("lead22", "late start?", True, True),
    ("mono16", "no preprocessing", False, False),
    ("silent24", "nothing", False, True),
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("omnivoice") / "model")


@pytest.fixture(scope="module")
def model(model_dir):
    return OmniVoiceModel.load(model_dir)


@pytest.fixture(scope="module")
def encode_clip(tmp_path_factory):
    path = tmp_path_factory.mktemp("omnivoice-enc") / "clip.wav"
    sf.write(str(path), _speechy(0.96, 24000, seed=7)[: 23 * 960], 24000, subtype="FLOAT")
    return str(path)


@pytest.fixture(scope="module")
def upstream(model_dir, clips, encode_clip, tmp_path_factory):
    job = {
        "model": str(model_dir),
        "prompts": [{"path": clips[c], "text": t, "tensor": tensor, "preprocess": pre} for c, t, tensor, pre in PROMPTS],
        "encode": [{"path": encode_clip}],
        "decode": [{"codes": torch.randint(0, 1024, (8, 9), generator=torch.Generator().manual_seed(0)).tolist()}],
    }
    return run_oracle("prompt", job, tmp_path_factory.mktemp("omnivoice-prompt"), family="omnivoice")


def _clip(path: str, tensor: bool):
    if not tensor:
        return path
    data, rate = sf.read(path, dtype="float32", always_2d=True)
    return torch.from_numpy(data.T.copy()), rate


@pytest.mark.parametrize("index", range(len(PROMPTS)))
def test_voice_prompts_match_upstream(model, clips, upstream, index) -> None:
    tensors, info = upstream
    name, text, tensor, pre = PROMPTS[index]
    expected = info["prompts"][index]
    if "error" in expected:
        with pytest.raises(ReferenceError, match="silent"):
            model.prompt(_clip(clips[name], tensor), text, pre)
        return
    prompt = model.prompt(_clip(clips[name], tensor), text, pre)
    assert prompt.text == expected["text"] and prompt.rms == expected["rms"]
    assert same(prompt.codes, tensors[f"prompt{index}"])


def test_the_tokenizer_alone_matches_upstream(model, encode_clip, upstream) -> None:
    tensors, _ = upstream
    data, _ = sf.read(encode_clip, dtype="float32")
    assert same(model.codec.encode(torch.from_numpy(data)[None, None])[0], tensors["encode0"])
    codes = torch.randint(0, 1024, (8, 9), generator=torch.Generator().manual_seed(0))
    assert same(model.codec.decode(codes[None])[0], tensors["decode0"])
    assert load_clip(encode_clip, 24000).shape == (1, 23 * 960)


CLONES = [
    {"text": EN, "seed": 1, "ref": ("mono16", "A prompt, spoken", False), "num_step": 6},
    {"text": ZH, "seed": 2, "ref": ("stereo44", "你好，中国", True), "num_step": 5, "denoise": False},
    {"text": EN, "seed": 3, "ref": ("quiet24", "quiet words.", False), "num_step": 4, "class_temperature": 0.7},
    {"text": EN, "seed": 4, "ref": ("pauses48", "words with a pause", False), "num_step": 4, "postprocess_output": False, "speed": 1.4},
    {"text": "Short.", "seed": 5, "ref": ("lead22", "late start?", True), "num_step": 3, "guidance_scale": 0.0, "duration": 1.3},
]


@pytest.fixture(scope="module")
def upstream_clones(model_dir, clips, tmp_path_factory):
    cases = []
    for c in CLONES:
        name, text, tensor = c["ref"]
        case = {k: v for k, v in c.items() if k != "ref"}
        cases.append({**case, "ref_audio": {"path": clips[name], "tensor": tensor}, "ref_text": text})
    return run_oracle("generate", {"model": str(model_dir), "cases": cases}, tmp_path_factory.mktemp("omnivoice-clone"), family="omnivoice")


@pytest.mark.parametrize("index", range(len(CLONES)))
def test_cloned_speech_matches_upstream(model, clips, upstream_clones, index) -> None:
    tensors, _ = upstream_clones
    case = CLONES[index]
    name, text, tensor = case["ref"]
    settings = Settings(**{k: case[k] for k in ("num_step", "guidance_scale", "class_temperature") if k in case})
    output = Output(**{k: case[k] for k in ("postprocess_output",) if k in case})
    torch.manual_seed(case["seed"])  # before the prompt, as upstream's generate(ref_audio=...) (encoding draws nothing)
    voice = model.prompt(_clip(clips[name], tensor), text)
    frames = [model.frames_for(case["text"], case.get("duration"), case.get("speed"), voice)]
    codes = unmask(model.lm, model.items([case["text"]], frames=frames, denoise=case.get("denoise", True), voices=[voice]), settings)
    assert same(codes[0], tensors[f"case{index}.tokens0"])
    wave = model.finish(model.decode(codes[0]), voice.rms, output)
    assert same(wave, tensors[f"case{index}.0"])


def test_cloning_through_the_engine_and_the_drop_in_gives_upstream_s_samples(model_dir, clips, upstream_clones, tmp_path) -> None:
    """A voice prepared through the contract (saved and loaded back) spoken with `seed=N`; the
    drop-in's `ref_audio` + `ref_text` and its `VoiceClonePrompt` (upstream's file, saved and loaded)."""
    tensors, _ = upstream_clones
    engine = load_engine(model_dir, device="cpu")
    drop_in = OmniVoice.from_pretrained(str(model_dir))
    for index in (0, 2, 3):
        case = CLONES[index]
        name, text, _ = case["ref"]
        expected = tensors[f"case{index}.0"]
        options = {k: v for k, v in case.items() if k not in ("text", "seed", "ref")}
        engine.prepare_voice(VoiceReference(clips[name], text)).save(tmp_path / f"v{index}")
        voice = engine.load_voice(tmp_path / f"v{index}")
        got = collect(engine.synthesize(SynthesisRequest(case["text"], voice=voice, seed=case["seed"], options=options))).samples
        assert same(got, expected), f"engine, case {index}"
        torch.manual_seed(case["seed"])
        (wave,) = drop_in.generate(case["text"], ref_audio=clips[name], ref_text=text, **options)
        assert same(wave, expected), f"drop-in, case {index}"
        drop_in.create_voice_clone_prompt(clips[name], text).save(str(tmp_path / f"p{index}.pt"))
        prompt = VoiceClonePrompt.load(str(tmp_path / f"p{index}.pt"))
        torch.manual_seed(case["seed"])
        (wave,) = drop_in.generate(case["text"], voice_clone_prompt=prompt, **options)
        assert same(wave, expected), f"drop-in prompt, case {index}"
