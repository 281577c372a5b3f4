"""Inputs of the `infer` golden (koe's side): a whole tiny S2 folder (`fixtures.write_random_model`:
the LM, the released tokenizer files, the codec), reference clips as 16-bit WAV files with their
transcripts, and the jobs (`jobs.json`): each one call of upstream's server engine
(`TTSInferenceEngine.inference` with a `ServeTTSRequest`) and one koe request with the same text,
reference, seed and settings.

Jobs: a clone from a 44.1 kHz clip at the server's defaults; a clone from a 24 kHz stereo clip with
other sampling settings; the model's own voice; two speakers' turns in one text; a dialogue long
enough for several batches (each batch's codes fed back into the next prompt). `sizes.json`: the
packaged codec YAML's entries the tiny codec changes, which the oracle sets on its copy.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
from koe_fish_speech.fixtures import write_random_model
from koe_fish_speech.fixtures_codec import codec_config, random_codec_state
from koe_fish_speech.fixtures_lm import lm_config_json, lm_state

from koe.audio.io import write_wav
from koe.runtime.weights import files_sha256, state_sha256

SEED = 3
CLIPS = {"ref44k": (44100, 1, 2.5), "ref24k_stereo": (24000, 2, 1.6)}  # rate, channels, seconds
TRANSCRIPTS = {"ref44k": "This is the voice I would like you to use.", "ref24k_stereo": "Another voice, recorded in stereo."}
LONG_DIALOGUE = " ".join(
    f"<|speaker:{i % 2}|>{line}"
    for i, line in enumerate(
        [
            "Good morning, did you sleep well?",
            "Not really, the neighbours were loud again.",
            "That is a shame. Shall we get some coffee first?",
            "Yes please, a large one, with a little milk.",
            "I will order two, then we can talk about the plan.",
            "Sounds good to me.",
            "And after that, a walk in the park by the river?",
        ]
    )
)
JOBS = [
    {"name": "clone44k", "text": "Hello there, how are you today?", "references": ["ref44k"], "seed": 11, "options": {"max_new_tokens": 48}},
    {
        "name": "clone24k_settings",
        "text": "The quick brown fox jumps over the lazy dog.",
        "references": ["ref24k_stereo"],
        "seed": 12,
        "options": {"temperature": 0.5, "top_p": 0.6, "repetition_penalty": 1.3, "max_new_tokens": 60},
    },
    {"name": "own_voice", "text": "我们今天去公园散步吧。", "references": [], "seed": 13, "options": {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 48}},
    {
        "name": "two_speakers",
        "text": "<|speaker:0|>Are you coming?<|speaker:1|>Yes, in five minutes.",
        "references": ["ref44k", "ref24k_stereo"],
        "seed": 14,
        "options": {"max_new_tokens": 48},
    },
    {
        "name": "long_dialogue",
        "text": LONG_DIALOGUE,
        "references": ["ref24k_stereo", "ref44k"],
        "seed": 15,
        "options": {"chunk_length": 100, "max_new_tokens": 40},
    },
]


def clip(name: str) -> np.ndarray:
    """A seeded voice-like clip (n, channels) float32: a gliding harmonic tone with a syllable envelope, and noise."""
    rate, channels, seconds = CLIPS[name]
    g = np.random.default_rng(sum(map(ord, name)))
    n = int(rate * seconds)
    t = np.arange(n) / rate
    f0 = 170 + 40 * np.sin(2 * np.pi * 0.9 * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    tone = sum(np.sin(k * phase) / k for k in range(1, 6))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 2.7 * t) ** 2
    out = [0.3 * envelope * tone * (1 - 0.25 * c) + 0.02 * g.standard_normal(n) for c in range(channels)]
    return np.clip(np.stack(out, axis=1), -0.6, 0.6).astype(np.float32)


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    model = write_random_model(folder, seed=SEED)  # the model folder holds the clips and jobs too
    (folder / "sizes.json").write_text(json.dumps(codec_config("tiny").yaml_overrides(), indent=1))
    for name, (rate, _, _) in CLIPS.items():
        write_wav(folder / f"{name}.wav", clip(name), rate)
        (folder / f"{name}.lab").write_text(TRANSCRIPTS[name], encoding="utf-8")
    (folder / "jobs.json").write_text(json.dumps(JOBS, ensure_ascii=False, indent=1), encoding="utf-8")
    lines = [
        f"lm {state_sha256(lm_state(lm_config_json('tiny'), SEED))}",
        f"codec {state_sha256(random_codec_state('tiny', SEED))}",
        f"tokenizer {files_sha256([model / 'tokenizer.json', model / 'tokenizer_config.json'])}",
    ]
    (folder / "state_sha256.txt").write_text("\n".join(lines) + "\n")


# -- what the tests of this golden and of those built on its folder (infer_bf16, the drop-in) share --
EDGE = 256  # samples the golden keeps of each end of a request's audio


def voice_of(voices: dict, job: dict):
    """The job's clips as one voice (several: speakers 0, 1, ... in order), or None."""
    from koe_fish_speech.voice import FishSpeechVoice

    refs = [voices[r] for r in job["references"]]
    return FishSpeechVoice.joined(*refs) if refs else None


def assert_audio(golden: dict, name: str, audio: np.ndarray) -> None:
    """The job's whole audio is the golden's: float32 (samples,), its shape, ends and hash."""
    assert audio.dtype == np.float32 and audio.ndim == 1
    assert audio.shape == tuple(golden[f"{name}.audio_shape"])
    assert np.array_equal(audio[:EDGE], golden[f"{name}.audio_head"]) and np.array_equal(audio[-EDGE:], golden[f"{name}.audio_tail"])
    assert hashlib.sha256(np.ascontiguousarray(audio).tobytes()).hexdigest() == str(golden[f"{name}.audio_sha256"])


def check_fixture(golden: dict, folder: Path, check_state) -> None:
    """The folder's weights and tokenizer files are the ones the golden was made from."""
    check_state(golden, lm_state(lm_config_json("tiny"), SEED), name="lm")
    check_state(golden, random_codec_state("tiny", SEED), name="codec")
    check_state(golden, files_sha256([folder / "tokenizer.json", folder / "tokenizer_config.json"]), name="tokenizer")
