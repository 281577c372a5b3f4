"""Upstream's `AutoModel(model_dir=...)` as a user drives it, for the drop-in's parity tests
(test_cosyvoice_compat_*.py): text arriving as a generator, saved speakers (`add_zero_shot_spk`,
`save_spkinfo`, a folder's own `spk2info.pt`), `inference_sft`, and streams one after another on
one object (upstream keeps the hop a stream grew to for the next one).

Job: {"folders": [...], "clips": [wav paths],
"speakers": [{"folder": i, "id": name, "prompt_text": str, "prompt": clip index}] (added with
`add_zero_shot_spk` before any case; then each folder's whole speaker table is saved with
`save_spkinfo` into a scratch folder and read back with `torch.load(weights_only=True)`),
"cases": [{"folder": i, "mode" ("zero_shot", "cross_lingual", "instruct2", "vc", "sft"),
"text" (a string, or a list of strings handed over as a generator), "prompt_text", "instruct_text",
"prompt" (clip index), "source" (clip index), "spk" (a speaker id: `zero_shot_spk_id`, or `spk_id`
for sft), "stream", "speed", "text_frontend", "seed", "keep_hop" (start at the hop the previous stream left; by
default the hop is reset to 25, a freshly loaded model's)}], "cap": n}.

Upstream runs its LM in a thread: an error there is printed and lost, and a stream then waits
forever; its streamed-text decoding has no length limit. So the LM's thread is wrapped: an error
is recorded (info "failures") and ends the LM as a finished one, and a streamed-text LM is stopped
after `cap` tokens (recorded as a failure too). Cases run in order, each after
`torch.manual_seed(seed)`.

Writes speech_<k>_<j> (the j-th `tts_speech` of case k), embedding_<k> (onnxruntime's speaker
embedding of the case's prompt, where one was made), spk_embedding_<f>_<id> (the embedding a
speaker added to folder f got), table_<f>_<id>_<key> (folder f's saved speaker table), and info {"chunks":
[count per case], "errors": {k: message}, "failures": {k: [LM thread errors]}, "hops": [the
model's hop after each case], "tables": {f: {id: [keys]}}}.
"""

from __future__ import annotations

import os
import tempfile

import torch
from common import load_model, read_job, write_results


class _Runaway(Exception):
    pass


def _guard(model, failures: list, cap: int) -> None:
    """Make the LM's thread end however the LM does (see the docstring)."""
    core = model.model
    run = core.llm_job
    bistream = core.llm.inference_bistream

    def capped(*args, **kwargs):
        for n, token in enumerate(bistream(*args, **kwargs)):
            if n >= cap:
                raise _Runaway(f"streamed-text decoding past {cap} tokens")
            yield token

    def llm_job(text, prompt_text, llm_prompt_speech_token, llm_embedding, uuid):
        try:
            run(text, prompt_text, llm_prompt_speech_token, llm_embedding, uuid)
        except Exception as e:  # noqa: BLE001 - upstream's thread would print it and hang the stream
            failures.append(f"{type(e).__name__}: {e}")
            core.llm_end_dict[uuid] = True

    core.llm_job = llm_job
    core.llm.inference_bistream = capped


def _record_embeddings(frontend, tensors: dict) -> None:
    extract = frontend._extract_spk_embedding

    def recorded(prompt_wav):
        embedding = extract(prompt_wav)
        tensors[frontend.label] = embedding.contiguous()
        return embedding

    frontend._extract_spk_embedding = recorded


def _generator(texts: list[str]):
    yield from texts


def _run(model, case: dict, clips: list[str]):
    mode, stream, speed = case["mode"], case.get("stream", False), case.get("speed", 1.0)
    text = case.get("text", "")
    if isinstance(text, list):
        text = _generator(text)
    spk = case.get("spk", "")
    prompt = "" if spk else clips[case.get("prompt", 0)]
    kw = {"stream": stream, "speed": speed, "text_frontend": case.get("text_frontend", True)}
    if mode == "zero_shot":
        return model.inference_zero_shot(text, case.get("prompt_text", ""), prompt, zero_shot_spk_id=spk, **kw)
    if mode == "cross_lingual":
        return model.inference_cross_lingual(text, prompt, zero_shot_spk_id=spk, **kw)
    if mode == "instruct2":
        return model.inference_instruct2(text, case.get("instruct_text", ""), prompt, zero_shot_spk_id=spk, **kw)
    if mode == "sft":
        return model.inference_sft(text, spk, **kw)
    if mode == "vc":
        return model.inference_vc(clips[case["source"]], prompt, stream=stream, speed=speed)
    raise ValueError(f"unknown mode {mode!r}")


def _saved_table(model, f: int, tensors: dict) -> dict:
    """`save_spkinfo` into a scratch folder, read back as a user's next load would read it."""
    keys = {}
    with tempfile.TemporaryDirectory() as scratch:
        model_dir, model.model_dir = model.model_dir, scratch
        try:
            model.save_spkinfo()
        finally:
            model.model_dir = model_dir
        table = torch.load(os.path.join(scratch, "spk2info.pt"), map_location="cpu", weights_only=True)
    for name, entry in table.items():
        keys[name] = sorted(entry)
        for key, value in entry.items():
            tensors[f"table_{f}_{name}_{key}"] = value.clone()  # entries share tensors (llm_ and flow_)
    return keys


def main() -> None:
    job, out = read_job()
    clips, cap = job["clips"], job.get("cap", 2000)
    models = [load_model(folder) for folder in job["folders"]]
    tensors: dict[str, torch.Tensor] = {}
    failures: dict[str, list] = {}
    current: list = []
    for model in models:
        _record_embeddings(model.frontend, tensors)
        _guard(model, current, cap)
    for speaker in job.get("speakers", []):
        model = models[speaker["folder"]]
        model.frontend.label = f"spk_embedding_{speaker['folder']}_{speaker['id']}"
        model.add_zero_shot_spk(speaker["prompt_text"], clips[speaker["prompt"]], speaker["id"])
    tables = {str(f): _saved_table(model, f, tensors) for f, model in enumerate(models) if model.frontend.spk2info}
    counts, errors, hops = [], {}, []
    for k, case in enumerate(job["cases"]):
        model = models[case["folder"]]
        model.frontend.label = f"embedding_{k}"
        if not case.get("keep_hop", False):
            model.model.token_hop_len = 25
        current.clear()
        torch.manual_seed(case.get("seed", 0))
        n = 0
        try:
            for j, output in enumerate(_run(model, case, clips)):
                tensors[f"speech_{k}_{j}"] = output["tts_speech"].contiguous()
                n += 1
        except Exception as e:  # noqa: BLE001 - upstream's errors are part of what is compared
            errors[str(k)] = f"{type(e).__name__}: {e}"
        if current:
            failures[str(k)] = list(current)
        counts.append(n)
        hops.append(int(model.model.token_hop_len))
    write_results(out, tensors, {"chunks": counts, "errors": errors, "failures": failures, "hops": hops, "tables": tables})


if __name__ == "__main__":
    main()
