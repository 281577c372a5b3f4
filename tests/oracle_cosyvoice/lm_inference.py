"""Upstream's speech-token LM: `llm.inference` as `CosyVoiceModel.llm_job` calls it, and, for the
folders named in "llm_job", the model-level job itself (what the model keeps of the LM's tokens:
v3 drops silent tokens past five in a row).

Job: {"folders": released folders, "cases": [{"text": ids, "prompt_text": ids, "prompt_speech":
tokens, "seed": n}], "llm_job": [folder indices]}. Each folder's LM is built from its yaml and
`llm.pt` loaded strictly (`common.load_lm`); each case runs after `torch.manual_seed(seed)` with a
zero speaker embedding (these LMs do not read it). `llm_job` is called directly on the model
upstream's constructor builds (the thread upstream runs it in is joined before anything reads its
tokens), after the same seed. Writes tokens_<f>_<i> (int64), kept_<f>_<i> for the job's folders
and, in the info, each folder's version and number of `llm.pt` tensors.
"""

from __future__ import annotations

import torch
from common import load_lm, read_job, write_results
from cosyvoice.cli.model import CosyVoice2Model, CosyVoice3Model


def _inputs(case: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    text = torch.tensor([case["text"]], dtype=torch.int32)
    prompt_text = torch.tensor([case["prompt_text"]], dtype=torch.int32).reshape(1, -1)
    prompt_speech = torch.tensor([case["prompt_speech"]], dtype=torch.int32).reshape(1, -1)
    return text, prompt_text, prompt_speech


def inference(llm, case: dict) -> torch.Tensor:
    text, prompt_text, prompt_speech = _inputs(case)
    torch.manual_seed(case["seed"])
    tokens = llm.inference(
        text=text,
        text_len=torch.tensor([text.shape[1]], dtype=torch.int32),
        prompt_text=prompt_text,
        prompt_text_len=torch.tensor([prompt_text.shape[1]], dtype=torch.int32),
        prompt_speech_token=prompt_speech,
        prompt_speech_token_len=torch.tensor([prompt_speech.shape[1]], dtype=torch.int32),
        embedding=torch.zeros(1, 192),
    )
    return torch.tensor(list(tokens), dtype=torch.int64)


def llm_job(model, case: dict, uuid: str) -> torch.Tensor:
    text, prompt_text, prompt_speech = _inputs(case)
    model.tts_speech_token_dict[uuid] = []
    torch.manual_seed(case["seed"])
    model.llm_job(text, prompt_text, prompt_speech, torch.zeros(1, 192), uuid)
    return torch.tensor(model.tts_speech_token_dict.pop(uuid), dtype=torch.int64)


def main() -> None:
    job, out = read_job()
    tensors, info = {}, []
    for f, folder in enumerate(job["folders"]):
        llm, configs, version = load_lm(folder)
        for i, case in enumerate(job["cases"]):
            tensors[f"tokens_{f}_{i}"] = inference(llm, case)
        if f in job.get("llm_job", []):
            model = (CosyVoice3Model if version == 3 else CosyVoice2Model)(llm, configs["flow"], configs["hift"])
            for i, case in enumerate(job["cases"]):
                tensors[f"kept_{f}_{i}"] = llm_job(model, case, f"case-{f}-{i}")
        info.append({"version": version, "tensors": len(llm.state_dict())})
    write_results(out, tensors, {"folders": info})


if __name__ == "__main__":
    main()
