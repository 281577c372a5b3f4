"""Upstream's flow on speech tokens: `flow.inference` as CosyVoice2/3's model calls it.

Job: {"yaml": the flow and hift sections (fixtures_flow.yaml_sections), "flow": flow.pt,
"inputs": safetensors of token_<i>, prompt_token_<i> (int64 (1, n)), prompt_feat_<i> (1, 2p, 80),
embedding_<i> (1, 192), "cases": [{"input": i, "streaming": bool, "finalize": bool}]}. The flow is
built from the yaml (hyperpyyaml, after the 1986 seeds) and flow.pt loaded strictly, as upstream's
`CosyVoice2Model.load`; tokens go in as int32, as the model passes them. Writes mel_<k>.
"""

from __future__ import annotations

import torch
from hyperpyyaml import load_hyperpyyaml
from oracle_io import read_job, write_results
from safetensors.torch import load_file

SEEDS = "__set_seed1: !apply:random.seed [1986]\n__set_seed2: !apply:numpy.random.seed [1986]\n__set_seed3: !apply:torch.manual_seed [1986]\n"


def main() -> None:
    job, out = read_job()
    flow = load_hyperpyyaml(SEEDS + job["yaml"])["flow"]
    state = torch.load(job["flow"], map_location="cpu", weights_only=True)
    flow.load_state_dict(state, strict=True)
    flow.eval()
    inputs = load_file(job["inputs"])
    tensors = {}
    for k, case in enumerate(job["cases"]):
        i = case["input"]
        token, prompt_token = inputs[f"token_{i}"].to(torch.int32), inputs[f"prompt_token_{i}"].to(torch.int32)
        mel, _ = flow.inference(
            token=token,
            token_len=torch.tensor([token.shape[1]], dtype=torch.int32),
            prompt_token=prompt_token,
            prompt_token_len=torch.tensor([prompt_token.shape[1]], dtype=torch.int32),
            prompt_feat=inputs[f"prompt_feat_{i}"],
            prompt_feat_len=torch.tensor([inputs[f"prompt_feat_{i}"].shape[1]], dtype=torch.int32),
            embedding=inputs[f"embedding_{i}"],
            streaming=case.get("streaming", False),
            finalize=case.get("finalize", True),
        )
        tensors[f"mel_{k}"] = mel
    write_results(out, tensors, {"keys": len(state)})


if __name__ == "__main__":
    main()
