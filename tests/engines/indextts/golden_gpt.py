"""Golden topic `gpt`: the speech LM's mel-code search and its latent pass, on a tiny random LM.

The conditioning latents come in as a tensor (the conditioning encoders have a topic of their own);
upstream's `get_conditioning` is replaced by one returning them. The stop code's head bias is raised
so that some searches close hypotheses before their length limit and some do not.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from koe_indextts.fixtures import CODE_TOKENS, STOP_BIAS, random_state, state_sha256
from koe_indextts.voice_lm import GPTConfig, SpeechLM

# the tiny LM (and the gpt2 golden's): the released codes and tokens, max_conditioning_inputs 1, 32 latents
DIMS = {"model_dim": 64, "layers": 2, "heads": 4, "max_text_tokens": 40, "max_mel_tokens": 70, "number_text_tokens": 100}
GPT_SECTION = {**DIMS, "max_conditioning_inputs": 1, "mel_length_compression": 1024, **CODE_TOKENS, "condition_num_latent": 32}

# (seed, text, settings): upstream's generation keyword arguments
CASES = [
    (0, "a", {"max_mel_tokens": 24}),
    (1, "b", {"max_mel_tokens": 60}),
    (2, "a", {"max_mel_tokens": 60, "temperature": 0.8, "top_k": 10, "top_p": 0.95, "num_beams": 2, "repetition_penalty": 1.5, "length_penalty": 1.0}),
    (3, "b", {"max_mel_tokens": 40, "do_sample": False}),
    (4, "a", {"max_mel_tokens": 50, "num_beams": 1}),
    (5, "b", {"max_mel_tokens": 50, "num_beams": 1, "top_k": 0, "top_p": 1.0, "repetition_penalty": 1.0}),
    (6, "b", {"max_mel_tokens": 60, "num_beams": 4, "top_p": 0.6}),
    (7, "a", {"max_mel_tokens": 6}),
]
# upstream's long-silence removal (code 52, more than 30 in a row shrunk to 10) on hand-made codes
SILENCES = [[5] * 3 + [52] * 35 + [7, 8193], [52] * 31 + [9] * 4 + [52] * 12, [1, 2, 3, 8193, 4], [52] * 20 + [6]]


def speech_lm(seed: int = 0) -> tuple[SpeechLM, dict[str, torch.Tensor]]:
    lm = SpeechLM(GPTConfig.from_dict(GPT_SECTION))
    state = random_state(lm, seed)
    state["mel_head.bias"][GPT_SECTION["stop_mel_token"]] += STOP_BIAS
    lm.load_state_dict(state)
    return lm.eval(), state


def texts() -> dict[str, list[int]]:
    g = torch.Generator().manual_seed(7)
    return {"a": torch.randint(2, 100, (5,), generator=g).tolist(), "b": torch.randint(2, 100, (12,), generator=g).tolist()}


def conds() -> np.ndarray:
    return torch.randn(1, 32, GPT_SECTION["model_dim"], generator=torch.Generator().manual_seed(11)).numpy()


def write_inputs(folder: Path) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _, state = speech_lm()
    torch.save(state, folder / "gpt.pth")
    (folder / "state_sha256.txt").write_text(state_sha256(state))
    np.save(folder / "conds.npy", conds())
    (folder / "inputs.json").write_text(json.dumps({"gpt": GPT_SECTION, "texts": texts(), "cases": CASES, "silences": SILENCES}))
