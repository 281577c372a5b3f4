"""Upstream's speech-token LM on streamed text: `llm.inference_bistream` as `CosyVoiceModel.llm_job`
calls it when the text is a generator (the front end yields each piece's ids one at a time).

Job: {"folders": [...], "cases": [{"pieces": [[ids], ...], "split": bool, "prompt_text": ids,
"prompt_speech": tokens, "seed": n, "limit": n}]}. With "split" each piece's ids arrive one at a
time, as upstream's front end hands them over; without, each piece arrives whole (the LM takes
either). Each case runs after `torch.manual_seed(seed)` and reads at most `limit` tokens
(upstream's last phase has no length limit). Writes tokens_<f>_<i> and, per case, how it ended:
"end" (the generator finished), "limit", or "error: <message>".
"""

from __future__ import annotations

import torch
from common import load_lm, read_job, write_results


def _pieces(pieces: list[list[int]], split: bool):
    for piece in pieces:
        if split:
            for token in piece:  # as upstream's front end yields a piece's ids: one (1, 1) tensor each
                yield torch.tensor([[token]], dtype=torch.int32)
        else:
            yield torch.tensor([piece], dtype=torch.int32)


def main() -> None:
    job, out = read_job()
    tensors, ends = {}, []
    for f, folder in enumerate(job["folders"]):
        llm, _, _ = load_lm(folder)
        found = []
        for i, case in enumerate(job["cases"]):
            prompt_text = torch.tensor([case["prompt_text"]], dtype=torch.int32).reshape(1, -1)
            prompt_speech = torch.tensor([case["prompt_speech"]], dtype=torch.int32).reshape(1, -1)
            torch.manual_seed(case["seed"])
            tokens, end = [], "end"
            stream = llm.inference_bistream(
                text=_pieces(case["pieces"], case["split"]),
                prompt_text=prompt_text,
                prompt_text_len=torch.tensor([prompt_text.shape[1]], dtype=torch.int32),
                prompt_speech_token=prompt_speech,
                prompt_speech_token_len=torch.tensor([prompt_speech.shape[1]], dtype=torch.int32),
                embedding=torch.zeros(1, 192),
            )
            try:
                for token in stream:
                    tokens.append(token)
                    if len(tokens) == case["limit"]:
                        end = "limit"
                        break
            except (ValueError, AssertionError) as e:
                end = f"error: {e}"
            tensors[f"tokens_{f}_{i}"] = torch.tensor(tokens, dtype=torch.int64)
            found.append(end)
        ends.append(found)
    write_results(out, tensors, {"ends": ends})


if __name__ == "__main__":
    main()
