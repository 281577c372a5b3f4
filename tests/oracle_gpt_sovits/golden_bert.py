"""The `bert` golden, upstream's side: GPT-SoVITS's BERT text features as `TTS.init_bert_weights`
loads the model (`AutoTokenizer` / `AutoModelForMaskedLM.from_pretrained(folder)`) and
`TextPreprocessor` computes them.

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_gpt_sovits/golden_bert.py <folder> <out.npz>
`folder` holds what tests/engines/gpt_sovits/golden_bert.py `write_inputs` wrote. The script fails
unless the checkpoint's tensors are exactly the ones the model loads (the head's decoder bias is
tied, as transformers ties it).

Recorded: `state_sha256`; per tokenizer text `i`, `tokens.<i>` (tokenizer.json's input ids) and
`tokens_vocab.<i>` (the vocab.txt-only folder's), `type_ids.<i>`; per encoder text, `hidden.<i>.<k>`
(the sha256 of every hidden state) and `hidden_batch.<k>` (the two texts as one padded batch,
`padding=True`); per characters case, `characters.<i>` (`get_bert_feature`: the array for the
first, sha256 and shape for the rest); per pieces case, `pieces.<name>.sha256` / `.shape` /
`.phones` (`get_phones_and_bert` with `LangSegmenter.getTexts` and `clean_text_inf` answering from
the case) and `.head` (its first 8 columns).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from oracle_arrays import sha  # noqa: E402
from transformers import AutoModelForMaskedLM, AutoTokenizer  # noqa: E402


def check_keys(folder: Path, model) -> None:
    saved = set(torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True))
    held = set(model.state_dict()) | {"bert.embeddings.position_ids"}
    if saved != held:
        raise SystemExit(f"pytorch_model.bin does not fit upstream's BERT: missing {sorted(held - saved)[:8]}, unexpected {sorted(saved - held)[:8]}")


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    cases = json.loads((folder / "cases.json").read_text(encoding="utf-8"))
    result: dict[str, np.ndarray] = {"state_sha256": np.array((folder / "state_sha256.txt").read_text().split()[0])}

    tokenizer = AutoTokenizer.from_pretrained(str(folder / "bert"))
    vocab_tokenizer = AutoTokenizer.from_pretrained(str(folder / "bert_vocab"))
    for i, text in enumerate(cases["tokenizer_texts"]):
        enc = tokenizer(text)
        result[f"tokens.{i}"] = np.array(enc["input_ids"])
        result[f"type_ids.{i}"] = np.array(enc["token_type_ids"])
        result[f"tokens_vocab.{i}"] = np.array(vocab_tokenizer(text)["input_ids"])

    model = AutoModelForMaskedLM.from_pretrained(str(folder / "bert")).eval()
    check_keys(folder / "bert", model)
    result["attn_implementation"] = np.array(model.config._attn_implementation)
    with torch.no_grad():
        for i, text in enumerate(cases["encoder_texts"]):
            states = model(**tokenizer(text, return_tensors="pt"), output_hidden_states=True)["hidden_states"]
            for k, h in enumerate(states):
                result[f"hidden.{i}.{k}"] = sha(h)
        batch = tokenizer(cases["encoder_texts"], padding=True, return_tensors="pt")
        result["hidden_batch.mask"] = batch["attention_mask"].numpy()
        for k, h in enumerate(model(**batch, output_hidden_states=True)["hidden_states"]):
            result[f"hidden_batch.{k}"] = sha(h)

    import process_ckpt  # noqa: E402 - its folder holds eres2net, which TTS.py's sv.py looks for under <cwd>/GPT_SoVITS

    sys.path.append(str(Path(process_ckpt.__file__).resolve().parent / "eres2net"))
    from text import LangSegmenter as segmenter_module  # noqa: E402 - upstream's, after transformers
    from TTS_infer_pack.TextPreprocessor import TextPreprocessor  # noqa: E402

    pre = TextPreprocessor(model, tokenizer, torch.device("cpu"))
    for i, (norm_text, word2ph) in enumerate(cases["characters"]):
        feature = pre.get_bert_feature(norm_text, word2ph)
        if i == 0:
            result[f"characters.{i}"] = feature.numpy()
        result[f"characters.{i}.sha256"] = sha(feature)
        result[f"characters.{i}.shape"] = np.array(feature.shape)

    for case in cases["pieces"]:
        seen: list[list[str]] = []

        def get_texts(text, default_lang="", segments=case["segments"]):
            return [dict(s) for s in segments]

        def clean_text_inf(text, language, version="v2", cleaned=case["cleaned"], seen=seen):
            seen.append([language.replace("all_", ""), text])
            phones, word2ph, norm_text = cleaned[text]
            return phones, word2ph, norm_text

        segmenter_module.LangSegmenter.getTexts = staticmethod(get_texts)
        pre.clean_text_inf = clean_text_inf
        phones, bert, _ = pre.get_phones_and_bert(case["text"], case["language"], "v2")
        if seen != case["pieces"]:
            raise SystemExit(f"case {case['name']}: upstream made the pieces {seen}, the case says {case['pieces']}")
        name = case["name"]
        result[f"pieces.{name}.sha256"] = sha(bert)
        result[f"pieces.{name}.shape"] = np.array(bert.shape)
        result[f"pieces.{name}.phones"] = np.array(phones)
        result[f"pieces.{name}.head"] = bert[:, :8].contiguous().numpy()

    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
