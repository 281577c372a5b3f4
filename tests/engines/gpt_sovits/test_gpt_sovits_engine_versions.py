"""GPT-SoVITS v1, v2Pro and v2ProPlus end to end against upstream's `TTS.run`, bit for bit.

The goldens (goldens/infer_v1.npz, goldens/infer_pro.npz; tests/oracle_gpt_sovits/infer_run.py) are
upstream's `TTS(TTS_Config(...)).run(inputs)` on koe's tiny folders (golden_infer_v1.py,
golden_infer_pro.py; v2Pro/ProPlus with the full-size speaker-verification model): koe's engine,
its voice built from the same clips and transcript, gives the float samples upstream turns into
int16, and so its int16 samples. The engine's own edges for these versions are
test_gpt_sovits_engine.py's.
"""

from __future__ import annotations

import infer_goldens
import pytest
from sovits_goldens import fixtures, inputs

G1, GP = inputs("infer_v1"), inputs("infer_pro")
golden_v1, folder_v1 = fixtures("infer_v1")
golden_pro, folder_pro = fixtures("infer_pro")


@pytest.fixture(scope="module")
def speaker_v1(folder_v1):
    return infer_goldens.Speaker(folder_v1)


@pytest.fixture(scope="module")
def speaker_pro(folder_pro):
    return infer_goldens.Speaker(folder_pro)


@pytest.mark.parametrize("name", list(G1.CASES))
def test_v1_run_equals_upstream(name, golden_v1, speaker_v1):
    assert str(golden_v1["v1.version"]) == "v1" == speaker_v1.engine("v1").version
    infer_goldens.check_case(golden_v1, name, speaker_v1.speak(name), speaker_v1.engine("v1").sample_rate)


@pytest.mark.parametrize("name", list(GP.CASES))
def test_pro_run_equals_upstream(name, golden_pro, speaker_pro):
    model = GP.CASES[name]["model"]
    engine = speaker_pro.engine(model)
    assert str(golden_pro[f"{model}.version"]) == GP.VARIANTS[model] == engine.version
    infer_goldens.check_case(golden_pro, name, speaker_pro.speak(name), engine.sample_rate)
