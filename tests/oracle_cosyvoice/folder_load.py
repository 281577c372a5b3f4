"""Upstream's `AutoModel(model_dir=folder)` on whole released folders: every part loaded as
upstream loads it (`llm.pt`, `flow.pt`, `hift.pt` with `strict=True`; the ONNX graphs in
onnxruntime sessions; the tokenizer from `CosyVoice-BlankEN`).

Job: {"folders": [...]}. Writes, per folder, the class upstream chose, its sample rate, the number
of tensors of each state dict, the special-token ids its tokenizer gave ("<|endofprompt|>",
"[breath]", and v3's "<|endofsystem|>"), and what the yaml built (the LM's sizes, ids and
sampling arguments, the tokenizer's and mel features' arguments). Also the text of upstream's
own yamls of the released architectures (`examples/libritts/cosyvoice{2,3}/conf/`), for koe's
reader to read.
"""

from __future__ import annotations

import os

import cosyvoice
from common import load_model, read_configs, read_job, write_results


def built(folder: str) -> dict:
    """What upstream's yaml loader built from the folder's yaml, as plain values."""
    configs, _ = read_configs(folder)
    llm = configs["llm"]
    return {
        "sample_rate": configs["sample_rate"],
        "token_frame_rate": configs["token_frame_rate"],
        "token_mel_ratio": configs["token_mel_ratio"],
        "chunk_size": configs["chunk_size"],
        "llm_class": type(llm).__name__,
        "llm_input_size": llm.llm_input_size,
        "llm_output_size": llm.llm_output_size,
        "speech_token_size": llm.speech_token_size,
        "ids": [llm.sos, llm.task_id, llm.eos_token, llm.fill_token],
        "stop_token_ids": llm.stop_token_ids,
        "mix_ratio": list(llm.mix_ratio),
        "sampling": dict(llm.sampling.keywords),
        "tokenizer": {k: v for k, v in configs["get_tokenizer"].keywords.items() if k != "token_path"},
        "feat_extractor": dict(configs["feat_extractor"].keywords),
        "allowed_special": configs["allowed_special"],
    }


def main() -> None:
    job, out = read_job()
    found = []
    for folder in job["folders"]:
        model = load_model(folder)
        tokenizer = model.frontend.tokenizer.tokenizer
        special = {t: tokenizer.convert_tokens_to_ids(t) for t in ("<|endofprompt|>", "[breath]", "<|endofsystem|>", "[mn]")}
        found.append(
            {
                "class": type(model).__name__,
                "sample_rate": model.sample_rate,
                "llm": len(model.model.llm.state_dict()),
                "flow": len(model.model.flow.state_dict()),
                "hift": len(model.model.hift.state_dict()),
                "special": special,
                "vocabulary": len(tokenizer),
                "built": built(folder),
            }
        )
    examples = os.path.join(os.path.dirname(os.path.dirname(cosyvoice.__file__)), "examples", "libritts")
    released = {}
    for v in (2, 3):
        with open(os.path.join(examples, f"cosyvoice{v}", "conf", f"cosyvoice{v}.yaml")) as f:
            released[str(v)] = f.read()
    write_results(out, {}, {"folders": found, "released_yamls": released})


if __name__ == "__main__":
    main()
