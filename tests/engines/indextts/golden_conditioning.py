"""Inputs of the `conditioning` golden (koe's side): tiny conditioning pairs with koe's seeded
weights, reference features of several lengths, and the hashes the oracle copies into the npz.

Two cases: `speaker` (1.5's speaker conditioning: 100 mel bins, a resampler wider than the
Conformer, 32 latents, stored under `conditioning_encoder.` / `perceiver_encoder.`) and `emotion`
(release 2's kind: another width, a resampler as wide as the Conformer so no context projection,
1 latent, stored under `emo_conditioning_encoder.` / `emo_perceiver_encoder.`). Each runs on one
batch of a few frames more than the 2x subsampling needs, one of about 3 s, and batches of two with
different lengths (padding masked). The positional table in the weights is the one koe builds
(upstream uses the loaded one; the oracle records the hash of the one it builds itself).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import torch
from koe_indextts.conditioning import ConditioningConfig, SpeechConditioning
from koe_indextts.fixtures import random_state, state_sha256

CASES = {
    "speaker": ConditioningConfig(
        input_size=100, output_size=64, linear_units=128, attention_heads=2, num_blocks=2, perceiver_mult=2, model_dim=96, num_latents=32
    ),
    "emotion": ConditioningConfig(
        input_size=48, output_size=64, linear_units=96, attention_heads=4, num_blocks=2, perceiver_mult=2, model_dim=64, num_latents=1
    ),
}
PREFIXES = {"speaker": ("conditioning_encoder", "perceiver_encoder"), "emotion": ("emo_conditioning_encoder", "emo_perceiver_encoder")}
# Lengths per batch, in input frames: 1.5's mel runs at 93.75 frames a second (3 s = 281), w2v-BERT at 50.
LENGTHS = {
    "speaker": {"short": [5], "long": [281], "pair": [281, 150], "pair_short": [9, 3]},
    "emotion": {"short": [6], "long": [150], "pair": [97, 150]},
}
SEEDS = {"speaker": 51, "emotion": 52}
PE = "conditioning_encoder.embed.pos_enc.pe"


def case_state(case: str) -> dict[str, torch.Tensor]:
    """The case's weights under koe's module names (koe's positional table in place of a random one)."""
    return random_state(SpeechConditioning(CASES[case]), SEEDS[case], keep=(PE,))


def checkpoint_state(case: str, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`state` under the names a gpt.pth holds the case's pair by."""
    encoder, perceiver = PREFIXES[case]
    out = {}
    for key, value in state.items():
        head, rest = key.split(".", 1)
        out[f"{encoder if head == 'conditioning_encoder' else perceiver}.{rest}"] = value
    return out


def case_inputs(case: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """name -> (features (b, C, T) float32, lengths (b,) int64); padding past a length is noise too."""
    g = torch.Generator().manual_seed(SEEDS[case] + 1000)
    width = CASES[case].input_size
    out = {}
    for name, lengths in LENGTHS[case].items():
        features = torch.randn(len(lengths), width, max(lengths), generator=g) * 2.0 - 4.0
        out[name] = (features.numpy(), np.asarray(lengths, dtype=np.int64))
    return out


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for case, config in CASES.items():
        state = case_state(case)
        torch.save(checkpoint_state(case, state), folder / f"{case}.pth")
        for name, (features, lengths) in case_inputs(case).items():
            np.save(folder / f"{case}.{name}.features.npy", features)
            np.save(folder / f"{case}.{name}.lengths.npy", lengths)
        manifest[case] = {
            "config": dataclasses.asdict(config),
            "prefixes": PREFIXES[case],
            "inputs": list(LENGTHS[case]),
            "state_sha256": state_sha256(state),
        }
    (folder / "cases.json").write_text(json.dumps(manifest, indent=1))
    (folder / "state_sha256.txt").write_text("".join(f"{case} {m['state_sha256']}\n" for case, m in manifest.items()))
