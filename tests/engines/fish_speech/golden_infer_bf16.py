"""Inputs of the `infer_bf16` golden (koe's side): the `infer` golden's folder (the tiny S2 release,
its clips and transcripts: `golden_infer.write_inputs`) with jobs of its own, run by upstream's
server engine in bfloat16 (`ModelManager(half=False)`: the transformer in bfloat16, the codec as
its checkpoint holds it, float32 here, decoding under CPU bfloat16 autocast) and by koe loaded with
`precision="bf16"`.

Jobs: a clone from the 44.1 kHz clip, the model's own voice, a dialogue of two speakers in two
batches (the first batch's codes fed back into the second prompt).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path


def _infer_inputs():
    """golden_infer.py beside this file, by its path (pytest and scripts/goldens.py both load this one so)."""
    spec = importlib.util.spec_from_file_location("fish_speech_golden_infer", Path(__file__).with_name("golden_infer.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


infer = _infer_inputs()
SEED, CLIPS, TRANSCRIPTS = infer.SEED, infer.CLIPS, infer.TRANSCRIPTS
BY_CPU_KIND = True  # bfloat16 end to end: oneDNN's bf16 kernels differ between kinds of AVX-512 CPU (cpu_kind.py)
TWO_BATCHES = "<|speaker:0|>Good morning, did you sleep well? <|speaker:1|>Not really, the neighbours were loud again."
JOBS = [
    {"name": "clone44k", "text": "Hello there, how are you today?", "references": ["ref44k"], "seed": 21, "options": {"max_new_tokens": 48}},
    {"name": "own_voice", "text": "我们今天去公园散步吧。", "references": [], "seed": 22, "options": {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 40}},
    {
        "name": "dialogue",
        "text": TWO_BATCHES,
        "references": ["ref24k_stereo", "ref44k"],
        "seed": 23,
        "options": {"chunk_length": 100, "max_new_tokens": 32},
    },
]


def write_inputs(folder: Path) -> None:
    infer.write_inputs(folder)
    (folder / "jobs.json").write_text(json.dumps(JOBS, ensure_ascii=False, indent=1), encoding="utf-8")
