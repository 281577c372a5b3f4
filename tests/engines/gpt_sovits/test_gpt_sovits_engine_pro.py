"""GPT-SoVITS v2Pro and v2ProPlus end to end against upstream's `TTS.run`, bit for bit.

The golden (goldens/infer_pro.npz; tests/oracle_gpt_sovits/infer_run.py) is upstream's
`TTS(TTS_Config(...)).run(inputs)` on koe's tiny v2Pro and v2ProPlus folders with the full-size
speaker-verification model (golden_infer_pro.py): koe's engine, its voice built from the same clips
and transcript (one ERes2NetV2 embedding per clip), gives the float samples upstream turns into
int16, and so its int16 samples.
"""

from __future__ import annotations

import infer_goldens
import pytest
from sovits_goldens import fixtures_with, inputs

G = inputs("infer_pro")
golden, folder, speaker = fixtures_with("infer_pro", infer_goldens.Speaker)


@pytest.mark.parametrize("name", list(G.CASES))
def test_pro_run_equals_upstream(name, golden, speaker):
    model = G.CASES[name]["model"]
    engine = speaker.engine(model)
    assert str(golden[f"{model}.version"]) == G.VARIANTS[model] == engine.version
    infer_goldens.check_case(golden, name, speaker.speak(name), engine.sample_rate)


def test_the_engine_contract_gives_upstreams_samples(golden, speaker):
    """Through `synthesize` (the pipeline, koe's option names) on a v2ProPlus voice: upstream's samples."""
    infer_goldens.check_through_synthesize(golden, "plus_batched", speaker, {"text_split_method": "cut5", "batch_fragments": 3})
