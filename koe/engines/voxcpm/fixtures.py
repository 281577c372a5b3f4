"""Random-weight VoxCPM model folders in the released layout: `config.json`, `model.safetensors`,
`audiovae.safetensors`, and a Llama-style tokenizer (`koe.engines.voxcpm.fixture_tokenizer`).

"tiny" runs in seconds (every part present and shaped as released, a few small layers); "real"
has the released sizes (VoxCPM2 ~2B, VoxCPM 1.5 ~0.8B) for the benchmark, stored in bfloat16 as
the releases are (`dtype=` to override). The config says float32 for tiny models: upstream runs
in the config's dtype on the CPU, and the parity tests compare float32. Upstream loads these
folders with no missing or unexpected keys (its oracle checks); koe's random-weights marker
(`koe.engines.spec.mark_random_weights`, a file of its own) is beside them.

The "real" sizes are the released `config.json` values (random weights; only shapes matter):

- VoxCPM2 (`openbmb/VoxCPM2`): lm_config hidden 2048, intermediate 6144, 28 layers, 16 heads, 2 KV
  heads, kv_channels 128, vocab 73448, use_mup false; residual LM 8 layers (no rope); encoder_config
  and dit_config hidden 1024, ffn 4096, 16 heads, 12 layers, kv_channels 128 (so their attention is
  16 x 128 = 2048 wide over a 1024 stream); FSQ 512; patch 4; max_length 8192; audio_vae_config
  encoder_dim 128, rates [2, 5, 8, 8], latent 64, decoder_dim 2048, rates [8, 6, 5, 2, 2, 2],
  16 kHz in, 48 kHz out, sr_bin_boundaries [20000, 30000, 40000]. Parameters: 2290.0 M in
  model.safetensors + 94.2 M AudioVAE = 2384.2 M ("2B" in the release notes; 4.96 GB on disk as
  bf16 + float32 VAE). Sources: mlx-community/VoxCPM2-4bit's and 3scale/VoxCPM2's config.json
  (Hugging Face pages), the config quoted in mlx-audio-swift's VoxCPM2 tests, vokra's
  `voxcpm2_2b()` configs transcribed from openbmb/VoxCPM2/config.json (kv_channels 128 in
  lm_config, encoder_config and dit_config, ffn 6144), llama.cpp-omni's VoxCPM README table.
- VoxCPM 1.5 (`openbmb/VoxCPM1.5`): lm_config hidden 1024, intermediate 4096, 24 layers, 16 heads,
  2 KV heads, no kv_channels (head dim 64), vocab 73448, use_mup false; residual LM 8 layers;
  encoder and DiT 1024 / 4096 / 16 heads / 8 layers; FSQ 256; patch 4; max_length 4096;
  AudioVAE 44.1 kHz, decoder_dim 2048, rates [2, 3, 6, 7, 7] / [7, 7, 6, 3, 2]. Parameters:
  801.7 M + 86.5 M AudioVAE = 888.2 M (the release says 750M / "800M"; the CoreML port reports a
  1024-wide 73448-row embedding; a 1.9 GB release folder fits 801.7 M bf16 + a float32 VAE).
  Sources: llama.cpp-omni's README (24 / 8 / 8+8 layers, h 1024, patch 4, FSQ 256, 44.1 kHz,
  dec_dim 2048), the 0.5B config.json's LM (unchanged in 1.5 per the release notes), the release
  note (deeper LocEnc/LocDiT, patch 2 -> 4). Not confirmed from a public copy of the 1.5 config:
  the AudioVAE's encoder_dim (64 here) and its rates (those of upstream's 44.1 kHz V1 layout).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from koe.engines.spec import mark_random_weights
from koe.engines.voxcpm.audio_vae import AudioVAE, VAEConfig
from koe.engines.voxcpm.config import parse_config
from koe.engines.voxcpm.fixture_tokenizer import write_tokenizer
from koe.engines.voxcpm.model import VoxCPMModel

__all__ = ["VARIANTS", "config_for", "write_random_model"]

VARIANTS = ("VoxCPM2", "VoxCPM1.5")


def _rope(head_dim: int, original: int = 32768) -> dict:
    n = head_dim // 2
    return {
        "type": "longrope",
        "long_factor": [1.0 + 0.9 * i / n for i in range(n)],
        "short_factor": [1.0 + 0.05 * i / n for i in range(n)],
        "original_max_position_embeddings": original,
    }


def _lm(hidden: int, ffn: int, heads: int, kv: int, layers: int, vocab: int, kv_channels: int | None) -> dict:
    head_dim = kv_channels or hidden // heads
    return {
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_size": hidden,
        "intermediate_size": ffn,
        "max_position_embeddings": 32768,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv,
        "rms_norm_eps": 1e-5,
        "rope_scaling": _rope(head_dim),
        "vocab_size": vocab,
        "use_mup": True,
        "scale_emb": 12,
        "dim_model_base": 256,
        "scale_depth": 1.4,
        "rope_theta": 10000.0,
        **({"kv_channels": kv_channels} if kv_channels else {}),
    }


def _local(hidden: int, ffn: int, heads: int, layers: int, v2: bool) -> dict:
    return {"hidden_dim": hidden, "ffn_dim": ffn, "num_heads": heads, "num_layers": layers}


_CFM = {
    "sigma_min": 1e-06,
    "solver": "euler",
    "t_scheduler": "log-norm",
    "training_cfg_rate": 0.1,
    "inference_cfg_rate": 1.0,
    "reg_loss_type": "l1",
    "ratio_r_neq_t_range": [0.25, 0.75],
    "noise_cond_prob_range": [0.0, 0.0],
    "noise_cond_scale": 0.0,
}

_VAE = {
    "VoxCPM2": {
        "tiny": {
            "encoder_dim": 8,
            "encoder_rates": [2, 5, 8, 8],
            "latent_dim": 16,
            "decoder_dim": 64,
            "decoder_rates": [8, 6, 5, 2, 2, 2],
            "depthwise": True,
            "sample_rate": 16000,
            "out_sample_rate": 48000,
            "use_noise_block": False,
            "sr_bin_boundaries": [20000, 30000, 40000],
            "cond_type": "scale_bias",
            "cond_dim": 128,
            "cond_out_layer": False,
        },
        "real": {
            "encoder_dim": 128,
            "encoder_rates": [2, 5, 8, 8],
            "latent_dim": 64,
            "decoder_dim": 2048,
            "decoder_rates": [8, 6, 5, 2, 2, 2],
            "depthwise": True,
            "sample_rate": 16000,
            "out_sample_rate": 48000,
            "use_noise_block": False,
            "sr_bin_boundaries": [20000, 30000, 40000],
            "cond_type": "scale_bias",
            "cond_dim": 128,
            "cond_out_layer": False,
        },
    },
    "VoxCPM1.5": {
        "tiny": {
            "encoder_dim": 8,
            "encoder_rates": [2, 3, 6, 7, 7],
            "latent_dim": 16,
            "decoder_dim": 64,
            "decoder_rates": [7, 7, 6, 3, 2],
            "depthwise": True,
            "sample_rate": 44100,
            "use_noise_block": False,
        },
        "real": {
            "encoder_dim": 64,
            "encoder_rates": [2, 3, 6, 7, 7],
            "latent_dim": 64,
            "decoder_dim": 2048,
            "decoder_rates": [7, 7, 6, 3, 2],
            "depthwise": True,
            "sample_rate": 44100,
            "use_noise_block": False,
        },
    },
}


def config_for(variant: str, size: str = "tiny") -> dict:
    """The `config.json` of a fixture: the released layout, tiny or released sizes."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown VoxCPM fixture variant {variant!r}; one of {', '.join(VARIANTS)}")
    v2 = variant == "VoxCPM2"
    if size == "tiny":
        lm, enc, dit = _lm(64, 128, 4, 2, 2, 1024, None), _local(32, 64, 2, 1, v2), _local(32, 64, 2, 1, v2)
        res_layers, fsq, feat = 1, 32, 16
    elif size == "real":
        # the released config.json values (sources in the module docstring); the releases say use_mup=false
        if v2:
            lm, enc, dit = _lm(2048, 6144, 16, 2, 28, 73448, 128), _local(1024, 4096, 16, 12, v2), _local(1024, 4096, 16, 12, v2)
            enc["kv_channels"] = dit["kv_channels"] = 128  # VoxCPM2's local encoder and DiT use 128-wide heads (16 x 128 > 1024)
            res_layers, fsq = 8, 512
        else:
            lm, enc, dit = _lm(1024, 4096, 16, 2, 24, 73448, None), _local(1024, 4096, 16, 8, v2), _local(1024, 4096, 16, 8, v2)
            res_layers, fsq = 8, 256
        lm["use_mup"] = False
        feat = 64
    else:
        raise ValueError(f"unknown fixture size {size!r}: tiny or real")
    dit["cfm_config"] = dict(_CFM)
    raw = {
        "architecture": "voxcpm2" if v2 else "voxcpm",
        "lm_config": lm,
        "patch_size": 4,
        "feat_dim": feat,
        "residual_lm_num_layers": res_layers,
        "scalar_quantization_latent_dim": fsq,
        "scalar_quantization_scale": 9,
        "encoder_config": enc,
        "dit_config": dit,
        "audio_vae_config": copy.deepcopy(_VAE[variant][size]),
        "max_length": 8192 if v2 else 4096,
        "device": "cuda",
        "dtype": "float32" if size == "tiny" else "bfloat16",
    }
    if v2:
        raw["residual_lm_no_rope"] = True
        dit["dit_mean_mode"] = False
    else:
        raw["dit_mean_mode"] = False
    return raw


def _randomise(module: torch.nn.Module, generator: torch.Generator) -> None:
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=generator))
            elif name.endswith(".weight_g"):
                p.copy_(0.5 + torch.rand(p.shape, generator=generator))
            elif p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=generator) * (1.0 / max(1, p.shape[-1]) ** 0.5))
            else:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.02)


def write_random_model(folder: Path, variant: str = "VoxCPM2", size: str = "tiny", seed: int = 0, dtype: torch.dtype | None = None) -> Path:
    """A random-weight VoxCPM folder in the released layout; returns `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    raw = config_for(variant, size)
    (folder / "config.json").write_text(json.dumps(raw, indent=2))
    cfg = parse_config(raw)
    generator = torch.Generator().manual_seed(seed)
    store = dtype or (torch.float32 if size == "tiny" else torch.bfloat16)
    with torch.device("cpu"):
        model = VoxCPMModel(cfg)
    _randomise(model, generator)
    save_file({k: v.to(store).contiguous() for k, v in model.state_dict().items()}, str(folder / "model.safetensors"))
    del model
    vae = AudioVAE(VAEConfig.from_json(raw["audio_vae_config"], cfg.vae_version))
    _randomise(vae, generator)
    save_file({k: v.to(torch.float32).contiguous() for k, v in vae.state_dict().items()}, str(folder / "audiovae.safetensors"))
    write_tokenizer(folder)
    mark_random_weights(folder, __name__)
    return folder
