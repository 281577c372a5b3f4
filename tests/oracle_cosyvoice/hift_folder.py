"""Upstream's flow and vocoder as `AutoModel(model_dir=folder)` loads them from a whole released
folder (the full yaml built in document order: the 1986 seeds, the LM from CosyVoice-BlankEN, the
flow, whose decoder reseeds 0, then the vocoder, whose v3 source tables are drawn there; the ONNX
sessions after).

Job: {"folder", "mels": safetensors of mel_<i> (1, 80, T), "inputs": safetensors of token,
prompt_token, prompt_feat, embedding, "calls": [{"mel": i, "seed": n, "finalize": bool}]}.
Each vocoder call runs after `torch.manual_seed(seed)`. Writes audio_<k>, and mel (the flow on
the inputs, offline).
"""

from __future__ import annotations

import torch
from common import load_model, read_job, write_results
from safetensors.torch import load_file


def main() -> None:
    job, out = read_job()
    model = load_model(job["folder"]).model
    mels, inputs = load_file(job["mels"]), load_file(job["inputs"])
    tensors = {}
    for k, call in enumerate(job["calls"]):
        torch.manual_seed(call.get("seed", 0))
        mel = mels[f"mel_{call['mel']}"]
        if "finalize" in call:
            tensors[f"audio_{k}"] = model.hift.inference(speech_feat=mel, finalize=call["finalize"])[0]
        else:
            tensors[f"audio_{k}"] = model.hift.inference(speech_feat=mel)[0]
    token, prompt_token = inputs["token"].to(torch.int32), inputs["prompt_token"].to(torch.int32)
    tensors["mel"], _ = model.flow.inference(
        token=token,
        token_len=torch.tensor([token.shape[1]], dtype=torch.int32),
        prompt_token=prompt_token,
        prompt_token_len=torch.tensor([prompt_token.shape[1]], dtype=torch.int32),
        prompt_feat=inputs["prompt_feat"],
        prompt_feat_len=torch.tensor([inputs["prompt_feat"].shape[1]], dtype=torch.int32),
        embedding=inputs["embedding"],
        streaming=False,
        finalize=True,
    )
    write_results(out, tensors)


if __name__ == "__main__":
    main()
