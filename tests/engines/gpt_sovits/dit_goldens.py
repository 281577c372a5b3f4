"""What the v3 and v4 `infer_*` goldens share (koe's side): both run the CFM DiT at the released size
(their tests are marked slow) on the same English cases, and both hold upstream's rules for a v3/v4
voice (a transcript, one clip of 3 to 10 s, the reference mel kept when saved). See infer_goldens.py."""

from __future__ import annotations

from pathlib import Path

import infer_goldens
import numpy as np
import pytest
import torch

from koe.engines.base import UnsupportedVoice, VoiceReference

__all__ = ["DROP_IN_CASES", "HELLO", "cases", "check_drop_in_case", "check_run", "check_voice_rules", "check_voice_saved", "engine_cases"]

HELLO = "Hello there. How are you today?"
# The cases spoken through the drop-in (speed, serial synthesis, several steps), which runs the same
# synthesis as the engine after reading upstream's inputs: each is proven there (its floats too)
# and not run again through the engine's speaker; every other case through the engine.
DROP_IN_CASES = ("speed",)


def cases(model: str) -> dict[str, dict]:
    """A few `sample_steps` (upstream's 32 would take minutes at this size), speed, the batched vocoder
    synthesis (`parallel_infer`: one CFM call for every chunk, SOLA joins) and the serial one, several chunks."""
    en = {"model": model, "text": HELLO, "text_lang": "en"}
    return {
        "batched": en | {"seed": 1, "sample_steps": 2},
        "serial": en | {"seed": 2, "sample_steps": 2, "parallel_infer": False},
        "speed": en | {"seed": 3, "sample_steps": 3, "speed_factor": 1.25, "parallel_infer": False},
        "long": en | {"text": infer_goldens.LONG, "seed": 4, "sample_steps": 1, "text_split_method": "cut5", "batch_size": 3},
    }


def engine_cases(cases: dict[str, dict]) -> list[str]:
    """The cases the engine's speaker runs: all but DROP_IN_CASES."""
    return [name for name in cases if name not in DROP_IN_CASES]


def check_drop_in_case(drop_in, golden, name: str, sample_rate: int, monkeypatch) -> None:
    """The case through the drop-in: upstream's int16 chunks, and upstream's floats before its int16
    step (the drop-in's `to_int16` spied on), on the version upstream made of the folder."""
    import compat_goldens

    import koe.compat.gpt_sovits as compat
    from koe.engines.gpt_sovits.synthesis import to_int16

    floats: list[np.ndarray] = []
    monkeypatch.setattr(compat, "to_int16", lambda audio: floats.append(np.array(audio, copy=True)) or to_int16(audio))
    compat_goldens.check_case(drop_in, golden, name)
    infer_goldens.check_case(golden, name, floats, sample_rate)


def check_run(golden, name: str, speaker: infer_goldens.Speaker, model: str, sample_rate: int) -> None:
    """The case through koe's engine: upstream's samples, on the version and sample rate upstream read."""
    engine = speaker.engine(model)
    assert str(golden[f"{model}.version"]) == model == engine.version and engine.sample_rate == sample_rate
    infer_goldens.check_case(golden, name, speaker.speak(name), engine.sample_rate)


def check_voice_rules(speaker: infer_goldens.Speaker, folder: Path, model: str) -> None:
    """As upstream: no reference-free mode for v3/v4 (its NO_PROMPT_ERROR); auxiliary clips, which
    upstream's v3/v4 path never reads for the timbre, are refused; so is a clip outside 3-10 s."""
    engine = speaker.engine(model)
    with pytest.raises(UnsupportedVoice, match="transcript"):
        engine.build_voice(VoiceReference(str(folder / "ref.wav")))
    with pytest.raises(UnsupportedVoice, match="one clip"):
        engine.add_references(speaker.voice(speaker.spec["cases"]["batched"]), [str(folder / "aux.wav")])
    short = (np.zeros(int(2.5 * 16000), np.float32) + 0.1, 16000)
    with pytest.raises(UnsupportedVoice, match="3 to 10 seconds"):
        engine.build_voice(VoiceReference(short, "A clip."), prompt_lang="en")


def check_voice_saved(speaker: infer_goldens.Speaker, model: str, tmp_path: Path) -> None:
    """A v3/v4 voice saved and loaded again keeps its reference mel (and has no SV embedding)."""
    engine, voice = speaker.engine(model), speaker.voice(speaker.spec["cases"]["batched"])
    voice.save(tmp_path / "v")
    again = engine.load_voice(tmp_path / "v")
    assert torch.equal(again.mel, voice.mel) and again.sv is None and again.phones == voice.phones
