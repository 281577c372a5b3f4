"""Upstream's side of the `chinese` golden: GPT-SoVITS v2's `text/chinese2.py` (text_normalize, g2p) with
its G2PW converter over the stand-in model folder, on each sentence of the corpus.

Run by the oracle's python as `golden_chinese.py <folder> <out.npz>` in a fresh working folder: upstream
reads `GPT_SoVITS/text/G2PWModel` relative to it (linked here to `<folder>/G2PWModel`) and the tokenizer
from `bert_path` (`<folder>/bert`).

Writes `cases` (JSON: per sentence its text, norm_text, phones, word2ph, and G2PW's batch and pinyin as
`g2p` asked for them), and for each onnxruntime call `callN.<input>` (the network's inputs), `callN.label`
(the argmax) and `callN.gap` (each row's top probability less its second: how far from a tie).
"""

import json
import os
import sys
from pathlib import Path

import numpy as np

folder, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
Path("GPT_SoVITS/text").mkdir(parents=True, exist_ok=True)
if not Path("GPT_SoVITS/text/G2PWModel").exists():
    os.symlink(folder / "G2PWModel", "GPT_SoVITS/text/G2PWModel")
os.environ["bert_path"] = str(folder / "bert")

import torch  # noqa: E402

torch.set_num_threads(1)

from text import chinese2  # noqa: E402

calls = []
session = chinese2.g2pw._g2pw.session_g2pw


class Recording:
    def run(self, names, feeds):
        probs = session.run(names, feeds)
        p = probs[0]
        top2 = np.sort(p, axis=1)[:, -2:] if p.shape[1] > 1 else np.concatenate([np.zeros_like(p), p], axis=1)
        calls.append({**{k: np.asarray(v) for k, v in feeds.items()}, "label": np.argmax(p, axis=1), "gap": (top2[:, 1] - top2[:, 0]).astype(np.float32)})
        return probs


chinese2.g2pw._g2pw.session_g2pw = Recording()
converter = chinese2.g2pw._g2pw
batches = []


def recording_g2pw(batch):
    result = converter(batch)
    batches.append({"batch": list(batch), "pinyin": result})
    return result


chinese2.g2pw._g2pw = recording_g2pw

cases = []
for text in json.loads((folder / "corpus.json").read_text(encoding="utf-8")):
    batches.clear()
    norm = chinese2.text_normalize(text)
    phones, word2ph = chinese2.g2p(norm)
    cases.append({"text": text, "norm": norm, "phones": phones, "word2ph": word2ph, "g2pw": list(batches)})

arrays = {"cases": np.array(json.dumps(cases, ensure_ascii=False)), "state_sha256": np.array((folder / "state_sha256.txt").read_text().strip())}
for i, call in enumerate(calls):
    for k, v in call.items():
        arrays[f"call{i}.{k}"] = v
np.savez_compressed(out, **arrays)
print(
    f"{len(cases)} sentences, {len(calls)} G2PW calls, {sum(len(c['label']) for c in calls)} queries, min gap {min(float(c['gap'].min()) for c in calls):.3g}"
)
