"""Upstream's side of the `t2s` and `t2s_batch` goldens: its AR model loaded from koe's GPT file as
`TTS.init_t2s_weights` loads it, and decoded with the arguments `TTS.run` passes.

Loading: `torch.load` of the `.ckpt`, `Text2SemanticLightningModule(config, "****",
is_train=False)`, a strict `load_state_dict(dict_s1["weight"])` (float16 into float32), eval;
`early_stop_num = 50 * config["data"]["max_sec"]` unless the case gives one. Each case: the seed
set right before the call (`torch.manual_seed`, as `TTS.run`'s `set_seed` ends), then
`infer_panel_naive_batched` (`parallel_infer=False`) or `infer_panel_batch_infer` (True) on the
case's rows: `all_phones` (a list of (T,) int64), `all_phones_len`, the prompt tokens expanded to
the rows (None without a prompt), `all_bert_features` (a list of (1024, T)), `top_k`, `top_p`,
`temperature`, `early_stop_num`, `max_len` (the longest row) and `repetition_penalty`.

Recorded per case: `<case>.row.<i>` each row upstream returns (prompt + tokens), `<case>.idx` its
`idx_list`, `<case>.first_logits` the `ar_predict_layer` output of each decoding's first step
(the prompt pass: one per row serially, one (B, V) for the batch), `<case>.early_stop_num`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from AR.models.t2s_lightning_module import Text2SemanticLightningModule  # noqa: E402

HZ = 50  # TTS.init_t2s_weights: configs.hz


def load(path: Path):
    dict_s1 = torch.load(path, map_location="cpu", weights_only=False)
    config = dict_s1["config"]
    module = Text2SemanticLightningModule(config, "****", is_train=False)
    module.load_state_dict(dict_s1["weight"])  # strict: the fixture's names are exactly upstream's
    return module.eval().model, HZ * config["data"]["max_sec"]


def main(folder: Path, out: Path, method: str) -> None:
    torch.set_num_threads(1)
    model, early_stop_default = load(folder / "s1.ckpt")
    arrays = dict(np.load(folder / "inputs.npz"))
    cases = json.loads((folder / "cases.json").read_text())
    result: dict[str, np.ndarray] = {"state_sha256": np.array((folder / "state_sha256.txt").read_text().split()[0])}
    captured: list[torch.Tensor] = []
    armed = [False]

    def hook(_module, _args, output):
        if armed[0]:
            captured.append(output.detach().clone())
            armed[0] = False

    model.ar_predict_layer.register_forward_hook(hook)
    naive = model.infer_panel_naive

    def armed_naive(*args, **kwargs):
        armed[0] = True
        return naive(*args, **kwargs)

    model.infer_panel_naive = armed_naive
    for name, case in cases.items():
        phones = [torch.from_numpy(arrays[f"phones.{t}"]) for t in case["texts"]]
        bert = [torch.from_numpy(arrays[f"bert.{t}"]) for t in case["texts"]]
        prompt = torch.from_numpy(arrays["prompt"]).expand(len(phones), -1) if case["prompt"] else None
        early_stop_num = early_stop_default if case["early_stop_num"] is None else case["early_stop_num"]
        captured.clear()
        armed[0] = True
        torch.manual_seed(case["seed"])
        with torch.no_grad():
            rows, idx_list = getattr(model, method)(
                phones,
                torch.LongTensor([p.shape[-1] for p in phones]),
                prompt,
                bert,
                top_k=case["top_k"],
                top_p=case["top_p"],
                temperature=case["temperature"],
                early_stop_num=early_stop_num,
                max_len=max(p.shape[-1] for p in phones),
                repetition_penalty=case["repetition_penalty"],
            )
        for i, row in enumerate(rows):
            result[f"{name}.row.{i}"] = row.numpy()
        result[f"{name}.idx"] = np.array(idx_list, dtype=np.int64)
        result[f"{name}.first_logits"] = torch.cat(captured).numpy()
        result[f"{name}.early_stop_num"] = np.array(early_stop_num)
        print(name, [len(r) for r in rows], idx_list, file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)
