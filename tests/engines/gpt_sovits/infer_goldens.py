"""What the per-version `infer_*` goldens share (koe's side): a whole random folder per model
(`fixtures.write_random_model(variant)`), two reference clips, `TTS.run` cases, and the weights'
hashes (`state_sha256.txt`: a line `<model> HASH` per folder, of its GPT's and SoVITS's tensors as
the files hold them, so a v3/v4 folder is hashed without drawing its 330 M numbers again).

`cases.json`: `{"models": {name: {"gpt": path, "sovits": path, "base": path | null}}, "cases":
{case: TTS.run's inputs + "model" (a folder under `models/`) + "aux" (aux.wav joins the reference)}}`.
The oracle side is tests/oracle_gpt_sovits/infer_run.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from koe.engines.gpt_sovits import spec
from koe.engines.gpt_sovits.fixtures import write_random_model
from koe.engines.gpt_sovits.sovits_weights import read_sovits
from koe.runtime.weights import state_sha256

__all__ = ["LONG", "PROMPT_EN", "Speaker", "check_case", "check_through_synthesize", "clip", "write_inputs"]

PROMPT_EN = "This is a test of my voice."
LONG = "First, we go home. Then we eat, and we sleep! Tomorrow? We work again, all day long: that is life."


def clip(seconds: float, rate: int, pitch: float, seed: int) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    rng = np.random.default_rng(seed)
    wave = 0.3 * np.sin(2 * np.pi * pitch * t * (1 + 0.1 * np.sin(2 * np.pi * 0.5 * t))) + 0.05 * rng.standard_normal(t.shape)
    return (np.clip(wave, -1, 1) * 32767).astype(np.int16)


def _write_wav(path: Path, samples: np.ndarray, rate: int) -> None:
    import soundfile

    soundfile.write(str(path), samples, rate, subtype="PCM_16")


def weights_sha256(folder: Path) -> str:
    """The hash of a folder's GPT and SoVITS tensors (a LoRA's base too), as stored."""
    layout = spec.find_layout(folder)
    gpt = torch.load(layout.gpt, map_location="cpu", weights_only=True)["weight"]
    state = {f"gpt.{k}": v for k, v in gpt.items()}
    for name, path in (("sovits", layout.sovits), ("base", layout.base)):
        if path is not None:
            state |= {f"{name}.{k}": v for k, v in read_sovits(path).weight.items()}
    return state_sha256(state)


def write_inputs(folder: Path, variants: dict[str, str], cases: dict[str, dict], seed: int, ref_seconds: float = 4.0) -> None:
    """`models/<name>/` for each `variants[name]`, ref.wav (32 kHz) and aux.wav (24 kHz), cases.json
    (each case over PROMPT_EN in English unless it says otherwise), state_sha256.txt."""
    folder.mkdir(parents=True, exist_ok=True)
    models, hashes = {}, []
    for name, variant in variants.items():
        model = write_random_model(folder / "models" / name, variant=variant, seed=seed)
        layout = spec.find_layout(model)
        models[name] = {
            k: None if p is None else p.relative_to(model).as_posix() for k, p in (("gpt", layout.gpt), ("sovits", layout.sovits), ("base", layout.base))
        }
        hashes.append(f"{name} {weights_sha256(model)}")
    _write_wav(folder / "ref.wav", clip(ref_seconds, 32000, 180.0, seed), 32000)
    _write_wav(folder / "aux.wav", clip(3.5, 24000, 240.0, seed + 1), 24000)
    full = {name: {"prompt_text": PROMPT_EN, "prompt_lang": "en", **case} for name, case in cases.items()}
    (folder / "cases.json").write_text(json.dumps({"models": models, "cases": full}, ensure_ascii=False, indent=1), encoding="utf-8")
    (folder / "state_sha256.txt").write_text("\n".join(hashes) + "\n")


def read_cases(folder: Path) -> dict:
    return json.loads((folder / "cases.json").read_text(encoding="utf-8"))


class Speaker:
    """koe's side of the cases: one engine per model folder, voices built from the case's clip and
    transcript (before the seed, as a prepared voice is), then `fragments` after `set_seed`."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.spec = folder, read_cases(folder)
        self.engines: dict = {}
        self.voices: dict = {}
        self.spoken: dict[str, list[np.ndarray]] = {}

    def engine(self, model: str):
        from koe.engines.gpt_sovits.engine import GPTSoVITSEngine

        if model not in self.engines:
            self.engines[model] = GPTSoVITSEngine.load(self.folder / "models" / model)
        return self.engines[model]

    def voice(self, case: dict):
        from koe.engines.base import VoiceReference

        engine = self.engine(case["model"])
        key = (case["model"], case["prompt_text"], case["prompt_lang"], bool(case.get("aux")))
        if key not in self.voices:
            v = engine.build_voice(VoiceReference(str(self.folder / "ref.wav"), case["prompt_text"] or None), prompt_lang=case["prompt_lang"])
            self.voices[key] = engine.add_references(v, [str(self.folder / "aux.wav")]) if case.get("aux") else v
        return self.voices[key]

    def speak(self, name: str) -> list[np.ndarray]:
        """The case's chunks, spoken once per module (a second test of the same case reads them)."""
        if name not in self.spoken:
            self.spoken[name] = self._speak(name)
        return self.spoken[name]

    def _speak(self, name: str) -> list[np.ndarray]:
        from dataclasses import fields

        from koe.engines.gpt_sovits.synthesis import RunSettings, fragments, set_seed

        case = self.spec["cases"][name]
        settings = RunSettings(**{f.name: case[f.name] for f in fields(RunSettings) if f.name in case})
        voice = self.voice(case)
        set_seed(case["seed"])
        engine = self.engine(case["model"])
        return list(fragments(engine.models, voice, case["text"], case["text_lang"], settings, streamed=bool(case.get("return_fragment"))))


def check_case(golden, name: str, chunks: list[np.ndarray], sample_rate: int) -> None:
    """koe's chunks are upstream's: its float samples before the int16 step, then the int16 ones."""
    from golden_files import array_sha256

    from koe.engines.gpt_sovits.synthesis import to_int16

    assert int(golden[f"{name}.sr"]) == sample_rate
    assert len(chunks) == int(golden[f"{name}.count"])
    for k, audio in enumerate(chunks):
        assert len(audio) == int(golden[f"{name}.{k}.length"]), k
        assert array_sha256(audio.astype(np.float32)) == str(golden[f"{name}.{k}.float"]), k
        pcm = to_int16(audio)
        np.testing.assert_array_equal(pcm[:32], golden[f"{name}.{k}.head"])
        assert array_sha256(pcm) == str(golden[f"{name}.{k}.int16"]), k


def check_through_synthesize(golden, name: str, speaker: Speaker, options: dict) -> None:
    """The case spoken through the engine's `synthesize` (the pipeline, `options` under koe's names)
    on a voice from `prepare_voice`: upstream's float samples."""
    from golden_files import array_sha256

    from koe.engines.base import SynthesisRequest, VoiceReference

    case = speaker.spec["cases"][name]
    engine = speaker.engine(case["model"])
    voice = engine.prepare_voice(VoiceReference(str(speaker.folder / "ref.wav"), case["prompt_text"]), prompt_lang=case["prompt_lang"])
    request = SynthesisRequest(case["text"], voice=voice, language=case["text_lang"], seed=case["seed"], options=options)
    audio = np.concatenate([c.samples for c in engine.synthesize(request)])
    assert array_sha256(audio.astype(np.float32)) == str(golden[f"{name}.0.float"])
