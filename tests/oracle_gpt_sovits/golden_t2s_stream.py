"""The `t2s_stream` golden, upstream's side: the AR model's streamed decoding
(`infer_panel_naive(streaming_mode=True)`, as `TTS.run(streaming_mode=True)` calls it), the model
loaded as t2s_oracle.py loads it.

    <oracle python> tests/oracle_gpt_sovits/golden_t2s_stream.py <folder> <out.npz>

Per case, after its seed: `infer_panel_naive(phones[None], lens, prompt[None] or None, bert[None],
top_k, top_p, early_stop_num, temperature, repetition_penalty, streaming_mode=True, chunk_length,
mute_emb_sim_matrix, chunk_split_thershold)`, its similarity matrix computed from the codebook as
`TTS.init_t2s_weights` does (for the case's `mute_token`; None: fixed-length chunks). Recorded:
`<case>.chunk.<i>` each chunk's tokens ((n,); a None chunk is recorded as `<case>.none.<i>`),
`<case>.final` the is_final flags, `<case>.similarity` the matrix.
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from t2s_oracle import load


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    model, early_stop_default = load(folder / "s1.ckpt")
    arrays = dict(np.load(folder / "inputs.npz"))
    cases = json.loads((folder / "cases.json").read_text())
    result = {"state_sha256": np.array((folder / "state_sha256.txt").read_text().split()[0])}
    codebook = model.ar_audio_embedding.weight.clone()
    for name, case in cases.items():
        (text,) = case["texts"]
        phones, bert = torch.from_numpy(arrays[f"phones.{text}"]), torch.from_numpy(arrays[f"bert.{text}"])
        prompt = torch.from_numpy(arrays["prompt"])[None] if case["prompt"] else None
        similarity = None
        if case["mute_token"] is not None:
            mute_emb = codebook[case["mute_token"]].unsqueeze(0)
            similarity = F.cosine_similarity(mute_emb.float(), codebook.float(), dim=-1)
            result[f"{name}.similarity"] = similarity.detach().numpy()
        early_stop_num = early_stop_default if case["early_stop_num"] is None else case["early_stop_num"]
        torch.manual_seed(case["seed"])
        finals = []
        with torch.no_grad():
            chunks = model.infer_panel_naive(
                phones[None],
                torch.LongTensor([phones.shape[-1]]),
                prompt,
                bert[None],
                top_k=case["top_k"],
                top_p=case["top_p"],
                early_stop_num=early_stop_num,
                temperature=case["temperature"],
                repetition_penalty=case["repetition_penalty"],
                streaming_mode=True,
                chunk_length=case["chunk_length"],
                mute_emb_sim_matrix=similarity,
                chunk_split_thershold=case["split_threshold"],
            )
            for i, (tokens, final) in enumerate(chunks):
                if tokens is None:
                    result[f"{name}.none.{i}"] = np.array(True)
                else:
                    result[f"{name}.chunk.{i}"] = tokens[0].numpy()
                finals.append(bool(final))
        result[f"{name}.final"] = np.array(finals)
        print(name, finals, file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
