"""Upstream OmniVoice's audio-token extraction (`omnivoice/scripts/extract_audio_tokens.py`), for
parity tests.

Job: {"model": folder, "clips": [path, ...]}. As the script does for a raw JSONL: the clips read by
upstream's `JsonlDatasetReader` (unshuffled: soundfile, the channels' mean, torchaudio's resample to
24 kHz, the peak scaled to 0.9), each through the script's own worker (`process_init` on the
folder's `audio_tokenizer/`, on the CPU; `process_single_sample`: the HiggsAudio-v2 feature
extractor, then the tokenizer's `encode`). Writes `clip<i>`: the int16 (8, frames) tokens the
script stores.
"""

from __future__ import annotations

import json
import os
import queue

import torch
from common import read_job, write_results


def main() -> None:
    job, out = read_job()
    from omnivoice.data.dataset import JsonlDatasetReader
    from omnivoice.scripts import extract_audio_tokens as script

    rows = out / "clips.jsonl"
    rows.write_text("".join(json.dumps({"id": f"clip{i}", "audio_path": path}) + "\n" for i, path in enumerate(job["clips"])))
    ranks: queue.Queue = queue.Queue()
    ranks.put(-1)
    script.process_init(ranks, os.path.join(job["model"], "audio_tokenizer"))
    tensors = {}
    for sample in JsonlDatasetReader(str(rows), sample_rate=24000, shuffle=False):
        result = script.process_single_sample(sample)
        if result["status"] != "success":
            raise RuntimeError(result["error_msg"])
        tensors[result["key"]] = torch.from_numpy(result["audio_tokens"])
    rows.unlink()  # it names this run's paths
    write_results(out, tensors, {"clips": len(tensors)})


if __name__ == "__main__":
    main()
