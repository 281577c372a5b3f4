"""koe's opt-in bf16 mode equals upstream's own bf16 CPU path (qwen-tts loaded with dtype=bfloat16):
same codes and the same waveform bits, sampled and greedy, on a tiny model with one thread."""

from __future__ import annotations

import json
import os
import subprocess
import warnings

import torch
from fixtures_models import model_folder
from oracle_harness import ORACLE_DIR, oracle_python

UPSTREAM = r"""
import json, sys
import numpy as np, torch
torch.set_num_threads(1)
from qwen_tts import Qwen3TTSModel
tts = Qwen3TTSModel.from_pretrained(sys.argv[1], device_map="cpu", dtype=torch.bfloat16)
captured = []
original = tts.model.generate
def spy(*args, **kwargs):
    out = original(*args, **kwargs)
    captured.append(out[0])
    return out
tts.model.generate = spy
result = {}
for seed, extra in CALLS:
    captured.clear()
    torch.manual_seed(seed)
    wavs, _ = tts.generate_custom_voice(text=TEXT, speaker="ryan", language="english", max_new_tokens=14, **extra)
    result[str(seed)] = {"codes": captured[0][0].tolist(), "wav": np.asarray(wavs[0], dtype=np.float32).tolist()}
print("@@" + json.dumps(result))
"""
TEXT = "Hello world, this is koe speaking."
CALLS = [(0, {}), (1, {"do_sample": False, "subtalker_dosample": False})]


def test_bf16_equals_upstream_bf16(session_tmp) -> None:
    from koe.engines.qwen3_tts.engine import Qwen3TTSEngine
    from koe.engines.qwen3_tts.native import Qwen3TTS

    folder = model_folder(session_tmp, "custom_voice")
    script = session_tmp / "upstream_bf16.py"
    script.write_text(f"TEXT = {TEXT!r}\nCALLS = {CALLS!r}\n" + UPSTREAM)
    env = dict(os.environ, PYTHONPATH=str(ORACLE_DIR / "stubs"), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run([oracle_python(), str(script), str(folder)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    upstream = json.loads(next(line[2:] for line in proc.stdout.splitlines() if line.startswith("@@")))
    engine = Qwen3TTSEngine.load(folder, device="cpu", precision="bf16")
    assert engine.precision == "bfloat16"
    for seed, extra in CALLS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = Qwen3TTS(engine).generate(TEXT, speaker="ryan", language="english", seed=seed, max_new_tokens=14, **extra)
        assert result.metadata["precision"] == "bfloat16"
        assert torch.equal(result.codes, torch.tensor(upstream[str(seed)]["codes"]))
        assert torch.equal(torch.from_numpy(result.audio), torch.tensor(upstream[str(seed)]["wav"], dtype=torch.float32))


def test_int8_mode_is_named_and_runs(session_tmp) -> None:
    from koe.engines.qwen3_tts.engine import Qwen3TTSEngine
    from koe.engines.qwen3_tts.native import Qwen3TTS
    from koe.runtime.quant import Int8Linear

    engine = Qwen3TTSEngine.load(model_folder(session_tmp, "custom_voice"), device="cpu", precision="int8")
    assert engine.precision == "int8"
    assert isinstance(engine.network.talker.model.layers[0].mlp.down_proj, Int8Linear)
    assert isinstance(engine.network.talker.code_predictor.lm_head[0], Int8Linear)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = Qwen3TTS(engine).generate(TEXT, speaker="ryan", language="english", seed=0, max_new_tokens=6)
    assert result.metadata["precision"] == "int8" and result.codes.shape[1] == 16
