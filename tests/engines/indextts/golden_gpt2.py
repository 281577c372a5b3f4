"""Golden topic `gpt2`: release 2's speech LM (upstream's `indextts.gpt.model_v2.UnifiedVoice`) on a
tiny random LM: the speaker and emotion conditioning from w2v-BERT-like features (random, 1024
wide), `merge_emovec` with an emotion weight, an emotion-vector mix, the code search (upstream
runs it with a KV cache, temperature 0.8) and the latent pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from koe_indextts.conditioning import ConditioningConfig, SpeechConditioning
from koe_indextts.fixtures import CODE_TOKENS, STOP_BIAS, TINY_CONFORMER, random_state, state_sha256
from koe_indextts.voice_lm import EmotionSpeechLM, GPTConfig

CONFORMER = TINY_CONFORMER
# the gpt golden's tiny LM (its DIMS), with a conditioning pair of each kind
DIMS = {"model_dim": 64, "layers": 2, "heads": 4, "max_text_tokens": 40, "max_mel_tokens": 70, "number_text_tokens": 100}
GPT_SECTION = {
    **DIMS,
    "max_conditioning_inputs": 1,
    "mel_length_compression": 1024,
    **CODE_TOKENS,
    "condition_num_latent": 32,
    "condition_type": "conformer_perceiver",
    "condition_module": CONFORMER,
    "emo_condition_module": CONFORMER,
}
FRAMES = {"speaker": 75, "emotion": 52}  # w2v-BERT frames (50 a second)
DEFAULTS = {"do_sample": True, "top_p": 0.8, "top_k": 30, "temperature": 0.8, "length_penalty": 0.0, "num_beams": 3, "repetition_penalty": 10.0}
# (seed, text, emotion source, alpha, emotion-vector weights or None, generation settings)
CASES = [
    (0, "a", "speaker", 1.0, None, {"max_mel_tokens": 40}),
    (1, "b", "emotion", 0.6, None, {"max_mel_tokens": 60}),
    (2, "a", "emotion", 1.0, [0.3, 0.0, 0.0, 0.2, 0.0, 0.0, 0.0, 0.1], {"max_mel_tokens": 60, "num_beams": 1}),
    (3, "b", "speaker", 1.0, None, {"max_mel_tokens": 8, "temperature": 1.2, "top_k": 10}),
]
EMOTIONS = 8


def parts(seed: int = 0):
    """(lm, speaker conditioning, emotion conditioning, gpt.pth's state)."""
    cfg = GPTConfig.from_dict(GPT_SECTION)
    lm = EmotionSpeechLM(cfg)
    speaker = SpeechConditioning(ConditioningConfig.speaker(GPT_SECTION, input_size=1024))
    emotion = SpeechConditioning(ConditioningConfig.emotion(GPT_SECTION))
    state = {}
    for prefix, module, offset in (("", speaker, 0), ("emo_", emotion, 1)):
        for key, value in random_state(module, seed + offset, keep=("pos_enc.pe",)).items():
            state[prefix + key] = value
    for key, value in random_state(lm, seed + 2).items():
        state[key] = value
    state["mel_head.bias"][GPT_SECTION["stop_mel_token"]] += STOP_BIAS
    speaker_keys = ("conditioning_encoder.", "perceiver_encoder.")
    emotion_keys = tuple("emo_" + k for k in speaker_keys)
    lm.load_state_dict({k: v for k, v in state.items() if not k.startswith(speaker_keys + emotion_keys)})
    speaker.load_state_dict({k: v for k, v in state.items() if k.startswith(speaker_keys)})
    emotion.load_state_dict({k[4:]: v for k, v in state.items() if k.startswith(emotion_keys)})
    return lm.eval(), speaker.eval(), emotion.eval(), state


def features() -> dict[str, np.ndarray]:
    g = torch.Generator().manual_seed(13)
    return {name: torch.randn(1, n, 1024, generator=g).numpy() for name, n in FRAMES.items()}


def emotion_matrix() -> np.ndarray:
    """(8, model_dim): what the release's emotion matrix gives for a voice (one row picked per emotion)."""
    return torch.randn(EMOTIONS, GPT_SECTION["model_dim"], generator=torch.Generator().manual_seed(17)).numpy() * 0.1


def texts() -> dict[str, list[int]]:
    g = torch.Generator().manual_seed(7)
    return {"a": torch.randint(2, 100, (6,), generator=g).tolist(), "b": torch.randint(2, 100, (11,), generator=g).tolist()}


def write_inputs(folder: Path) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    *_, state = parts()
    torch.save(state, folder / "gpt.pth")
    (folder / "state_sha256.txt").write_text(state_sha256(state))
    for name, value in features().items():
        np.save(folder / f"{name}.npy", value)
    np.save(folder / "emotion_matrix.npy", emotion_matrix())
    inputs = {"gpt": GPT_SECTION, "texts": texts(), "cases": CASES, "defaults": DEFAULTS}
    (folder / "inputs.json").write_text(json.dumps(inputs))
