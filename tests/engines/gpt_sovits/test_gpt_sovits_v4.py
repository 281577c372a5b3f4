"""GPT-SoVITS v4 end to end against upstream's `TTS.run`, bit for bit, at the released DiT size.

The golden (goldens/infer_v4.npz; tests/oracle_gpt_sovits/infer_run.py) is upstream's
`TTS(TTS_Config(...)).run(inputs)` on koe's random v4 folder (golden_infer_v4.py: a LoRA over a
random pretrained v4 model, merged by peft upstream, and the full-size v4 vocoder), with 1-3
`sample_steps`, speed, serial and batched (`parallel_infer`: one CFM call for every chunk, SOLA
joins) vocoder synthesis and several fragments. Marked slow: the folder holds a full-size DiT
(~330 M numbers, about 80 s to write with the LoRA) and every CFM step runs at that size.

Through `koe.compat.gpt_sovits` (upstream's `TTS(TTS_Config(...)).run(inputs)`, compat_goldens.py) on
the same folder: the drop-in runs the same synthesis as koe's engine after reading upstream's inputs,
whose reading is proven on every case of v1, v2 and v2Pro (test_gpt_sovits_compat*.py), so each case
at this size runs once: `dit_goldens.DROP_IN_CASES` (speed, serial synthesis, several steps) through
the drop-in (upstream's int16 samples, and its floats before that step), every other case through
koe's engine.
"""

from __future__ import annotations

import dit_goldens
import infer_goldens
import pytest
from compat_goldens import DropIn
from sovits_goldens import fixtures_with, inputs

pytestmark = pytest.mark.slow

G = inputs("infer_v4")
golden, folder, speaker = fixtures_with("infer_v4", infer_goldens.Speaker)


@pytest.fixture(scope="module")
def drop_in(folder):
    return DropIn(folder)


@pytest.mark.parametrize("name", dit_goldens.engine_cases(G.CASES))
def test_v4_run_equals_upstream(name, golden, speaker):
    dit_goldens.check_run(golden, name, speaker, "v4", 48000)


def test_v4_needs_a_transcript_and_one_clip(speaker, folder):
    dit_goldens.check_voice_rules(speaker, folder, "v4")


def test_a_v4_voice_keeps_its_mel_when_saved(speaker, tmp_path):
    dit_goldens.check_voice_saved(speaker, "v4", tmp_path)


# -- the drop-in -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", dit_goldens.DROP_IN_CASES)
def test_the_drop_in_equals_upstream(name, golden, drop_in, monkeypatch):
    dit_goldens.check_drop_in_case(drop_in, golden, name, 48000, monkeypatch)
