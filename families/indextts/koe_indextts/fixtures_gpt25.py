"""A random-weight IndexTTS 2.5 GPT checkpoint (`gpt.pth`), written deterministically by koe: the keys
upstream's `UnifiedVoice(**cfg.gpt, spk_cond_mode="campplus")` holds, so it loads them with no
missing or unexpected keys: the emotion conformer and perceiver (`emo_conditioning_encoder.*`,
`emo_perceiver_encoder.*`), `spk_emb_proj`, `lang_embedding`, `emovec_layer`, `emo_layer` and the
GPT with its embeddings and heads; no speaker conformer, perceiver or speed embeddings.

Only a tiny size: no released 2.5 `config.yaml` was found, so the real `gpt:` section (its widths,
vocabulary and position counts) is not known here. Meant to be merged into the 2.5 release
folder's writer (`fixtures25.py`).
"""

from __future__ import annotations

from pathlib import Path

import torch

from koe_indextts.fixtures import CODE_TOKENS, STOP_BIAS, TINY_CONFORMER, random_state

# the `gpt:` section upstream's UnifiedVoice reads (campplus mode ignores condition_type/condition_module)
TINY_GPT25 = {
    "model_dim": 64,
    "layers": 2,
    "heads": 4,
    "max_text_tokens": 40,
    "max_mel_tokens": 70,
    "number_text_tokens": 100,
    "max_conditioning_inputs": 1,
    "mel_length_compression": 1024,
    "use_mel_codes_as_input": True,
    "train_solo_embeddings": False,
    **CODE_TOKENS,
    "condition_num_latent": 32,
    "emo_condition_module": TINY_CONFORMER,
}


def gpt_section(**overrides) -> dict:
    """The tiny 2.5 `gpt:` section, with `overrides` (a copy: the caller may change it)."""
    section = {**TINY_GPT25, "emo_condition_module": dict(TINY_GPT25["emo_condition_module"])}
    section.update(overrides)
    return section


def gpt_state(section: dict, seed: int = 0, stop_bias: float = STOP_BIAS) -> dict[str, torch.Tensor]:
    """2.5's `gpt.pth` state for `section`: the emotion pair drawn from `seed + 1` (its positional
    tables as the conformer computes them), the LM from `seed + 2`; the stop code's head bias raised
    by `stop_bias` so that a random GPT ends its searches."""
    from koe_indextts.conditioning import ConditioningConfig, SpeechConditioning
    from koe_indextts.voice_lm import CampPlusSpeechLM, GPTConfig

    emotion = SpeechConditioning(ConditioningConfig.emotion(section))
    state = {"emo_" + k: v for k, v in random_state(emotion, seed + 1, keep=("pos_enc.pe",)).items()}
    with torch.device("meta"):
        lm = CampPlusSpeechLM(GPTConfig.from_dict(section))
    state.update(random_state(lm, seed + 2))
    if stop_bias:
        state["mel_head.bias"][section["stop_mel_token"]] += stop_bias
    return state


def write_gpt25(folder: str | Path, seed: int = 0, section: dict | None = None) -> Path:
    """`folder/gpt.pth` for `section` (the tiny one by default); returns its path."""
    path = Path(folder) / "gpt.pth"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(gpt_state(gpt_section() if section is None else section, seed), path)
    return path
