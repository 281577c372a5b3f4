"""Inputs of the `lm` golden (koe's side): the tiny random LM (fixtures_lm, float32, its config.json
and model.safetensors), the released tokenizer files (upstream's loader reads the semantic ids and
<|im_end|> from them), two hand-built prompts (`prompt_<name>.npy`, (11, T) int64: text ids in row
0 and zeros below, some semantic positions with their codes) and the generation cases
(`cases.json`: prompt, seed, sampling settings, max_new_tokens), each run in float32 and bfloat16.
The weights' hash goes to `state_sha256.txt`.

The long prompt (700 positions) reads past one 512-key block of the prefill's attention and its
decode steps past several 64-key blocks, where koe reads less of the cache than upstream.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from koe_fish_speech.fixtures_lm import write_lm
from koe_fish_speech.fixtures_tokenizer import SEMANTIC_BEGIN_ID, SEMANTIC_END_ID, write_tokenizer

from koe.runtime.weights import state_sha256

NUM_CODEBOOKS = 10
DTYPES = ("float32", "bfloat16")
BY_CPU_KIND = True  # the bfloat16 LM takes oneDNN's bf16 kernels, which differ between kinds of AVX-512 CPU (cpu_kind.py)
PROMPTS = {"short": (40, 1, (20, 30)), "long": (700, 2, (100, 420))}  # name -> (positions, seed, semantic span)
CASES = [
    {"prompt": "short", "seed": 0, "temperature": 0.8, "top_p": 0.8, "top_k": 30, "max_new_tokens": 30},
    {"prompt": "short", "seed": 1, "temperature": 0.5, "top_p": 0.5, "top_k": 5, "max_new_tokens": 30},
    {"prompt": "short", "seed": 2, "temperature": 1.0, "top_p": 1.0, "top_k": 100, "max_new_tokens": 30},
    {"prompt": "short", "seed": 3, "temperature": 0.8, "top_p": 0.8, "top_k": 30, "max_new_tokens": 90},
    {"prompt": "long", "seed": 4, "temperature": 0.8, "top_p": 0.8, "top_k": 30, "max_new_tokens": 30},
    {"prompt": "long", "seed": 5, "temperature": 1.0, "top_p": 0.5, "top_k": 100, "max_new_tokens": 30},
]


def prompt(name: str) -> np.ndarray:
    """(11, T) int64: random text ids, and a span of semantic tokens with their 10 codes."""
    length, seed, (a, b) = PROMPTS[name]
    g = torch.Generator().manual_seed(seed)
    p = torch.zeros(NUM_CODEBOOKS + 1, length, dtype=torch.long)
    p[0] = torch.randint(0, 151643, (length,), generator=g)
    p[0, a:b] = torch.randint(SEMANTIC_BEGIN_ID, SEMANTIC_END_ID + 1, (b - a,), generator=g)
    p[1, a:b] = p[0, a:b] - SEMANTIC_BEGIN_ID
    p[2:, a:b] = torch.randint(0, 1024, (NUM_CODEBOOKS - 1, b - a), generator=g)
    return p.numpy()


def write_inputs(folder: Path) -> None:
    folder = Path(folder)
    state = write_lm(folder, "tiny", seed=0)
    write_tokenizer(folder)
    for name in PROMPTS:
        np.save(folder / f"prompt_{name}.npy", prompt(name))
    (folder / "cases.json").write_text(json.dumps({"dtypes": DTYPES, "cases": CASES}, indent=1) + "\n")
    (folder / "state_sha256.txt").write_text(state_sha256(state) + "\n")
