"""Upstream's tokens -> waveform: `CosyVoice2Model` / `CosyVoice3Model.tts` with the LM's tokens fed
in, offline and streamed (upstream's own loop: its hop schedule, flow chunks, vocoder caches and
cross-fades).

Job: {"yaml", "flow", "hift", "version", "inputs": safetensors of token_<i>, prompt_token_<i>,
prompt_feat_<i>, embedding_<i>, "cases": [{"input": i, "stream": bool, "speed": float, "seed": n}]}.
The model is built from the yaml (after the 1986 seeds) and loads flow.pt and hift.pt strictly as
upstream's `load` does (no LM: its job is replaced by one that hands over the case's tokens and
ends, so the vocoder's draws are the only ones and happen on the main thread). A fresh model object
per case (upstream keeps a grown hop for later requests of the same object). Each case runs after
`torch.manual_seed(seed)`. Writes chunk_<k>_<j> and info {"chunks": [count per case]}.
"""

from __future__ import annotations

import torch
from cosyvoice.cli.model import CosyVoice2Model, CosyVoice3Model
from hyperpyyaml import load_hyperpyyaml
from oracle_io import read_job, write_results
from safetensors.torch import load_file

SEEDS = "__set_seed1: !apply:random.seed [1986]\n__set_seed2: !apply:numpy.random.seed [1986]\n__set_seed3: !apply:torch.manual_seed [1986]\n"


def main() -> None:
    job, out = read_job()
    configs = load_hyperpyyaml(SEEDS + job["yaml"])
    flow, hift = configs["flow"], configs["hift"]
    flow.load_state_dict(torch.load(job["flow"], map_location="cpu", weights_only=True), strict=True)
    flow.eval()
    state = {k.replace("generator.", ""): v for k, v in torch.load(job["hift"], map_location="cpu", weights_only=True).items()}
    hift.load_state_dict(state, strict=True)
    hift.eval()
    cls = CosyVoice3Model if job["version"] == 3 else CosyVoice2Model
    inputs = load_file(job["inputs"])
    tensors, counts = {}, []
    for k, case in enumerate(job["cases"]):
        i = case["input"]
        model = cls(None, flow, hift)
        tokens = inputs[f"token_{i}"][0].tolist()

        def fake_llm(text, prompt_text, llm_prompt_speech_token, llm_embedding, uuid, model=model, tokens=tokens):
            model.tts_speech_token_dict[uuid].extend(tokens)
            model.llm_end_dict[uuid] = True

        model.llm_job = fake_llm
        torch.manual_seed(case.get("seed", 0))
        chunks = model.tts(
            flow_embedding=inputs[f"embedding_{i}"],
            flow_prompt_speech_token=inputs[f"prompt_token_{i}"].to(torch.int32),
            prompt_speech_feat=inputs[f"prompt_feat_{i}"],
            stream=case.get("stream", False),
            speed=case.get("speed", 1.0),
        )
        n = 0
        for j, chunk in enumerate(chunks):
            tensors[f"chunk_{k}_{j}"] = chunk["tts_speech"]
            n += 1
        counts.append(n)
    write_results(out, tensors, {"chunks": counts})


if __name__ == "__main__":
    main()
