"""The s3tokenizer package's PyTorch S3 tokenizers (0.3.0: `S3TokenizerV2`, `S3TokenizerV3`, its
reconstruction of the released speech_tokenizer_v2/v3.onnx graphs) on given weights and mels: a
second reading of the released architecture, independent of the ONNX graph.

Job: {"version": 2 | 3, "width": int, "layers": int, "weights": safetensors in s3tokenizer's
names (encoder.*, quantizer._codebook.project_down.*), "mels": safetensors of mel_<i> (1, 128, T)}.
Loads the weights strictly; for each mel writes hidden_<i> (the encoder's output) and ids_<i>;
then all mels as one zero-padded batch: ids_batch (B, T'max) and lens_batch.
"""

from __future__ import annotations

import torch
from oracle_io import read_job, write_results
from s3tokenizer.model_v2 import ModelConfig, S3TokenizerV2
from s3tokenizer.model_v3 import ModelConfigV3, S3TokenizerV3
from safetensors.torch import load_file


def main() -> None:
    job, out = read_job()
    width, layers = job["width"], job["layers"]
    if job["version"] == 2:
        model = S3TokenizerV2("speech_tokenizer_v2_25hz", ModelConfig(n_audio_state=width, n_audio_head=width // 64, n_audio_layer=layers))
    else:
        model = S3TokenizerV3("speech_tokenizer_v3", ModelConfigV3(n_audio_state=width, n_audio_head=width // 64, n_audio_layer=layers))
    model.load_state_dict(load_file(job["weights"]), strict=True)
    model.eval()
    mels = load_file(job["mels"])
    tensors = {}
    with torch.inference_mode():
        keys = sorted(mels, key=lambda k: int(k.rsplit("_", 1)[1]))
        for key in keys:
            i = key.rsplit("_", 1)[1]
            mel = mels[key]
            length = torch.tensor([mel.shape[2]], dtype=torch.int32)
            hidden, _ = model.encoder(mel, length)
            tensors[f"hidden_{i}"] = hidden
            tensors[f"ids_{i}"] = model.quantizer.encode(hidden)
        longest = max(mels[k].shape[2] for k in keys)
        batch = torch.cat([torch.nn.functional.pad(mels[k], (0, longest - mels[k].shape[2])) for k in keys])
        lengths = torch.tensor([mels[k].shape[2] for k in keys], dtype=torch.int32)
        ids, lens = model.quantize(batch, lengths)
        tensors["ids_batch"], tensors["lens_batch"] = ids, lens
    write_results(out, tensors, {"parameters": sum(p.numel() for p in model.parameters())})


if __name__ == "__main__":
    main()
