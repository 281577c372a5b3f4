"""Inputs of the `s2mel` golden (koe's side): tiny IndexTTS 2 s2mel stages with koe's seeded weights.

Two configs, each a `config.yaml` with an `s2mel:` section and an `s2mel.pth` (`{"net": {"cfm",
"length_regulator", "gpt_layer"}}`, the released layout):
- `release`: IndexTTS 2's structure (continuous length regulator with four conv/GroupNorm/Mish
  stages, DiT with U-ViT skips over 5 blocks, long skip, style condition, WaveNet head) at small
  widths: the tiny release 2 folder's section (`koe_indextts.fixtures2`), two blocks deeper, its
  WaveNet three layers dilated by 2; `gpt_layer` keeps upstream's hard-coded 1280 -> 256 -> 128 ->
  1024, the style its 192;
- `variant`: the other branches koe supports (no sampling ratios, causal attention, MLP head, no
  skips, no style condition, the prompt's channels of mu zeroed).
Cases (inputs `.npy`, listed in `cases.json`):
- `regulator.*`: the length regulator on (B, N, 1024) content at given lengths;
- `cfm.*`: flow matching after `torch.manual_seed(seed)` on a condition, reference mel and style, at
  two lengths, 25 and fewer steps, cfg 0.7 and 0, one with fewer valid frames than frames;
- `chain`: upstream's per-segment s2mel from (GPT latent, S_infer without the latent, code_lens,
  S_ref, reference clip -> mel22k, style) to the segment's mel.
The time embedders' `freqs` in the weights are the ones koe computes (upstream uses the loaded ones;
the oracle records the ones it computes).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import yaml
from koe_indextts.fixtures import random_state, state_sha256
from koe_indextts.fixtures2 import release_config
from koe_indextts.s2mel import S2Mel, S2MelConfig

TINY = release_config()["s2mel"]  # the tiny release 2 folder's section
PREPROCESS = TINY["preprocess_params"]
STYLE_DIM = TINY["style_encoder"]["dim"]

SECTIONS: dict[str, dict] = {
    "release": {**TINY, "DiT": {**TINY["DiT"], "depth": 5}, "wavenet": {**TINY["wavenet"], "num_layers": 3, "dilation_rate": 2}},
    "variant": {
        "preprocess_params": PREPROCESS,
        "dit_type": "DiT",
        "reg_loss_type": "l2",
        "style_encoder": {"dim": STYLE_DIM},
        "length_regulator": {"channels": 24, "is_discrete": False, "in_channels": 1024, "content_codebook_size": 8, "sampling_ratios": []},
        "DiT": {
            "hidden_dim": 48,
            "num_heads": 2,
            "depth": 2,
            "class_dropout_prob": 0.1,
            "in_channels": 80,
            "style_condition": False,
            "final_layer_type": "mlp",
            "content_dim": 24,
            "content_codebook_size": 8,
            "content_type": "discrete",
            "is_causal": True,
            "long_skip_connection": False,
            "zero_prompt_speech_token": True,
            "time_as_token": False,
            "style_as_token": False,
            "uvit_skip_connection": False,
        },
    },
}
SEEDS = {"release": 81, "variant": 82}

# regulator cases: config -> {case: (content frames per batch item (padded to the longest), ylens)}
REGULATOR = {
    "release": {"one": ((7,), (12,)), "batch": ((9, 9), (16, 11))},
    "variant": {"clamped": ((6, 6), (4, 9))},
}
# cfm cases: name -> (config, frames T, prompt frames, valid frames, steps, cfg rate, seed)
CFM = {
    "short_25_cfg": ("release", 8, 3, 8, 25, 0.7, 1),
    "short_4_nocfg": ("release", 8, 3, 8, 4, 0.0, 2),
    "long_25_cfg": ("release", 48, 20, 48, 25, 0.7, 3),
    "long_25_nocfg": ("release", 48, 20, 48, 25, 0.0, 4),
    "long_6_cfg": ("release", 48, 20, 48, 6, 0.7, 5),
    "masked_3_cfg": ("release", 30, 10, 25, 3, 0.7, 6),
    "variant_5_cfg": ("variant", 20, 6, 20, 5, 0.7, 7),
    "variant_5_nocfg": ("variant", 20, 6, 20, 5, 0.0, 8),
}
# the chain: config, semantic codes N, reference semantic frames, reference clip samples, seed
CHAIN = {"config": "release", "codes": 9, "ref_codes": 11, "ref_samples": 5800, "seed": 1234}


def config(name: str) -> S2MelConfig:
    return S2MelConfig.from_dict(SECTIONS[name])


def case_state(name: str) -> dict[str, torch.Tensor]:
    """koe's S2Mel state for the config: seeded, with the time embedders' computed `freqs`."""
    return random_state(S2Mel(config(name)), SEEDS[name], keep=(".freqs",))


def checkpoint(state: dict[str, torch.Tensor]) -> dict:
    """`s2mel.pth`'s layout: {"net": {group: the group's state}}."""
    net: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in state.items():
        group, rest = key.split(".", 1)
        net.setdefault(group, {})[rest] = value
    return {"net": net}


def _randn(g: torch.Generator, *shape: int, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g) * scale + shift


def regulator_inputs(config_name: str, case: str) -> tuple[torch.Tensor, torch.Tensor]:
    frames, ylens = REGULATOR[config_name][case]
    flat = [(c, k) for c, cases in REGULATOR.items() for k in cases]
    g = torch.Generator().manual_seed(100 + flat.index((config_name, case)))
    return _randn(g, len(frames), max(frames), 1024), torch.LongTensor(list(ylens))


def cfm_inputs(case: str) -> dict[str, torch.Tensor]:
    config_name, frames, prompt, valid, *_ = CFM[case]
    g = torch.Generator().manual_seed(200 + list(CFM).index(case))
    c = config(config_name)
    return {
        "mu": _randn(g, 1, frames, c.dit.content_dim),
        "ref_mel": _randn(g, 1, c.dit.in_channels, prompt, scale=2.0, shift=-5.0),
        "style": _randn(g, 1, STYLE_DIM),
        "x_lens": torch.LongTensor([valid]),
    }


def chain_inputs() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(300)
    n, n_ref, samples = CHAIN["codes"], CHAIN["ref_codes"], CHAIN["ref_samples"]
    t = torch.arange(samples) / 22050.0
    clip = 0.3 * torch.sin(2 * torch.pi * 180.0 * t) * (0.6 + 0.4 * torch.sin(2 * torch.pi * 3.0 * t)) + 0.02 * torch.randn(samples, generator=g)
    return {
        "gpt_latent": _randn(g, 1, n, 1280),
        "s_infer": _randn(g, 1, n, 1024),
        "code_lens": torch.LongTensor([n]),
        "s_ref": _randn(g, 1, n_ref, 1024),
        "ref_audio": clip[None].float(),
        "style": _randn(g, 1, STYLE_DIM),
    }


def _save(folder: Path, name: str, tensors: dict[str, torch.Tensor]) -> None:
    for key, value in tensors.items():
        np.save(folder / f"{name}.{key}.npy", value.numpy())


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for name, section in SECTIONS.items():
        sub = folder / name
        sub.mkdir(exist_ok=True)
        state = case_state(name)
        torch.save(checkpoint(state), sub / "s2mel.pth")
        (sub / "config.yaml").write_text(yaml.safe_dump({"s2mel": section}, sort_keys=False))
        lines.append(f"{name} {state_sha256(state)}")
    for config_name, cases in REGULATOR.items():
        for case in cases:
            content, ylens = regulator_inputs(config_name, case)
            _save(folder, f"regulator.{config_name}.{case}", {"content": content, "ylens": ylens})
    for case in CFM:
        _save(folder, f"cfm.{case}", cfm_inputs(case))
    _save(folder, "chain", chain_inputs())
    cases = {
        "regulator": {config_name: list(cases) for config_name, cases in REGULATOR.items()},
        "cfm": {case: {"config": c, "steps": steps, "cfg_rate": rate, "seed": seed} for case, (c, _, _, _, steps, rate, seed) in CFM.items()},
        "chain": CHAIN,
    }
    (folder / "cases.json").write_text(json.dumps(cases, indent=1))
    (folder / "state_sha256.txt").write_text("\n".join(lines) + "\n")
