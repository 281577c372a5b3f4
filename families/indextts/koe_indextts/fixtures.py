"""Random-weight IndexTTS models for tests and benchmarks, written deterministically by koe.

Every tensor of a module's state dict is drawn from one seeded generator in the state dict's order
(koe's modules keep upstream's parameter names), so a seed gives the same file on every machine and
upstream's code loads it with no missing or unexpected keys. Goldens made by upstream from these
weights record `state_sha256` of what they were made from, so a drifted fixture fails loudly.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import torch
import yaml

from koe.runtime.weights import state_sha256  # the goldens' hash of a state dict, kept here for the tests that import it from the fixtures


def random_tensor(name: str, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    """Scales near 1 for norms, small biases, N(0, 1) embeddings, N(0, 1/fan_in) elsewhere."""
    leaf = name.rsplit(".", 1)[-1]
    if len(shape) <= 1:
        scale = leaf in ("weight", "gamma", "alpha", "weight_g") or "norm" in name
        return (1.0 if scale else 0.0) + 0.05 * torch.randn(shape, generator=g)
    if "embed" in name or "emb." in name:
        return torch.randn(shape, generator=g)
    return torch.randn(shape, generator=g) / math.sqrt(math.prod(shape[1:]))


def random_state(module: torch.nn.Module, seed: int = 0, *, keep: tuple[str, ...] = ()) -> dict[str, torch.Tensor]:
    """A float32 state dict for `module` (integer buffers are kept as they are); `module` may live
    on the meta device (only its tensors' names, shapes and dtypes are read). `keep`: name endings
    of float tensors the module computes itself (positional tables, filters, frequencies), taken as
    the module holds them, after their draws (so the other tensors' draws do not move); the module
    must then hold real tensors."""
    g = torch.Generator().manual_seed(seed)
    state = {}
    for name, t in module.state_dict().items():
        if t.is_floating_point():
            state[name] = random_tensor(name, tuple(t.shape), g)
            if keep and name.endswith(keep):
                if t.is_meta:
                    raise ValueError(f"random_state: {name} is to be kept, but the module is on the meta device")
                state[name] = t.clone()
        else:  # counters and indices as a fresh module holds them (zeros for a module built on the meta device)
            state[name] = torch.zeros(t.shape, dtype=t.dtype) if t.is_meta else t.clone()
    return state


def state_sha256_1d(state: dict[str, torch.Tensor]) -> str:
    """`state_sha256` with 0-d tensors (batch norms' `num_batches_tracked`) seen as 1-d, as the
    goldens of modules with batch norms record their weights."""
    return state_sha256({k: v.reshape(1) if v.dim() == 0 else v for k, v in state.items()})


def vocoder_state(module: torch.nn.Module, seed: int, post_gain: float) -> dict[str, torch.Tensor]:
    """A BigVGAN generator's (1.5's or v2's) random state: its anti-aliasing filters as koe builds
    them, conv_post's gain scaled by `post_gain` (random weights would saturate the output)."""
    state = random_state(module, seed, keep=(".filter",))
    state["conv_post.weight_g"] = state["conv_post.weight_g"] * post_gain
    return state


# --------------------------------------------------------------------------- seeded voice-like clips


def tone_clip(name: str, rate: int, frames: int, channels: int = 1, *, partials: int = 5, noise: float = 0.03, pause: bool = False) -> np.ndarray:
    """float32 `(frames, channels)` within +-0.9, seeded by `name`: per channel a few partials of a
    pitch under a slow envelope plus noise; `pause`: a tenth of it, from a third in, at 1 %."""
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little"))
    t = np.arange(frames) / rate
    out = np.empty((frames, channels), dtype=np.float64)
    for c in range(channels):
        f0 = rng.uniform(90, 300)
        tone = sum(rng.uniform(0.05, 0.3) / k * np.sin(2 * np.pi * k * f0 * t + rng.uniform(0, 2 * np.pi)) for k in range(1, partials + 1))
        envelope = 0.6 + 0.4 * np.sin(2 * np.pi * rng.uniform(0.5, 3) * t)
        out[:, c] = tone * envelope + noise * rng.standard_normal(frames)
    if pause:
        out[frames // 3 : frames // 3 + frames // 10] *= 0.01
    return np.clip(out, -0.9, 0.9).astype(np.float32)


def wav_clips_sha256(paths: dict[str, Path]) -> str:
    """One hash of WAV clips' rates, formats and samples as read back, in the given order (not the
    files' bytes: libsndfile stamps a float WAV's PEAK chunk with the time it was written)."""
    import soundfile as sf

    h = hashlib.sha256()
    for name, path in paths.items():
        info = sf.info(path)
        samples, rate = sf.read(path, dtype="float32", always_2d=True)
        h.update(f"{name}:{rate}:{info.subtype}:{samples.shape};".encode() + samples.tobytes())
    return h.hexdigest()


# --------------------------------------------------------------------------- a whole 1.5 release

REAL_BIGVGAN = {
    "upsample_rates": [4, 4, 4, 4, 2, 2],
    "upsample_kernel_sizes": [8, 8, 4, 4, 4, 4],
    "upsample_initial_channel": 1536,
    "resblock_kernel_sizes": [3, 7, 11],
    "speaker_embedding_dim": 512,
}
TINY_CONFORMER = {"output_size": 32, "linear_units": 64, "attention_heads": 2, "num_blocks": 1, "input_layer": "conv2d2", "perceiver_mult": 2}
SIZES = {
    # the released IndexTTS-1.5 (config.yaml's values as its classes need them) and a tiny stand-in
    "real": {
        "gpt": {"model_dim": 1280, "layers": 24, "heads": 20, "max_text_tokens": 600, "max_mel_tokens": 800, "number_text_tokens": 12000},
        "condition_module": {"output_size": 512, "linear_units": 2048, "attention_heads": 8, "num_blocks": 6, "input_layer": "conv2d2", "perceiver_mult": 2},
        "bigvgan": REAL_BIGVGAN,
    },
    "tiny": {
        "gpt": {"model_dim": 64, "layers": 2, "heads": 4, "max_text_tokens": 120, "max_mel_tokens": 250, "number_text_tokens": 12000},
        "condition_module": TINY_CONFORMER,
        "bigvgan": {**REAL_BIGVGAN, "upsample_initial_channel": 64, "speaker_embedding_dim": 16},
    },
}
# config.yaml's gpt keys every release fixes: the mel codes' count and the start / stop tokens
CODE_TOKENS = {"number_mel_codes": 8194, "start_mel_token": 8192, "stop_mel_token": 8193, "start_text_token": 0, "stop_text_token": 1}
POST_GAIN = 0.1  # conv_post's gain scaled down so that random weights do not saturate the output's tanh
STOP_BIAS = 4.0  # the stop code's head bias raised so that a random GPT ends its searches


def release_config(size: str = "tiny") -> dict:
    """A 1.5 `config.yaml` (as data) at `size`: the sections and keys upstream's IndexTTS reads."""
    if size not in SIZES:
        raise ValueError(f"size {size!r}: one of {sorted(SIZES)}")
    dims = SIZES[size]
    gpt = {
        **dims["gpt"],
        "max_conditioning_inputs": 1,
        "mel_length_compression": 1024,
        **CODE_TOKENS,
        "train_solo_embeddings": False,
        "use_mel_codes_as_input": True,
        "condition_type": "conformer_perceiver",
        "condition_module": dict(dims["condition_module"]),
    }
    bigvgan = {
        **dims["bigvgan"],
        "resblock": "1",
        "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
        "feat_upsample": False,
        "cond_d_vector_in_each_upsampling_layer": True,
        "gpt_dim": dims["gpt"]["model_dim"],
        "activation": "snakebeta",
        "snake_logscale": True,
        "num_mels": 100,
        "sampling_rate": 24000,
    }
    dataset = {"bpe_model": "bpe.model", "sample_rate": 24000, "squeeze": False}
    return {"dataset": dataset, "gpt": gpt, "bigvgan": bigvgan, "gpt_checkpoint": "gpt.pth", "bigvgan_checkpoint": "bigvgan_generator.pth", "version": 1.5}


def release_states(size: str = "tiny", seed: int = 0) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """`gpt.pth`'s and `bigvgan_generator.pth`'s states (the latter weight-normed, as released)."""
    from koe_indextts.bigvgan import BigVGAN, BigVGANConfig
    from koe_indextts.conditioning import ConditioningConfig, SpeechConditioning
    from koe_indextts.voice_lm import GPTConfig, SpeechLM

    config = release_config(size)
    with torch.device("meta"):
        lm = SpeechLM(GPTConfig.from_dict(config["gpt"]))
        vocoder = BigVGAN(BigVGANConfig.from_dict(config["bigvgan"]))
    conditioning = SpeechConditioning(ConditioningConfig.speaker(config["gpt"]))  # its positional table is computed
    table = {k: v for k, v in conditioning.state_dict().items() if k.endswith("pos_enc.pe")}
    gpt = {**random_state(conditioning, seed), **table, **random_state(lm, seed + 1)}
    gpt["mel_head.bias"][config["gpt"]["stop_mel_token"]] += STOP_BIAS
    own = BigVGAN(BigVGANConfig.from_dict({**config["bigvgan"], "upsample_initial_channel": 8 * 2 ** len(config["bigvgan"]["upsample_rates"])}))
    filters = {k: v for k, v in own.state_dict().items() if k.endswith(".filter")}  # the anti-aliasing filters do not depend on widths
    vocoder_state = random_state(vocoder, seed + 2)
    for key in vocoder_state:
        if key.endswith(".filter"):
            vocoder_state[key] = filters[key].clone()
    vocoder_state["conv_post.weight_g"] = vocoder_state["conv_post.weight_g"] * POST_GAIN
    return gpt, vocoder_state


def write_random_model(folder: str | Path, variant: str = "IndexTTS-1.5", size: str = "tiny", seed: int = 0) -> Path:
    """A complete random-weight release folder in the released layout (upstream's IndexTTS / IndexTTS2
    loads it with no missing or unexpected keys), marked as random weights: 1.5 (tiny or at the
    released sizes), 2 (`koe_indextts.fixtures2`) or 2.5 (`koe_indextts.fixtures25`), the same two sizes."""
    from koe.engines.spec import mark_random_weights
    from koe_indextts.fixtures_text import write_bpe_model

    if variant == "IndexTTS-2":
        from koe_indextts.fixtures2 import write_random_model2

        return write_random_model2(folder, seed, size)
    if variant == "IndexTTS-2.5":
        from koe_indextts import fixtures25

        return fixtures25.write_random_model(folder, seed, size)
    if variant != "IndexTTS-1.5":
        raise ValueError(f"variant {variant!r}: koe writes IndexTTS-1.5, IndexTTS-2 and IndexTTS-2.5 folders")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    gpt, vocoder = release_states(size, seed)
    (folder / "config.yaml").write_text(yaml.safe_dump(release_config(size), sort_keys=False))
    torch.save(gpt, folder / "gpt.pth")
    torch.save({"generator": vocoder}, folder / "bigvgan_generator.pth")
    write_bpe_model(folder / "bpe.model")
    mark_random_weights(folder, "koe_indextts.fixtures:write_random_model")
    return folder
