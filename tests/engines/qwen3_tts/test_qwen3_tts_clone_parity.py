"""Voice cloning (Base models) vs upstream qwen-tts==0.1.1, bit for bit on the CPU in float32."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import av
import numpy as np
import pytest
import soundfile as sf
import torch
from fixtures_models import model_folder
from oracle_harness import run_oracle, same

import koe
from koe.compat.qwen_tts import Qwen3TTSModel
from koe.engines.qwen3_tts.voice import VoicePrompt

pytestmark = pytest.mark.oracle

REF_TEXT = "This is the reference recording."
GREEDY = {"do_sample": False, "subtalker_dosample": False}


def speech_like(seconds: float, sr: int, seed: int, channels: int = 1) -> np.ndarray:
    """A voiced, vibrato tone with noise: enough structure for codes and embeddings to differ per clip."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    f0 = 120 + 40 * seed
    x = 0.3 * np.sin(2 * np.pi * f0 * t * (1 + 0.05 * np.sin(2 * np.pi * 4 * t))) * (0.6 + 0.4 * np.sin(2 * np.pi * 1.5 * t))
    x = np.stack([x + 0.03 * rng.standard_normal(t.size) for _ in range(channels)], axis=-1)
    return x.astype(np.float32).squeeze()


@pytest.fixture(scope="module")
def refs(tmp_path_factory):
    d = tmp_path_factory.mktemp("refs")
    sf.write(d / "ref24k.wav", speech_like(2.4, 24000, 0), 24000)
    sf.write(d / "ref16k.wav", speech_like(3.0, 16000, 1), 16000)
    sf.write(d / "ref44k_stereo.flac", speech_like(2.2, 44100, 2, channels=2), 44100)
    shutil.copyfile(MP3, d / "ref44k_stereo.mp3")
    return d


# The mp3 reference is committed: an encoder's bytes change with its release (PyAV 18.1.1's differ
# from 18.1.0's), and the recorded upstream runs are keyed by their inputs' bytes. Written again
# (then recorded again: `make goldens-qwen3_tts`) by running this file.
MP3 = Path(__file__).parents[2] / "data" / "ref44k_stereo.mp3"


def write_mp3(path, samples: np.ndarray, sr: int) -> None:
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mp3", rate=sr, layout="stereo")
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(samples.T[None].reshape(1, -1)), format="flt", layout="stereo")
        frame.sample_rate = sr
        for packet in stream.encode(frame):
            out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)


def calls(refs):
    r24, r16, flac, mp3 = (str(refs / n) for n in ("ref24k.wav", "ref16k.wav", "ref44k_stereo.flac", "ref44k_stereo.mp3"))
    return {
        "prompt_icl": {"method": "create_voice_clone_prompt", "kwargs": {"ref_audio": r24, "ref_text": REF_TEXT}},
        "prompt_batch": {"method": "create_voice_clone_prompt", "kwargs": {"ref_audio": [r24, r24], "ref_text": [REF_TEXT, "Another transcript."]}},
        "icl_sampled": {
            "method": "generate_voice_clone",
            "seed": 0,
            "kwargs": {"text": "Cloned speech, sampled.", "language": "english", "ref_audio": r24, "ref_text": REF_TEXT, "max_new_tokens": 12},
        },
        "icl_greedy": {
            "method": "generate_voice_clone",
            "seed": 1,
            "kwargs": {"text": "Cloned speech, greedy.", "language": "english", "ref_audio": r24, "ref_text": REF_TEXT, "max_new_tokens": 12, **GREEDY},
        },
        "icl_non_streaming": {
            "method": "generate_voice_clone",
            "seed": 2,
            "kwargs": {"text": "Whole text up front.", "ref_audio": r24, "ref_text": REF_TEXT, "non_streaming_mode": True, "max_new_tokens": 12},
        },
        "xvec_sampled": {
            "method": "generate_voice_clone",
            "seed": 3,
            "kwargs": {"text": "Only the x-vector.", "ref_audio": r24, "x_vector_only_mode": True, "max_new_tokens": 12},
        },
        "xvec_greedy": {
            "method": "generate_voice_clone",
            "seed": 4,
            "kwargs": {"text": "X-vector, greedy.", "ref_audio": r24, "x_vector_only_mode": True, "max_new_tokens": 12, **GREEDY},
        },
        "ref_16k": {
            "method": "generate_voice_clone",
            "seed": 5,
            "kwargs": {"text": "A 16 kHz reference.", "ref_audio": r16, "ref_text": REF_TEXT, "max_new_tokens": 12},
        },
        "ref_flac": {
            "method": "generate_voice_clone",
            "seed": 6,
            "kwargs": {"text": "A stereo flac reference.", "ref_audio": flac, "ref_text": REF_TEXT, "max_new_tokens": 12},
        },
        "ref_mp3": {
            "method": "generate_voice_clone",
            "seed": 7,
            "kwargs": {"text": "A stereo mp3 reference.", "ref_audio": mp3, "ref_text": REF_TEXT, "max_new_tokens": 12},
        },
        "batch": {
            "method": "generate_voice_clone",
            "seed": 8,
            "kwargs": {
                "text": ["First text of the batch, longer.", "Second."],
                "language": "english",
                "ref_audio": r24,
                "ref_text": REF_TEXT,
                "max_new_tokens": 10,
            },
        },
    }


@pytest.fixture(scope="module", params=["tiny", "tiny-proj"])
def case(request, refs, tmp_path_factory):
    root = tmp_path_factory.getbasetemp()
    folder = model_folder(root, "base", request.param)
    spec = calls(refs)
    names = list(spec)
    tensors, info = run_oracle("qwen_generate", {"model_dir": str(folder), "calls": [spec[n] for n in names]}, root / f"oracle-base-{request.param}")
    assert info["loading"]["missing_keys"] == [] and info["loading"]["unexpected_keys"] == []
    return folder, spec, names, tensors


def _outputs(tensors, i):
    j = 0
    while f"wav_{i}_{j}" in tensors:
        yield tensors[f"codes_{i}_{j}"], tensors[f"wav_{i}_{j}"]
        j += 1


def test_voice_prompt_equals_upstream(case):
    folder, spec, names, tensors = case
    tts = koe.load(folder)
    for name in ("prompt_icl", "prompt_batch"):
        i = names.index(name)
        kw = spec[name]["kwargs"]
        refs = kw["ref_audio"] if isinstance(kw["ref_audio"], list) else [kw["ref_audio"]]
        texts = kw["ref_text"] if isinstance(kw["ref_text"], list) else [kw["ref_text"]]
        prompts = tts.engine.prepare_voices(refs, texts, [False] * len(refs))
        for j, p in enumerate(prompts):
            assert same(p.ref_code, tensors[f"refcode_{i}_{j}"]), f"{name}[{j}] ref_code"
            assert same(p.speaker_embedding, tensors[f"spk_{i}_{j}"]), f"{name}[{j}] speaker embedding"


def test_native_cloning_equals_upstream(case):
    folder, spec, names, tensors = case
    tts = koe.load(folder)
    for i, name in enumerate(names):
        call = spec[name]
        if call["method"] != "generate_voice_clone":
            continue
        kw = dict(call["kwargs"])
        voice = tts.prepare_voice(kw.pop("ref_audio"), kw.pop("ref_text", None), x_vector_only=kw.pop("x_vector_only_mode", False))
        text = kw.pop("text")
        out = tts.generate(text, voice=voice, seed=call["seed"], **kw)
        out = out if isinstance(out, list) else [out]
        expected = list(_outputs(tensors, i))
        assert len(out) == len(expected)
        for j, (r, (codes, wav)) in enumerate(zip(out, expected)):
            assert same(r.codes, codes), f"{name}[{j}] codes"
            assert same(r.audio, wav), f"{name}[{j}] waveform"


def test_drop_in_cloning_equals_upstream(case):
    folder, spec, names, tensors = case
    tts = Qwen3TTSModel.from_pretrained(str(folder), device_map="cpu", dtype=torch.float32)
    for i, name in enumerate(names):
        call = spec[name]
        if call["method"] != "generate_voice_clone":
            continue
        torch.manual_seed(call["seed"])
        wavs, sr = tts.generate_voice_clone(**call["kwargs"])
        expected = list(_outputs(tensors, i))
        for j, (wav, codes, (want_codes, want_wav)) in enumerate(zip(wavs, tts.last_codes, expected)):
            assert same(codes, want_codes), f"compat {name}[{j}] codes"
            assert same(wav, want_wav), f"compat {name}[{j}] waveform"
    # upstream's own prompt objects are accepted too
    i = names.index("icl_sampled")
    items = tts.create_voice_clone_prompt(ref_audio=spec["icl_sampled"]["kwargs"]["ref_audio"], ref_text=REF_TEXT)
    kw = {k: v for k, v in spec["icl_sampled"]["kwargs"].items() if k not in ("ref_audio", "ref_text")}
    torch.manual_seed(spec["icl_sampled"]["seed"])
    wavs, _ = tts.generate_voice_clone(voice_clone_prompt=items, **kw)
    assert same(wavs[0], next(_outputs(tensors, i))[1])


def test_saved_prompt_reused_in_another_process(case, tmp_path):
    folder, spec, names, tensors = case
    call = spec["icl_sampled"]
    tts = koe.load(folder)
    tts.prepare_voice(call["kwargs"]["ref_audio"], REF_TEXT).save(tmp_path / "voice")
    out = tmp_path / "out.npy"
    script = textwrap.dedent(f"""
        import numpy as np, torch
        torch.set_num_threads(1)
        import koe
        from koe.engines.qwen3_tts.voice import VoicePrompt
        tts = koe.load({str(folder)!r})
        voice = VoicePrompt.load({str(tmp_path / "voice")!r})
        r = tts.generate({call["kwargs"]["text"]!r}, language="english", voice=voice, seed={call["seed"]}, max_new_tokens=12)
        np.save({str(out)!r}, r.audio)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
    i = names.index("icl_sampled")
    assert same(np.load(out), next(_outputs(tensors, i))[1])
    loaded = VoicePrompt.load(tmp_path / "voice")
    assert loaded.ref_text == REF_TEXT and loaded.model.model_type == "base"


if __name__ == "__main__":
    write_mp3(MP3, speech_like(2.6, 44100, 3, channels=2), 44100)
