"""The `qwen_emotion` golden, upstream's side: IndexTTS 2's emotion from a text, upstream's `QwenEmotion`
(indextts/infer_v2.py) run on koe's tiny emotion LM folders.

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_indextts/golden_qwen_emotion.py <folder> <out.npz>
`folder` holds what tests/engines/indextts/golden_qwen_emotion.py `write_inputs` wrote. Upstream imports
`AutoModelForCausalLM` from modelscope, whose class hands a local folder to transformers' own
`from_pretrained` with the same arguments: transformers' class stands in for it here. `QwenEmotion(folder)`
loads the LM as upstream does (`torch_dtype="float16"`, `device_map="auto"`: the CPU here); the float32
cases load it again with `torch_dtype` float32 (koe's exact path). The window folder's cases (a `sliding_window` in its config,
shorter than the prompts: transformers' SDPA then gets its additive causal mask) record the generated ids. Per case, after `torch.manual_seed(seed)`:
`inference(text)`, with the prompt's ids, the generated ids and the decoded answer it made on the way
(recorded by wrapping the tokenizer's and the model's calls), its emotion weights or the error it raised.
The fixed answers go through `inference`'s parsing with a tokenizer and model standing in that give the
answer. The tied folder gives its last logits of a prompt (`logits_to_keep=1`, as generate asks): their hash and
their first 1,024.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from common import recorded_hashes, sha, stand_in_missing  # noqa: E402


def upstream():
    stand_in_missing()
    import indextts.infer_v2 as v2

    v2.AutoModelForCausalLM = transformers.AutoModelForCausalLM  # modelscope's wrapper, for a local folder
    return v2


def load(v2, folder: Path, dtype: str):
    """`QwenEmotion(folder)`; float32: its `from_pretrained` call with `torch_dtype` float32."""
    if dtype == "float16":
        return v2.QwenEmotion(str(folder))
    original = transformers.AutoModelForCausalLM.from_pretrained

    def float32(*args, **kwargs):
        assert kwargs.get("torch_dtype") == "float16", kwargs
        return original(*args, **{**kwargs, "torch_dtype": torch.float32})

    v2.AutoModelForCausalLM = type("Float32", (), {"from_pretrained": staticmethod(float32)})
    try:
        return v2.QwenEmotion(str(folder))
    finally:
        v2.AutoModelForCausalLM = transformers.AutoModelForCausalLM


def weights_or_error(result: dict, key: str, call) -> None:
    try:
        emotions = call()
    except Exception as e:  # noqa: BLE001 - what upstream raises is the golden's answer
        result[f"{key}.error"] = np.array(type(e).__name__)
        return
    assert list(emotions) == ["happy", "angry", "sad", "afraid", "disgusted", "melancholic", "surprised", "calm"], emotions
    result[f"{key}.weights"] = np.array(list(emotions.values()), dtype=np.float64)


def recorded(qwen, record: dict):
    """Wrap the tokenizer's call and decode and the model's generate to record what they gave."""
    tokenizer, model = qwen.tokenizer, qwen.model
    call, decode, generate = type(tokenizer).__call__, tokenizer.decode, model.generate

    class Tokenizer(type(tokenizer)):
        def __call__(self, *args, **kwargs):
            out = call(self, *args, **kwargs)
            record["prompt"] = out["input_ids"][0].tolist()
            return out

    tokenizer.__class__ = Tokenizer

    def decoded(ids, **kwargs):
        record["answer"] = decode(ids, **kwargs)
        return record["answer"]

    def generated(**kwargs):
        out = generate(**kwargs)
        record["generated"] = out[0, kwargs["input_ids"].shape[1] :].tolist()
        return out

    tokenizer.decode, model.generate = decoded, generated


def prompt_text(qwen, text: str) -> str:
    messages = [{"role": "system", "content": qwen.prompt}, {"role": "user", "content": text}]
    return qwen.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, enable_thinking=False)


def last_logits(qwen, text: str) -> torch.Tensor:
    """The LM's last logits for `text`'s prompt, in float32 (`logits_to_keep=1`, as generate asks)."""
    inputs = qwen.tokenizer([prompt_text(qwen, text)], return_tensors="pt")
    with torch.no_grad():
        return qwen.model(**inputs, logits_to_keep=1).logits[:, -1, :].to(torch.float32)


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    setup = json.loads((folder / "setup.json").read_text(encoding="utf-8"))
    result = recorded_hashes(folder)
    v2 = upstream()
    texts = setup["texts"]
    for dtype in setup["dtypes"]:
        qwen = load(v2, folder / "untied", dtype)
        assert qwen.model.dtype == getattr(torch, dtype) and qwen.model.device.type == "cpu"
        record: dict = {}
        recorded(qwen, record)
        for t, seed in setup["cases"]:
            key = f"{dtype}.{t}.{seed}"
            record.clear()
            torch.manual_seed(seed)
            weights_or_error(result, key, lambda t=t, qwen=qwen: qwen.inference(texts[t]))
            result[f"{key}.prompt"] = np.array(record["prompt"], dtype=np.int64)
            result[f"{key}.generated"] = np.array(record["generated"], dtype=np.int64)
            result[f"{key}.answer"] = np.array(record["answer"])
        window = load(v2, folder / "window", dtype)
        record = {}
        recorded(window, record)
        for t, seed in setup["window_cases"]:
            key = f"{dtype}.window.{t}.{seed}"
            record.clear()
            torch.manual_seed(seed)
            weights_or_error(result, key, lambda t=t, window=window: window.inference(texts[t]))
            result[f"{key}.generated"] = np.array(record["generated"], dtype=np.int64)
        result[f"{dtype}.window.logits_sha256"] = sha(last_logits(window, texts[0]))
        tied = load(v2, folder / "tied", dtype)
        logits = last_logits(tied, texts[0])
        result[f"{dtype}.tied.logits_sha256"] = sha(logits)  # the whole row by its hash (151,936 scores), its start as it is
        result[f"{dtype}.tied.logits_head"] = logits[:, :1024].numpy()
        result["tied.prompt_text"] = np.array(prompt_text(tied, texts[0]))

    class Answer:  # a tokenizer and a model that give the fixed answer
        eos_token_id, device, text = 0, torch.device("cpu"), ""

        def apply_chat_template(self, *args, **kwargs):
            return ""

        def __call__(self, *args, **kwargs):
            return transformers.BatchEncoding({"input_ids": torch.zeros(1, 1, dtype=torch.long)})

        def generate(self, **kwargs):
            return torch.zeros(1, 2, dtype=torch.long)

        def decode(self, ids, skip_special_tokens=False):
            return Answer.text

    parser = qwen
    parser.tokenizer = parser.model = Answer()
    for i, (answer, text) in enumerate(setup["answers"]):
        Answer.text = answer
        weights_or_error(result, f"answer.{i}", lambda text=text: parser.inference(text))
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
