"""IndexTTS's benchmark models: random weights in the released layouts, "tiny" or "real" (the
released sizes; float32 as released), one folder per release (the cases pick it:
`cases.VARIANTS`), and their parameter counts.

1.5 (`koe_indextts.fixtures.write_random_model`): GPT 24 x 1280, conformer conditioning 6 x 512,
BigVGAN 1536 channels. 2 (`koe_indextts.fixtures2.write_random_model2`): GPT 24 x 1280 with a
speaker (6 x 512) and an emotion (4 x 512) conditioning, s2mel (DiT 13 x 512, WaveNet 8 x 512,
length regulator 512), and under `hf_cache/` w2v-BERT 2.0 (24 layers), MaskGCT's semantic codec,
CAM++ and BigVGAN v2 (1536 channels). 2.5 (`koe_indextts.fixtures25.write_random_model`): its GPT
with CAM++'s speaker row and the language embedding (release 2's sizes), `codec.pth` (2.5's codec),
s2mel without `gpt_layer`, and release 2's auxiliary models but the MaskGCT codec.
"""

from __future__ import annotations

from pathlib import Path

from koe.engines.benchmark import RandomModels

VARIANTS = ("IndexTTS-1.5", "IndexTTS-2", "IndexTTS-2.5")
SIZES = ("tiny", "real")
FIXTURE_VERSION = 2  # 2: release 2's real GPT without the stop bias (its searches make --codes codes)


def write_release(folder, variant: str, size: str, seed: int = 0) -> Path:
    """A random-weight release folder of `variant` at `size` (2.5's from `fixtures25`, the others' from `fixtures`)."""
    if variant == "IndexTTS-2.5":
        from koe_indextts.fixtures25 import write_random_model as write25

        return write25(folder, seed, size)
    from koe_indextts.fixtures import write_random_model

    return write_random_model(folder, variant, size, seed=seed)


MODELS = RandomModels("IndexTTS", "indextts", VARIANTS, SIZES, "koe_indextts.bench.models:write_release")
model_name, write_model = MODELS.model_name, MODELS.write_model
WEIGHTS = ("*.pth", "*.pt", "*.bin", "*.safetensors")
CONDITIONING = ("conditioning_encoder.", "perceiver_encoder.", "emo_conditioning_encoder.", "emo_perceiver_encoder.")
NOT_PARAMETERS = (".attn.bias", ".attn.masked_bias", "pos_enc.pe")  # GPT-2's causal masks, the conformer's positional table
BUFFERS = (".filter", "num_batches_tracked", "running_mean", "running_var", ".freqs", ".input_pos")  # anti-aliasing filters, batch norms, rotary tables


def _state(path: Path) -> dict:
    import torch

    if path.suffix == ".safetensors":
        from koe.engines.benchmark import tensor_sizes

        return {name: torch.empty(n, device="meta") for name, n in tensor_sizes(path).items()}
    return torch.load(path, map_location="meta", weights_only=True, mmap=True)


def _count(state: dict, skip: tuple[str, ...] = BUFFERS) -> int:
    return sum(t.numel() for name, t in state.items() if not name.endswith(skip))


def _gpt(path: Path, counts: dict) -> None:
    state = _state(path)
    for name, t in state.get("model", state).items():
        if name.startswith("inference_model.") or name.endswith(NOT_PARAMETERS):  # a release's tied copies and buffers
            continue
        counts["conditioning" if name.startswith(CONDITIONING) else "gpt"] += t.numel()


def parameter_counts(folder: Path) -> dict[str, int]:
    """Parameters of a release folder by part, from the files' shapes (weight-normed layers as
    released: their g and v counted). 1.5: the GPT (embeddings, stack, heads), its speech
    conditioning, BigVGAN and BigVGAN's speaker encoder. 2: the GPT, its speaker and emotion
    conditioning, s2mel (length regulator, DiT and WaveNet, gpt_layer), w2v-BERT 2.0 (all its layers,
    as released), the semantic codec, CAM++ and BigVGAN v2. 2.5: the same, its codec `codec.pth`
    (the GPT's conditioning: its emotion encoder, CAM++'s projection counted with the GPT)."""
    folder = Path(folder)
    if (folder / "codec.pth").exists():  # 2.5
        from koe_indextts.config import AUX_CAMPPLUS, AUX_W2V_BERT

        counts = {"gpt": 0, "conditioning": 0}
        _gpt(folder / "gpt.pth", counts)
        counts["s2mel"] = sum(_count(group) for group in _state(folder / "s2mel.pth")["net"].values())
        counts["w2v_bert"] = _count(_state(folder / AUX_W2V_BERT / "model.safetensors"))
        counts["codec"] = _count(_state(folder / "codec.pth")["model"])
        counts["campplus"] = _count(_state(folder / AUX_CAMPPLUS))
        vocoder = _state(folder / "hf_cache" / "bigvgan" / "bigvgan_generator.pt")
        counts["bigvgan"] = _count(vocoder.get("generator", vocoder))
    elif (folder / "s2mel.pth").exists():
        from koe_indextts.config import AUX_CAMPPLUS, AUX_W2V_BERT, semantic_codec_file

        counts = {"gpt": 0, "conditioning": 0}
        _gpt(folder / "gpt.pth", counts)
        counts["s2mel"] = sum(_count(group) for group in _state(folder / "s2mel.pth")["net"].values())
        counts["w2v_bert"] = _count(_state(folder / AUX_W2V_BERT / "model.safetensors"))
        counts["semantic_codec"] = _count(_state(semantic_codec_file(folder)))
        counts["campplus"] = _count(_state(folder / AUX_CAMPPLUS))
        vocoder = _state(folder / "hf_cache" / "bigvgan" / "bigvgan_generator.pt")
        counts["bigvgan"] = _count(vocoder.get("generator", vocoder))
    else:
        counts = {"gpt": 0, "conditioning": 0, "bigvgan": 0, "speaker_encoder": 0}
        _gpt(folder / "gpt.pth", counts)
        vocoder = _state(folder / "bigvgan_generator.pth")
        for name, t in vocoder.get("generator", vocoder).items():
            if not name.endswith(BUFFERS):
                counts["speaker_encoder" if name.startswith("speaker_encoder.") else "bigvgan"] += t.numel()
    counts["total"] = sum(counts.values())
    return counts
