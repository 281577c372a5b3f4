"""koe's S3 speech tokenizer against the s3tokenizer package (0.3.0, in the CosyVoice oracle venv):
its PyTorch `S3TokenizerV2` / `S3TokenizerV3` are a reconstruction of the released graphs made
independently of koe's, so equal results say koe reads the released architecture the same way.
The weights are koe's fixture graph's, renamed to s3tokenizer's modules; both run in torch, so the
hidden states compare bit for bit, and the ids too, one clip at a time and as a padded batch."""

from __future__ import annotations

import pytest
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import save_file

from koe.engines.cosyvoice.fixtures_onnx import write_speech_tokenizer
from koe.engines.cosyvoice.speech_tokenizer import load_speech_tokenizer

pytestmark = pytest.mark.oracle

FRAMES = (64, 173, 311, 3000)  # 3000: a 30 s clip, the longest upstream tokenizes


def _s3tokenizer_names(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in state.items():
        if key.startswith("quantizer.project_in."):
            out[key.replace("quantizer.project_in.", "quantizer._codebook.project_down.")] = value
        else:
            out[f"encoder.{key}"] = value
    return out


@pytest.mark.parametrize("version", [2, 3])
def test_same_hidden_states_and_ids_as_s3tokenizer(tmp_path, version):
    model = load_speech_tokenizer(write_speech_tokenizer(tmp_path / f"speech_tokenizer_v{version}.onnx", version, "tiny", seed=20 + version))
    save_file(_s3tokenizer_names(model.state_dict()), str(tmp_path / "weights.safetensors"))
    g = torch.Generator().manual_seed(version)
    mels = {f"mel_{i}": torch.randn(1, 128, frames, generator=g) * 0.6 for i, frames in enumerate(FRAMES)}
    save_file(mels, str(tmp_path / "mels.safetensors"))
    job = {
        "version": version,
        "width": model.width,
        "layers": len(model.blocks),
        "weights": str(tmp_path / "weights.safetensors"),
        "mels": str(tmp_path / "mels.safetensors"),
    }
    tensors, info = run_oracle("onnx_s3tokenizer", job, tmp_path / "work", family="cosyvoice", keep=("ids_batch", "lens_batch"))
    assert info["parameters"] == sum(p.numel() for p in model.parameters())
    with torch.inference_mode():
        for i, frames in enumerate(FRAMES):
            mel = mels[f"mel_{i}"]
            hidden, lengths = model.encode(mel, torch.tensor([frames], dtype=torch.int32))
            assert same(hidden, tensors[f"hidden_{i}"]), frames
            ids = model(mel, torch.tensor([frames], dtype=torch.int32))
            assert same(ids, tensors[f"ids_{i}"]), frames
            assert int(lengths[0]) == ids.shape[1] == -(-frames // 4)
        batch = torch.cat([torch.nn.functional.pad(m, (0, 3000 - m.shape[2])) for m in mels.values()])
        ids = model(batch, torch.tensor(FRAMES, dtype=torch.int32))
        for i, frames in enumerate(FRAMES):
            n = int(tensors["lens_batch"][i])
            assert n == -(-frames // 4) and same(ids[i, :n].long(), tensors["ids_batch"][i, :n].long())
