"""Golden topic `gpt25`: release 2.5's speech LM (upstream's `indextts.gpt.model_v2.UnifiedVoice` with
`spk_cond_mode="campplus"`, as `infer_v2_5.IndexTTS2` builds it) on a tiny random LM
(`fixtures25`): the speaker's conditioning row from a CAM++ embedding, the emotion vector from
w2v-BERT-like features (random, 1024 wide: `merge_emovec` with a weight, an emotion-vector mix), and
the code search (KV cache, temperature 0.8) with the language embedding, in four languages; the text
ends with the stop text id as 2.5's `infer` appends it (one case holds a start id inside too, one no
stop id), so upstream pads and masks its prompt. 2.5 hands the codes, not a GPT latent, to s2mel
(its codec decodes them), so there is no latent pass here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from koe_indextts.conditioning import ConditioningConfig, load_conditioning
from koe_indextts.fixtures import state_sha256
from koe_indextts.fixtures25 import gpt_section, gpt_state
from koe_indextts.voice_lm import GPTConfig, load_campplus_lm

GPT_SECTION = gpt_section()
FRAMES = {"speaker": 75, "emotion": 52}  # w2v-BERT frames (50 a second)
DEFAULTS = {"do_sample": True, "top_p": 0.8, "top_k": 30, "temperature": 0.8, "length_penalty": 0.0, "num_beams": 3, "repetition_penalty": 10.0}
# (seed, text, language, emotion source, alpha, emotion-vector weights or None, generation settings)
CASES = [
    (0, "a", "en", "speaker", 1.0, None, {"max_mel_tokens": 40}),
    (1, "b", "zh", "emotion", 0.6, None, {"max_mel_tokens": 60}),
    (2, "a", "zhen", "emotion", 1.0, [0.3, 0.0, 0.0, 0.2, 0.0, 0.0, 0.0, 0.1], {"max_mel_tokens": 60, "num_beams": 1}),
    (3, "c", "JA", "speaker", 1.0, None, {"max_mel_tokens": 8, "temperature": 1.2, "top_k": 10}),
]
EMOTIONS = 8


def parts(seed: int = 0):
    """(lm, emotion conditioning, gpt.pth's state), loaded strictly as a 2.5 folder's would be."""
    state = gpt_state(GPT_SECTION, seed)
    lm = load_campplus_lm(state, GPTConfig.from_dict(GPT_SECTION))
    emotion = load_conditioning(state, ConditioningConfig.emotion(GPT_SECTION), encoder="emo_conditioning_encoder", perceiver="emo_perceiver_encoder")
    return lm, emotion, state


def features() -> dict[str, np.ndarray]:
    g = torch.Generator().manual_seed(13)
    return {name: torch.randn(1, n, 1024, generator=g).numpy() for name, n in FRAMES.items()}


def style() -> np.ndarray:
    """(1, 192): a CAM++ embedding of the speaker clip (2.5's `style`)."""
    return (torch.randn(1, 192, generator=torch.Generator().manual_seed(19)) * 3).numpy()


def emotion_matrix() -> np.ndarray:
    """(8, model_dim): what the release's emotion matrix gives for a voice (one row picked per emotion)."""
    return torch.randn(EMOTIONS, GPT_SECTION["model_dim"], generator=torch.Generator().manual_seed(17)).numpy() * 0.1


def texts() -> dict[str, list[int]]:
    """Text ids as 2.5's `infer` hands them over: the tokens, then the stop text id (1); "b" holds a
    start text id (0) inside, "c" no stop id."""
    g = torch.Generator().manual_seed(7)
    a, b, c = (torch.randint(2, 100, (n,), generator=g).tolist() for n in (6, 11, 5))
    return {"a": a + [1], "b": b[:4] + [0] + b[4:] + [1], "c": c}


def write_inputs(folder: Path) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    *_, state = parts()
    torch.save(state, folder / "gpt.pth")
    (folder / "state_sha256.txt").write_text(state_sha256(state))
    for name, value in features().items():
        np.save(folder / f"{name}.npy", value)
    np.save(folder / "style.npy", style())
    np.save(folder / "emotion_matrix.npy", emotion_matrix())
    inputs = {"gpt": GPT_SECTION, "texts": texts(), "cases": CASES, "defaults": DEFAULTS}
    (folder / "inputs.json").write_text(json.dumps(inputs))
