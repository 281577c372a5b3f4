"""Oracle: upstream's 12 Hz speech tokenizer (qwen-tts 0.1.1) decoding / encoding a job's inputs.

Job: {"folder": speech tokenizer folder, "inputs": safetensors path,
      "decode": {case: [input keys, one (T_i, 16) int64 codes tensor per sample]},
      "encode": {case: [input keys, one 1-D float32 24 kHz waveform per sample]}}
Writes `decode.<case>.<i>` (waveforms) and `encode.<case>.<i>` (codes), plus loading info.
"""

from __future__ import annotations

import torch
from common import _from_pretrained_with_info, read_job, write_results
from safetensors.torch import load_file


def main() -> None:
    job, out = read_job()
    from qwen_tts import Qwen3TTSTokenizer

    tok, loading = _from_pretrained_with_info(Qwen3TTSTokenizer, job["folder"])
    model = tok.model
    inputs = load_file(job["inputs"])
    tensors: dict[str, torch.Tensor] = {}
    for case, keys in job.get("decode", {}).items():
        wavs, sr = tok.decode([{"audio_codes": inputs[k]} for k in keys])
        for i, w in enumerate(wavs):
            tensors[f"decode.{case}.{i}"] = torch.from_numpy(w.copy())
    for case, keys in job.get("encode", {}).items():
        enc = tok.encode([inputs[k].numpy() for k in keys], sr=24000)
        for i, c in enumerate(enc.audio_codes):
            tensors[f"encode.{case}.{i}"] = c.to(torch.int64)
    info = {
        "loading": loading,
        "attn_implementation": model.config._attn_implementation,
        "decoder_attn_implementation": model.decoder.config._attn_implementation,
        "encoder_attn_implementation": model.encoder.config._attn_implementation,
        "encoder_attention_class": type(model.encoder.encoder_transformer.layers[0].self_attn).__name__,
        "decoder_use_cache": getattr(model.decoder.config, "use_cache", None),
    }
    write_results(out, tensors, info)


if __name__ == "__main__":
    main()
