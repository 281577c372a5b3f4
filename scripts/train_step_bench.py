"""Time speaker fine-tuning steps at a released size on random weights (speed does not depend on values).

    python scripts/train_step_bench.py --size 1.7b --precision bfloat16 --steps 3

Builds (once, cached like `koe bench`'s models) a random-weight Base model in the released layout
and bf16 files, makes synthetic clips of about 4 s (~50 codec frames and ~20 text tokens each) and
runs `koe.engines.qwen3_tts.finetune` batches through forward, backward and an AdamW step (every
batch an optimizer step: --grad-accum 1), printing each step's seconds, the peak resident memory
and the machine. Prints JSON with --json.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import time

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1.7b", choices=["tiny-1b7", "1.7b"])
    ap.add_argument("--precision", default="bfloat16", choices=["float32", "bfloat16"])
    ap.add_argument("--batch-size", type=int, default=2)
    ap.add_argument("--frames", type=int, default=50)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--gradient-checkpointing", action="store_true")
    ap.add_argument("--lora-rank", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    from koe.bench.models import bench_model, cache_root
    from koe.engines.qwen3_tts.config import Qwen3TTSConfig
    from koe.engines.qwen3_tts.finetune.batch import SpeakerExamples
    from koe.engines.qwen3_tts.finetune.trainer import SpeakerTrainer, TrainSettings
    from koe.engines.qwen3_tts.fixtures import write_random_model
    from koe.engines.qwen3_tts.model import Qwen3TTSNetwork
    from koe.engines.qwen3_tts.text.tokenizer import QwenTokenizer

    if a.size == "1.7b":
        base = bench_model("qwen3_tts", "base", "1.7b")
    else:
        base = cache_root() / "train-tiny-1b7"
        if not (base / "config.json").exists():
            write_random_model(base, "base", "tiny-1b7")
    cfg = Qwen3TTSConfig.from_folder(base)
    load_started = time.perf_counter()
    dtype = torch.bfloat16 if a.precision == "bfloat16" else torch.float32
    net = Qwen3TTSNetwork.from_folder(base, cfg, dtype=dtype)
    for p in net.parameters():
        p.requires_grad_(True)
    load_s = time.perf_counter() - load_started
    rng = np.random.default_rng(0)
    ref = (0.1 * rng.standard_normal(24000 * 4)).astype(np.float32)
    text = "The museum opens at nine and closes at five, every day but Monday."
    rows = [{"text": text, "ref_audio": "ref", "audio_codes": rng.integers(0, 2048, (a.frames, 16)).tolist()} for _ in range(a.batch_size * a.steps)]
    examples = SpeakerExamples(rows, QwenTokenizer.from_folder(base), lambda _: ref)
    settings = TrainSettings(
        epochs=1, lr=2e-5, batch_size=a.batch_size, grad_accum=1, precision=a.precision, gradient_checkpointing=a.gradient_checkpointing, lora_rank=a.lora_rank
    )
    import tempfile

    times = []
    with tempfile.TemporaryDirectory() as work:
        trainer = SpeakerTrainer(net, examples, settings, work, "bench", on_step=lambda r: times.append(r.seconds))
        trainer.save = lambda: None  # timing steps, not checkpoint writes
        trainer.run()
    params = sum(p.numel() for name, p in net.talker.named_parameters() if "lora_" not in name)
    result = {
        "size": a.size,
        "precision": a.precision,
        "batch_size": a.batch_size,
        "frames_per_clip": a.frames,
        "tokens_per_row": int(examples[0].text_ids.shape[1] + a.frames + 8),
        "threads": a.threads,
        "gradient_checkpointing": a.gradient_checkpointing,
        "lora_rank": a.lora_rank,
        "talker_parameters": params,
        "trained_parameters": trainer.trained_parameters,
        "load_s": round(load_s, 2),
        "step_s": [round(t, 2) for t in times],
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "torch": torch.__version__,
    }
    if a.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>22}: {v}")


if __name__ == "__main__":
    main()
