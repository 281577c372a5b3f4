"""Upstream end to end: `AutoModel(model_dir=folder)` and its `inference_*` generators, as a user calls them.

Job: {"folders": [...], "clips": [wav paths], "cases": [{"folder": i, "mode" ("zero_shot",
"cross_lingual", "instruct2", "vc"), "text" (a string, or a list of strings: streamed text, handed
over as a generator), "prompt_text" (zero_shot) / "instruct_text" (instruct2), "prompt" (clip
index), "source" (clip index, vc), "stream", "speed", "text_frontend", "seed"}]}.

Each folder is loaded once; each case runs after `torch.manual_seed(seed)` (upstream's examples
reseed after loading, which reseeds everything) with the model's stream hop reset to its start
(upstream keeps the hop a stream grew to for the next one on the same object). Writes
speech_<k>_<j> (the j-th yielded `tts_speech` of case k), embedding_<k> (the speaker embedding
onnxruntime's CAM++ gave the case's prompt) and info {"chunks": [count per case],
"errors": {k: message}}.
"""

from __future__ import annotations

import torch
from common import load_model, read_job, write_results


def _pieces(texts: list[str]):
    yield from texts


def _run(model, case: dict, clips: list[str]):
    mode, stream, speed = case["mode"], case.get("stream", False), case.get("speed", 1.0)
    text = case.get("text", "")
    if isinstance(text, list):
        text = _pieces(text)
    frontend = case.get("text_frontend", True)
    prompt = clips[case["prompt"]]
    if mode == "zero_shot":
        return model.inference_zero_shot(text, case["prompt_text"], prompt, stream=stream, speed=speed, text_frontend=frontend)
    if mode == "cross_lingual":
        return model.inference_cross_lingual(text, prompt, stream=stream, speed=speed, text_frontend=frontend)
    if mode == "instruct2":
        return model.inference_instruct2(text, case["instruct_text"], prompt, stream=stream, speed=speed, text_frontend=frontend)
    if mode == "vc":
        return model.inference_vc(clips[case["source"]], prompt, stream=stream, speed=speed)
    raise ValueError(f"unknown mode {mode!r}")


def _record_embeddings(frontend, tensors: dict) -> None:
    """Keep each case's speaker embedding (onnxruntime's CAM++) as embedding_<k>."""
    extract = frontend._extract_spk_embedding

    def recorded(prompt_wav):
        embedding = extract(prompt_wav)
        tensors[f"embedding_{frontend.case}"] = embedding.contiguous()
        return embedding

    frontend._extract_spk_embedding = recorded


def main() -> None:
    job, out = read_job()
    models = [load_model(folder) for folder in job["folders"]]
    tensors, counts, errors = {}, [], {}
    for model in models:
        _record_embeddings(model.frontend, tensors)
    for k, case in enumerate(job["cases"]):
        model = models[case["folder"]]
        model.frontend.case = k
        model.model.token_hop_len = 25
        torch.manual_seed(case.get("seed", 0))
        n = 0
        try:
            for j, output in enumerate(_run(model, case, job["clips"])):
                tensors[f"speech_{k}_{j}"] = output["tts_speech"].contiguous()
                n += 1
        except (AssertionError, ValueError, RuntimeError) as e:
            errors[str(k)] = f"{type(e).__name__}: {e}"
        counts.append(n)
    write_results(out, tensors, {"chunks": counts, "errors": errors})


if __name__ == "__main__":
    main()
