"""Upstream's speech-token LM: `llm.inference` as `CosyVoiceModel.llm_job` calls it.

Job: {"folders": released folders, "cases": [{"text": ids, "prompt_text": ids, "prompt_speech":
tokens, "seed": n}]}. Each folder's LM is built from its yaml and `llm.pt` loaded strictly
(`common.load_lm`); each case runs after `torch.manual_seed(seed)` with a zero speaker embedding
(these LMs do not read it). Writes tokens_<f>_<i> (int64) and, in the info, each folder's
version and number of `llm.pt` tensors.
"""

from __future__ import annotations

import torch
from common import load_lm, read_job, write_results


def main() -> None:
    job, out = read_job()
    tensors, info = {}, []
    for f, folder in enumerate(job["folders"]):
        llm, _, version = load_lm(folder)
        tensors.update({f"tokens_{f}_{i}": tokens for i, tokens in enumerate(run(llm, job["cases"]))})
        info.append({"version": version, "tensors": len(llm.state_dict())})
    write_results(out, tensors, {"folders": info})


def run(llm, cases: list[dict]) -> list[torch.Tensor]:
    found = []
    for case in cases:
        text = torch.tensor([case["text"]], dtype=torch.int32)
        prompt_text = torch.tensor([case["prompt_text"]], dtype=torch.int32).reshape(1, -1)
        prompt_speech = torch.tensor([case["prompt_speech"]], dtype=torch.int32).reshape(1, -1)
        torch.manual_seed(case["seed"])
        tokens = list(
            llm.inference(
                text=text,
                text_len=torch.tensor([text.shape[1]], dtype=torch.int32),
                prompt_text=prompt_text,
                prompt_text_len=torch.tensor([prompt_text.shape[1]], dtype=torch.int32),
                prompt_speech_token=prompt_speech,
                prompt_speech_token_len=torch.tensor([prompt_speech.shape[1]], dtype=torch.int32),
                embedding=torch.zeros(1, 192),
            )
        )
        found.append(torch.tensor(tokens, dtype=torch.int64))
    return found


if __name__ == "__main__":
    main()
