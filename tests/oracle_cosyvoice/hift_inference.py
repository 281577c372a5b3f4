"""Upstream's HiFT vocoder on mels: `hift.inference` as CosyVoice2/3's model calls it.

Job: {"yaml": the flow and hift sections (fixtures_flow.yaml_sections), "hift": hift.pt,
"version": 2 | 3, "mels": safetensors of mel_<i> (1, 80, T), "calls": [{"mel": i, "seed": n,
"finalize": bool}]}. The yaml is built as upstream's CosyVoice2/3 build it (hyperpyyaml, in
document order after the 1986 seeds: the flow, whose decoder reseeds 0 and draws its noise, then
the vocoder, whose v3 source tables are drawn then), hift.pt loaded strictly as upstream's
`CosyVoice2Model.load` does; each call runs after `torch.manual_seed(seed)`.
Writes audio_<k>, source_<k>.
"""

from __future__ import annotations

import torch
from hyperpyyaml import load_hyperpyyaml
from oracle_io import read_job, write_results
from safetensors.torch import load_file

SEEDS = "__set_seed1: !apply:random.seed [1986]\n__set_seed2: !apply:numpy.random.seed [1986]\n__set_seed3: !apply:torch.manual_seed [1986]\n"


def main() -> None:
    job, out = read_job()
    configs = load_hyperpyyaml(SEEDS + job["yaml"])
    hift = configs["hift"]
    state = {k.replace("generator.", ""): v for k, v in torch.load(job["hift"], map_location="cpu", weights_only=True).items()}
    hift.load_state_dict(state, strict=True)
    hift.eval()
    mels = load_file(job["mels"])
    tensors = {}
    for k, call in enumerate(job["calls"]):
        torch.manual_seed(call.get("seed", 0))
        mel = mels[f"mel_{call['mel']}"]
        if job["version"] == 3:
            audio, source = hift.inference(speech_feat=mel, finalize=call.get("finalize", True))
        else:
            audio, source = hift.inference(speech_feat=mel)
        tensors[f"audio_{k}"], tensors[f"source_{k}"] = audio, source
    write_results(out, tensors, {"keys": len(state)})


if __name__ == "__main__":
    main()
