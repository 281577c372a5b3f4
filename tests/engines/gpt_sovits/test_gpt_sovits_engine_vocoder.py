"""GPT-SoVITS v3 and v4 end to end against upstream's `TTS.run`, bit for bit, at the released DiT
size.

The goldens (goldens/infer_v3.npz, goldens/infer_v4.npz; tests/oracle_gpt_sovits/infer_run.py) are
upstream's `TTS(TTS_Config(...)).run(inputs)` on koe's random folders (golden_infer_v3.py: a v3
model and a small BigVGAN; golden_infer_v4.py: a LoRA over a random pretrained v4 model, merged by
peft upstream, and the full-size v4 vocoder), with a few `sample_steps`, speed, serial and batched
(`parallel_infer`) vocoder synthesis and several fragments. Marked slow: each folder holds a
full-size DiT (~330 M numbers: about 30 s to write, a minute for v4's base and LoRA) and every
CFM step runs at that size.
"""

from __future__ import annotations

import infer_goldens
import numpy as np
import pytest
from sovits_goldens import fixtures, inputs

from koe.engines.base import UnsupportedVoice, VoiceReference

pytestmark = pytest.mark.slow

G3, G4 = inputs("infer_v3"), inputs("infer_v4")
golden_v3, folder_v3 = fixtures("infer_v3")
golden_v4, folder_v4 = fixtures("infer_v4")


@pytest.fixture(scope="module")
def speaker_v3(folder_v3):
    return infer_goldens.Speaker(folder_v3)


@pytest.fixture(scope="module")
def speaker_v4(folder_v4):
    return infer_goldens.Speaker(folder_v4)


@pytest.mark.parametrize("name", list(G3.CASES))
def test_v3_run_equals_upstream(name, golden_v3, speaker_v3):
    engine = speaker_v3.engine("v3")
    assert str(golden_v3["v3.version"]) == "v3" == engine.version and engine.sample_rate == 24000
    infer_goldens.check_case(golden_v3, name, speaker_v3.speak(name), engine.sample_rate)


@pytest.mark.parametrize("name", list(G4.CASES))
def test_v4_run_equals_upstream(name, golden_v4, speaker_v4):
    engine = speaker_v4.engine("v4")
    assert str(golden_v4["v4.version"]) == "v4" == engine.version and engine.sample_rate == 48000
    infer_goldens.check_case(golden_v4, name, speaker_v4.speak(name), engine.sample_rate)


def test_v3_needs_a_transcript_and_one_clip(speaker_v3, folder_v3):
    """As upstream: no reference-free mode for v3/v4 (its NO_PROMPT_ERROR); auxiliary clips, which
    upstream's v3/v4 path never reads for the timbre, are refused; so is a clip outside 3-10 s."""
    engine = speaker_v3.engine("v3")
    with pytest.raises(UnsupportedVoice, match="transcript"):
        engine.build_voice(VoiceReference(str(folder_v3 / "ref.wav")))
    voice = speaker_v3.voice(G3.CASES["batched"] | {"prompt_text": infer_goldens.PROMPT_EN, "prompt_lang": "en"})
    with pytest.raises(UnsupportedVoice, match="one clip"):
        engine.add_references(voice, [str(folder_v3 / "aux.wav")])
    short = (np.zeros(int(2.5 * 16000), np.float32) + 0.1, 16000)
    with pytest.raises(UnsupportedVoice, match="3 to 10 seconds"):
        engine.build_voice(VoiceReference(short, "A clip."), prompt_lang="en")


def test_v3_voice_is_saved_and_loaded(speaker_v3, tmp_path):
    import torch

    engine = speaker_v3.engine("v3")
    voice = speaker_v3.voice(G3.CASES["batched"] | {"prompt_text": infer_goldens.PROMPT_EN, "prompt_lang": "en"})
    voice.save(tmp_path / "v")
    again = engine.load_voice(tmp_path / "v")
    assert torch.equal(again.mel, voice.mel) and again.sv is None and again.phones == voice.phones
