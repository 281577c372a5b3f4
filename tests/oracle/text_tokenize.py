"""Oracle: upstream's processor ids for texts, per model folder.

Job: {"folders": [path, ...], "texts": [str, ...], "decode": [[id, ...], ...]}.
Info: {"folders": [{"ids": [[...], ...], "decoded": [str, ...], "split_regex": str, "vocab_size": int}, ...]},
one a folder in the job's order (no paths: a recorded run is replayed in another folder).
The processor is loaded as `Qwen3TTSModel.from_pretrained` loads it (registration, then
`AutoProcessor.from_pretrained(folder, fix_mistral_regex=True)`) and called as `_tokenize_texts` calls it.
"""

from __future__ import annotations

import json

from common import read_job, write_results


def load_processor(folder: str):
    from qwen_tts.core.models import Qwen3TTSConfig, Qwen3TTSForConditionalGeneration, Qwen3TTSProcessor
    from transformers import AutoConfig, AutoModel, AutoProcessor

    AutoConfig.register("qwen3_tts", Qwen3TTSConfig, exist_ok=True)
    AutoModel.register(Qwen3TTSConfig, Qwen3TTSForConditionalGeneration, exist_ok=True)
    AutoProcessor.register(Qwen3TTSConfig, Qwen3TTSProcessor, exist_ok=True)
    return AutoProcessor.from_pretrained(folder, fix_mistral_regex=True)


def split_pattern(tokenizer) -> str:
    state = json.loads(tokenizer.backend_tokenizer.to_str())
    return state["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]


def main() -> None:
    job, out = read_job()
    info = {"folders": []}
    for folder in job["folders"]:
        processor = load_processor(folder)
        ids = []
        for text in job["texts"]:
            batch = processor(text=text, return_tensors="pt", padding=True)
            input_ids = batch["input_ids"]
            input_ids = input_ids.unsqueeze(0) if input_ids.dim() == 1 else input_ids
            ids.append(input_ids[0].tolist())
        info["folders"].append(
            {
                "ids": ids,
                "decoded": [processor.decode(d) for d in job.get("decode", [])],
                "split_regex": split_pattern(processor.tokenizer),
                "tokenizer_class": type(processor.tokenizer).__name__,
                "vocab_size": processor.tokenizer.vocab_size,
            }
        )
    write_results(out, {}, info)


if __name__ == "__main__":
    main()
