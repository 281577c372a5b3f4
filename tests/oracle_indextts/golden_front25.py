"""The `front25` golden, upstream's side: IndexTTS 2.5's text front end as `infer_v2_5.py` runs it.

Run in the oracle venv with upstream's source importable (openai-whisper, tiktoken, fugashi and
unidic-lite installed; NeMo's text processing not, as upstream's own dependencies leave it out):
    <oracle python> tests/oracle_indextts/golden_front25.py <folder> <out.npz>
`folder` holds what tests/engines/indextts/golden_front25.py `write_inputs` wrote.

The front end is the start of upstream's `IndexTTS2.infer_generator`, run unmodified on an
`IndexTTS2` made without its `__init__` (which loads every model): the attributes the text path
reads are set as `__init__` sets them (`get_tokenizer(multilingual=True, model_dir=folder)`,
`JapaneseG2PProcessor(g2p_ratio=0)`, `TextNormalizer(enable_glossary=True)` loaded with the folder's
`glossary.yaml`), the speaker and emotion caches hold placeholders for the same clip (so no audio is
read), and the GPT is a stand-in with the case's text positions whose `merge_emovec`, the first call
after the text is cut, takes the generator's locals (`text`, `segments`, `segment_tokens`, `lang`)
and stops the run. Per case `i` and limit `m`, after `random.seed(seed)`: `i.text` (the text before
cutting), `i.m{m}.segments`, `i.m{m}.ids` (every segment's ids, flat) and `i.m{m}.lengths`,
`i.lang` (the language id), `i.m{m}.random` (the sha256 of `random.getstate()` afterwards, as
JSON) and `i.m{m}.draws` (how many `random.random()` calls from the seed reach that state).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import recorded_hashes, skip_dac_package_inits, stand_in_missing  # noqa: E402

stand_in_missing()
skip_dac_package_inits()

from indextts.infer_v2_5 import IndexTTS2  # noqa: E402
from indextts.utils.front import TextNormalizer  # noqa: E402
from indextts.utils.ja_g2p import JapaneseG2PProcessor  # noqa: E402
from indextts.utils.tokenizer import get_tokenizer  # noqa: E402

CLIP = "clip.wav"


class TextCut(Exception):
    def __init__(self, local: dict) -> None:
        self.local = local


class StandInGPT:
    def __init__(self, positions: int) -> None:
        self.text_pos_embedding = SimpleNamespace(emb=SimpleNamespace(num_embeddings=positions))

    def merge_emovec(self, *args, **kwargs):
        raise TextCut(dict(sys._getframe(1).f_locals))


def state_hash() -> str:
    return hashlib.sha256(json.dumps(random.getstate()).encode()).hexdigest()


def draws(seed: int, target: str, most: int = 200) -> int:
    random.seed(seed)
    for k in range(most + 1):
        if state_hash() == target:
            return k
        random.random()
    return -1


def strings(items: list[str]) -> np.ndarray:
    return np.array(items, dtype=str) if items else np.zeros(0, dtype="<U1")


def main(folder: Path, out: Path) -> None:
    cases = json.loads((folder / "cases.json").read_text(encoding="utf-8"))
    tts = IndexTTS2.__new__(IndexTTS2)
    tts.device, tts.dtype, tts.gr_progress, tts.qwen_emo = "cpu", None, None, None
    tts.tokenizer = get_tokenizer(multilingual=True, model_dir=str(folder))
    tts.ja_text_process = JapaneseG2PProcessor(g2p_ratio=0)
    tts.text_process = TextNormalizer(enable_glossary=True)
    tts.text_process.load()
    assert tts.text_process.load_glossary_from_yaml(str(folder / "glossary.yaml"))
    placeholder = torch.zeros(1, 4, 8)
    tts.cache_spk_cond, tts.cache_s2mel_style, tts.cache_s2mel_prompt, tts.cache_mel = placeholder, placeholder, placeholder, placeholder
    tts.cache_spk_audio_prompt = tts.cache_emo_audio_prompt = CLIP
    tts.cache_emo_cond = placeholder
    result = recorded_hashes(folder)
    result["count"] = np.array(len(cases))
    for i, case in enumerate(cases):
        tts.gpt = StandInGPT(case["positions"])
        for m in case["limits"]:
            random.seed(case["seed"])
            run = tts.infer_generator(CLIP, case["text"], None, case["lang"], max_text_tokens_per_segment=m, text_normalization=case["normalize"])
            try:
                next(run)
                raise AssertionError("infer_generator went past the text front end")
            except TextCut as cut:
                local = cut.local
            after = state_hash()
            ids = [t[0].tolist() for t in local["segment_tokens"]]
            result[f"{i}.text"] = np.array(local["text"])
            result[f"{i}.lang"] = np.array(int(local["lang"][0]), dtype=np.int64)
            result[f"{i}.m{m}.segments"] = strings(local["segments"])
            result[f"{i}.m{m}.ids"] = np.array([x for s in ids for x in s], dtype=np.int64)
            result[f"{i}.m{m}.lengths"] = np.array([len(s) for s in ids], dtype=np.int64)
            result[f"{i}.m{m}.random"] = np.array(after)
            result[f"{i}.m{m}.draws"] = np.array(draws(case["seed"], after), dtype=np.int64)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
