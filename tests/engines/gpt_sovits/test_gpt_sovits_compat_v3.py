"""`koe.compat.gpt_sovits` on GPT-SoVITS v3 (the CFM DiT at the released size, a small BigVGAN; marked slow as the engine's v3 test) against upstream's
`TTS(TTS_Config(...)).run(inputs)`, bit for bit, on the infer_v3 golden (compat_goldens.py; which cases: DROP_IN_CASES)."""

from __future__ import annotations

import numpy as np
import pytest
from compat_goldens import DropIn, check_case
from sovits_goldens import fixtures_with, inputs

from koe.engines.base import UnsupportedVoice

pytestmark = pytest.mark.slow

G = inputs("infer_v3")
# Every case of the golden runs through koe's engine in test_gpt_sovits_engine_v3.py, and the drop-in's
# reading of every input through every case of v1, v2 and v2Pro (test_gpt_sovits_compat*.py); the
# drop-in runs the same synthesis, so here one case (speed, serial synthesis, several steps) checks its
# v3 path, not each case's DiT steps again.
DROP_IN_CASES = ("speed",)
golden, folder, drop_in = fixtures_with("infer_v3", DropIn)


@pytest.mark.parametrize("name", DROP_IN_CASES)
def test_run_equals_upstream(name, golden, drop_in):
    check_case(drop_in, golden, name)


def test_set_ref_audio_reads_the_clip_alone_and_run_adds_the_transcript(drop_in, folder):
    """api_v2's /set_refer_audio on v3: the clip is read without its transcript (its semantic tokens,
    spectrogram and mel), the run that brings `prompt_text` finishes the voice: the samples of a run
    on the same reference read before (neither makes HuBERT's layer-drop draws)."""
    name = next(iter(G.CASES))
    tts = drop_in.model(G.CASES[name]["model"])
    tts.set_ref_audio(str(folder / "ref.wav"))
    case = {k: v for k, v in drop_in.spec["cases"][name].items() if k not in ("aux", "model")}
    preset = list(tts.run({**case, "ref_audio_path": None}))
    again = list(tts.run({**case, "ref_audio_path": str(folder / "ref.wav")}))
    assert len(preset) == len(again) and all(np.array_equal(a[1], b[1]) for a, b in zip(preset, again, strict=True))


def test_v3_needs_a_transcript_and_has_no_super_sampling_yet(drop_in, folder):
    name = next(iter(G.CASES))
    tts = drop_in.model(G.CASES[name]["model"])
    case = {k: v for k, v in drop_in.spec["cases"][name].items() if k not in ("aux", "model")} | {"ref_audio_path": str(folder / "ref.wav")}
    with pytest.raises(UnsupportedVoice, match="prompt_text cannot be empty"):
        tts.run({**case, "prompt_text": ""})
    with pytest.raises(NotImplementedError, match="super_sampling"):
        tts.run({**case, "super_sampling": True})
