"""GPT-SoVITS v3 end to end against upstream's `TTS.run`, bit for bit, at the released DiT size.

The golden (goldens/infer_v3.npz; tests/oracle_gpt_sovits/infer_run.py) is upstream's
`TTS(TTS_Config(...)).run(inputs)` on koe's random v3 folder (golden_infer_v3.py: a v3 model and a
small BigVGAN), with 1-3 `sample_steps`, speed, serial and batched (`parallel_infer`: one CFM call
for every chunk, SOLA joins) vocoder synthesis and several fragments. Marked slow: the folder holds
a full-size DiT (~330 M numbers, about 30 s to write) and every CFM step runs at that size.
"""

from __future__ import annotations

import infer_goldens
import numpy as np
import pytest
import torch
from sovits_goldens import fixtures, inputs

from koe.engines.base import UnsupportedVoice, VoiceReference

pytestmark = pytest.mark.slow

G = inputs("infer_v3")
golden, folder = fixtures("infer_v3")
VOICE = G.CASES["batched"] | {"prompt_text": infer_goldens.PROMPT_EN, "prompt_lang": "en"}


@pytest.fixture(scope="module")
def speaker(folder):
    return infer_goldens.Speaker(folder)


@pytest.mark.parametrize("name", list(G.CASES))
def test_v3_run_equals_upstream(name, golden, speaker):
    engine = speaker.engine("v3")
    assert str(golden["v3.version"]) == "v3" == engine.version and engine.sample_rate == 24000
    infer_goldens.check_case(golden, name, speaker.speak(name), engine.sample_rate)


def test_v3_needs_a_transcript_and_one_clip(speaker, folder):
    """As upstream: no reference-free mode for v3/v4 (its NO_PROMPT_ERROR); auxiliary clips, which
    upstream's v3/v4 path never reads for the timbre, are refused; so is a clip outside 3-10 s."""
    engine = speaker.engine("v3")
    with pytest.raises(UnsupportedVoice, match="transcript"):
        engine.build_voice(VoiceReference(str(folder / "ref.wav")))
    with pytest.raises(UnsupportedVoice, match="one clip"):
        engine.add_references(speaker.voice(VOICE), [str(folder / "aux.wav")])
    short = (np.zeros(int(2.5 * 16000), np.float32) + 0.1, 16000)
    with pytest.raises(UnsupportedVoice, match="3 to 10 seconds"):
        engine.build_voice(VoiceReference(short, "A clip."), prompt_lang="en")


def test_a_v3_voice_keeps_its_mel_when_saved(speaker, tmp_path):
    engine, voice = speaker.engine("v3"), speaker.voice(VOICE)
    voice.save(tmp_path / "v")
    again = engine.load_voice(tmp_path / "v")
    assert torch.equal(again.mel, voice.mel) and again.sv is None and again.phones == voice.phones


def test_the_engine_contract_gives_upstreams_samples(golden, speaker):
    """Through `synthesize`, `sample_steps` and `parallel_infer` as koe's options: upstream's samples."""
    infer_goldens.check_through_synthesize(golden, "serial", speaker, {"sample_steps": 2, "parallel_infer": False})


def test_the_stream_is_upstreams_return_fragment(golden, speaker):
    """koe's stream (`fragments(streamed=True)`) is `return_fragment`: one chunk per batch of 4."""
    assert int(golden["fragments.count"]) == len(speaker.speak("fragments")) > 1
