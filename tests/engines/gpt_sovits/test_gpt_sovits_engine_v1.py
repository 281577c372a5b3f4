"""GPT-SoVITS v1 end to end against upstream's `TTS.run`, bit for bit.

The golden (goldens/infer_v1.npz; tests/oracle_gpt_sovits/infer_run.py) is upstream's
`TTS(TTS_Config(...)).run(inputs)` on koe's tiny v1 folder (golden_infer_v1.py): koe's engine, its
voice built from the same clips and transcript, gives the float samples upstream turns into int16,
and so its int16 samples.
"""

from __future__ import annotations

import infer_goldens
import pytest
from sovits_goldens import fixtures_with, inputs

G = inputs("infer_v1")
golden, folder, speaker = fixtures_with("infer_v1", infer_goldens.Speaker)


@pytest.mark.parametrize("name", list(G.CASES))
def test_v1_run_equals_upstream(name, golden, speaker):
    engine = speaker.engine("v1")
    assert str(golden["v1.version"]) == "v1" == engine.version
    infer_goldens.check_case(golden, name, speaker.speak(name), engine.sample_rate)
