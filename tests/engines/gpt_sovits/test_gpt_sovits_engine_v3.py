"""GPT-SoVITS v3 end to end against upstream's `TTS.run`, bit for bit, at the released DiT size.

The golden (goldens/infer_v3.npz; tests/oracle_gpt_sovits/infer_run.py) is upstream's
`TTS(TTS_Config(...)).run(inputs)` on koe's random v3 folder (golden_infer_v3.py: a v3 model and a
small BigVGAN), with 1-3 `sample_steps`, speed, serial and batched (`parallel_infer`: one CFM call
for every chunk, SOLA joins) vocoder synthesis and several fragments. Marked slow: the folder holds
a full-size DiT (~330 M numbers, about 30 s to write) and every CFM step runs at that size.
"""

from __future__ import annotations

import dit_goldens
import infer_goldens
import pytest
from sovits_goldens import fixtures_with, inputs

pytestmark = pytest.mark.slow

G = inputs("infer_v3")
golden, folder, speaker = fixtures_with("infer_v3", infer_goldens.Speaker)


@pytest.mark.parametrize("name", list(G.CASES))
def test_v3_run_equals_upstream(name, golden, speaker):
    dit_goldens.check_run(golden, name, speaker, "v3", 24000)


def test_v3_needs_a_transcript_and_one_clip(speaker, folder):
    dit_goldens.check_voice_rules(speaker, folder, "v3")


def test_a_v3_voice_keeps_its_mel_when_saved(speaker, tmp_path):
    dit_goldens.check_voice_saved(speaker, "v3", tmp_path)


def test_the_engine_contract_gives_upstreams_samples(golden, speaker):
    """Through `synthesize`, `sample_steps` and `parallel_infer` as koe's options: upstream's samples."""
    infer_goldens.check_through_synthesize(golden, "serial", speaker, {"sample_steps": 2, "parallel_infer": False})


def test_the_stream_is_upstreams_return_fragment(golden, speaker):
    """koe's stream (`fragments(streamed=True)`) is `return_fragment`: one chunk per batch of 4."""
    assert int(golden["fragments.count"]) == len(speaker.speak("fragments")) > 1
