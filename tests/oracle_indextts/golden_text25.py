"""The `text25` golden, upstream's side: IndexTTS 2.5's tokenizer as `infer_v2_5` uses it.

Run in the oracle venv with upstream's source importable (openai-whisper and tiktoken installed):
    <oracle python> tests/oracle_indextts/golden_text25.py <folder> <out.npz>
`folder` holds what tests/engines/indextts/golden_text25.py `write_inputs` wrote: the vocabulary
file under its released name and `texts.json`. The tokenizer is `get_tokenizer(multilingual=True,
model_dir=folder)`, as `IndexTTS2.__init__` builds it. Per text `i` with its language: the segment's
ids as `infer_generator` makes them (`encode("<|lang|> " + text, allowed_special="all")` as an
IntTensor padded with a 1), `lang_to_token(lang)`, and `decode` of the ids (UTF-8 bytes). Also the
special tokens by name, in id order, and the vocabulary's size.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import recorded_hashes  # noqa: E402
from indextts.utils.tokenizer import get_tokenizer, lang_to_token  # noqa: E402


def main(folder: Path, out: Path) -> None:
    texts = json.loads((folder / "texts.json").read_text())
    tokenizer = get_tokenizer(multilingual=True, model_dir=str(folder))
    result = recorded_hashes(folder)
    for i, (text, lang) in enumerate(texts):
        lang_prefix = f"<|{lang.lower()}|> "
        toks = torch.IntTensor(tokenizer.encode(lang_prefix + text, allowed_special="all")).unsqueeze(0)
        ids = F.pad(toks, (0, 1), value=1)
        result[f"{i}.ids"] = ids[0].numpy().astype(np.int64)
        result[f"{i}.lang"] = np.array(lang_to_token(lang), dtype=np.int64)
        result[f"{i}.decoded"] = np.frombuffer(tokenizer.decode(ids[0].tolist()).encode(), dtype=np.uint8)
    specials = sorted(tokenizer.special_tokens.items(), key=lambda kv: kv[1])
    result["special_names"] = np.array([name for name, _ in specials])
    result["special_ids"] = np.array([i for _, i in specials], dtype=np.int64)
    result["n_vocab"] = np.array(tokenizer.encoding.n_vocab, dtype=np.int64)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
