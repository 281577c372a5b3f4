"""Upstream's model-level LM job: `CosyVoice2Model/CosyVoice3Model.llm_job`, which runs
`llm.inference` (or `inference_bistream` for streamed text) and keeps the tokens the model then
vocodes (v3 drops silent tokens past five in a row).

Job: {"folders": [...], "cases": [{"text": ids, "prompt_text": ids, "prompt_speech": tokens,
"seed": n}]}. The model is built as upstream's constructors build it (its LM with `llm.pt`
loaded strictly; flow and vocoder as the yaml builds them, unused here); each case calls
`llm_job` directly (the thread upstream runs it in is joined before anything else reads its
tokens) after `torch.manual_seed(seed)`. Writes tokens_<f>_<i> (what `tts_speech_token_dict` holds)
and raw_<f>_<i> (what `llm.inference` yielded, from a second run with the same seed).
"""

from __future__ import annotations

import torch
from common import load_lm, read_job, write_results
from cosyvoice.cli.model import CosyVoice2Model, CosyVoice3Model


def main() -> None:
    job, out = read_job()
    tensors = {}
    for f, folder in enumerate(job["folders"]):
        llm, configs, version = load_lm(folder)
        model = (CosyVoice3Model if version == 3 else CosyVoice2Model)(llm, configs["flow"], configs["hift"])
        for i, case in enumerate(job["cases"]):
            text = torch.tensor([case["text"]], dtype=torch.int32)
            prompt_text = torch.tensor([case["prompt_text"]], dtype=torch.int32).reshape(1, -1)
            prompt_speech = torch.tensor([case["prompt_speech"]], dtype=torch.int32).reshape(1, -1)
            uuid = f"case-{f}-{i}"
            model.tts_speech_token_dict[uuid] = []
            torch.manual_seed(case["seed"])
            model.llm_job(text, prompt_text, prompt_speech, torch.zeros(1, 192), uuid)
            tensors[f"tokens_{f}_{i}"] = torch.tensor(model.tts_speech_token_dict.pop(uuid), dtype=torch.int64)
            torch.manual_seed(case["seed"])
            raw = llm.inference(
                text=text,
                text_len=torch.tensor([text.shape[1]], dtype=torch.int32),
                prompt_text=prompt_text,
                prompt_text_len=torch.tensor([prompt_text.shape[1]], dtype=torch.int32),
                prompt_speech_token=prompt_speech,
                prompt_speech_token_len=torch.tensor([prompt_speech.shape[1]], dtype=torch.int32),
                embedding=torch.zeros(1, 192),
            )
            tensors[f"raw_{f}_{i}"] = torch.tensor(list(raw), dtype=torch.int64)
    write_results(out, tensors, {})


if __name__ == "__main__":
    main()
