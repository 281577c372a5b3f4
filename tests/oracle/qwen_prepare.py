"""Oracle: upstream's fine-tuning data step (`finetuning/prepare_data.py`) with qwen-tts 0.1.1's tokenizer.

Job: {"folder": speech tokenizer folder, "input_jsonl": upstream's raw JSONL (absolute paths)}.
Does what prepare_data.py does, on the CPU in float32: the JSONL's lines in file order, batches of
32, `Qwen3TTSTokenizer.encode(list of audio paths)` per batch (librosa.load + resample to 24 kHz,
the batch right-padded), each line plus its `audio_codes` written with `json.dumps(ensure_ascii=False)`.
Writes `prepared.jsonl` in the output folder, `codes.<i>` (int64, (frames, 16)) per line, and
info {"batches": the batch sizes, "lines": n}.
"""

from __future__ import annotations

import json

import torch
from common import _from_pretrained_with_info, read_job, write_results

BATCH_INFER_NUM = 32  # prepare_data.py's


def main() -> None:
    job, out = read_job()
    from qwen_tts import Qwen3TTSTokenizer

    tok, loading = _from_pretrained_with_info(Qwen3TTSTokenizer, job["folder"])
    with open(job["input_jsonl"], encoding="utf-8") as f:
        rows = [json.loads(line.strip()) for line in f]
    batches = [rows[i : i + BATCH_INFER_NUM] for i in range(0, len(rows), BATCH_INFER_NUM)]
    tensors: dict[str, torch.Tensor] = {}
    done = []
    for batch in batches:
        encoded = tok.encode([row["audio"] for row in batch])
        for row, codes in zip(batch, encoded.audio_codes):
            row["audio_codes"] = codes.cpu().tolist()
            tensors[f"codes.{len(done)}"] = codes.to(torch.int64).cpu()
            done.append(row)
    with open(out / "prepared.jsonl", "w", encoding="utf-8") as f:
        for row in done:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    write_results(out, tensors, {"batches": [len(b) for b in batches], "lines": len(done), "loading": loading})


if __name__ == "__main__":
    main()
