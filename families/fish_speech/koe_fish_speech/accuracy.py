"""Error of Fish Speech's opt-in precisions (bf16, int8, int4) against the exact float32 LM, on the same weights.

    python -m koe.bench.accuracy --family fish_speech --precision int8 [--size real] [--frames 32]

Teacher-forced: the exact LM decodes `--frames` frames of the benchmark's text in the model's own
voice (a seed, upstream's sampling); then the mode's LM reads the very same columns (the prompt, then
each decoded frame) and, per frame, its slow stack's token logits (over the tokens it may sample:
the semantic ones and <|im_end|>) and its fast stack's codebook logits (codebooks 1..N-1, each after
the exact codes before it) are compared with the exact ones: cosine (mean and min over frames and
codebooks) and how often the arg-max agrees. The two LMs never share memory: the exact one's logits
are kept, the model freed, then the mode's loaded (a real-size folder then fits once, not twice).

The codec is not measured: it runs float32 in every mode (bf16: under upstream's bfloat16 autocast,
its bits checked by the infer_bf16 golden).

Fish Speech's `accuracy` tool: `main(kit, argv)` for a bench declaration's `tools`
(`{"accuracy": "koe_fish_speech.accuracy:main"}`); `measure(folder, precision, frames, seed)`
runs on any S2 folder.
"""

from __future__ import annotations

import gc
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from koe.bench.accuracy import compare
from koe_fish_speech.generate import Sampling, generate_codes, generate_frames
from koe_fish_speech.model import DualARLM, load_lm_in
from koe_fish_speech.prompt import SpeechPrompt
from koe_fish_speech.tokenizer import FishTokenizer

__all__ = ["MODES", "TEXT", "footprint", "forced_logits", "held_bytes", "measure", "reference_frames"]

MODES = ("bf16", "int8", "int4")
TEXT = "The quick brown fox jumps over the lazy dog, and then it takes a long nap in the afternoon sun."


def _prompt(folder: Path, lm: DualARLM) -> tuple[torch.Tensor, tuple[int, int], int]:
    tokenizer = FishTokenizer.load(folder)
    prompt = SpeechPrompt(tokenizer, lm.config.num_codebooks).next_prompt(TEXT)
    return prompt, (tokenizer.semantic_begin_id, tokenizer.semantic_end_id), tokenizer.im_end_id


def reference_frames(lm: DualARLM, prompt: torch.Tensor, semantic: tuple[int, int], im_end_id: int, frames: int, seed: int) -> torch.Tensor:
    """The exact LM's decoded columns (N + 1, F): main token over the codes, from `seed`."""
    torch.manual_seed(seed)
    sampling = Sampling()
    codes, _ = generate_codes(
        lm, prompt, semantic_begin_id=semantic[0], semantic_end_id=semantic[1], im_end_id=im_end_id, max_new_tokens=frames + 1, sampling=sampling
    )
    return torch.cat([codes[:1].to(torch.long) + semantic[0], codes.to(torch.long)])


@torch.inference_mode()
def forced_logits(lm: DualARLM, prompt: torch.Tensor, columns: torch.Tensor, semantic: tuple[int, int], im_end_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`lm` reading `prompt` (N + 1, T) then `columns` (N + 1, F) -> (token logits over the semantic
    ids and <|im_end|> (F, S + 1), codebook logits (F, N - 1, codebook_size)), float32: row i is
    what predicts column i (the slow stack after the prompt and the columns before it; the fast stack
    at positions 1..N-1 after column i's codes before each)."""
    n = lm.config.num_codebooks
    slow_cache, fast_cache = lm.slow.new_cache(prompt.shape[1] + columns.shape[1]), lm.fast.new_cache()
    kept = torch.cat([torch.arange(semantic[0], semantic[1] + 1), torch.tensor([im_end_id])])
    tokens, codebooks = [], []
    length = prompt.shape[1]
    for i in range(columns.shape[1]):
        if i == 0:
            logits, hidden = lm.slow(prompt.view(1, n + 1, -1), 0, slow_cache, semantic)
        else:
            with sdpa_kernel(SDPBackend.MATH):
                logits, hidden = lm.slow(columns[:, i - 1 : i].view(1, n + 1, 1), length + i - 1, slow_cache, semantic)
        tokens.append(logits[0, -1, kept].float())
        lm.fast(lm.fast.project_in(hidden), 0, fast_cache)
        rows = []
        for position in range(1, n):
            code = columns[position, i].view(1, 1)
            rows.append(lm.fast(lm.fast.embeddings(code).view(1, 1, -1), position, fast_cache)[0, -1].float())
        codebooks.append(torch.stack(rows))
    return torch.stack(tokens), torch.stack(codebooks)


def measure(folder: str | Path, precision: str, frames: int = 32, seed: int = 0) -> dict:
    """Teacher-forced error of `precision`'s LM against the exact (fp32) one on `folder` (see the module docstring)."""
    folder = Path(folder)
    exact = load_lm_in(folder, "fp32")
    prompt, semantic, im_end = _prompt(folder, exact)
    columns = reference_frames(exact, prompt, semantic, im_end, frames, seed)
    ref_tokens, ref_codes = forced_logits(exact, prompt, columns, semantic, im_end)
    del exact
    gc.collect()
    mode = load_lm_in(folder, precision)
    tokens, codes = forced_logits(mode, prompt, columns, semantic, im_end)
    return {
        "precision": mode.precision,
        "kernel": mode.kernel,
        "slow_layers": mode.config.slow.layers,
        "seed": seed,
        "frames": columns.shape[1],
        "prompt_tokens": prompt.shape[1],
        "token_logits": compare(ref_tokens, tokens),
        "codebook_logits": compare(ref_codes, codes),
    }


def main(kit, argv: list[str] | None = None) -> int:
    options = (
        ("--frames", {"type": int, "default": 32, "help": "frames the exact LM decodes (then teacher-forced)"}),
        ("--seed", {"type": int, "default": 0, "help": "the exact LM's draws"}),
    )
    sizes = ("tiny", "real")

    def run(kit, folder, precision, frames, seed):
        return measure(folder, precision, frames, seed)

    return kit.accuracy_tool(kit, argv, "fish_speech", __doc__, run, MODES, sizes, size_help="random weights (real: the released widths)", options=options)


def _rss() -> int:
    """This process's resident memory in bytes (Linux: /proc/self/status)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise OSError("no VmRSS in /proc/self/status (a Linux measure)")


def held_bytes(module: torch.nn.Module) -> int:
    """Bytes of every tensor storage `module` holds (parameters, buffers, and tensors its modules keep
    as attributes, as koe's quantized layers keep their packed weights), each storage once; mapped
    weights count whole, resident or not."""
    seen: set[int] = set()
    total = 0
    for m in module.modules():
        for value in [*m._parameters.values(), *m._buffers.values(), *vars(m).values()]:
            for t in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in seen:
                    seen.add(t.untyped_storage().data_ptr())
                    total += t.untyped_storage().nbytes()
    return total


def footprint(folder: str | Path, precision: str, frames: int = 8, seed: int = 0) -> dict:
    """What `precision`'s LM costs on `folder`, in this process (run it in a fresh one): the resident
    memory (RSS) before and after loading, and the milliseconds a decoded frame takes (the slow step,
    the fast stack's N positions and the draws), after the prompt, at torch's thread count now."""
    import time

    gc.collect()
    before = _rss()
    lm = load_lm_in(folder, precision)
    gc.collect()
    loaded = _rss()
    prompt, semantic, im_end = _prompt(Path(folder), lm)
    torch.manual_seed(seed)
    stamps = []
    options = dict(semantic_begin_id=semantic[0], semantic_end_id=semantic[1], im_end_id=im_end, max_new_tokens=frames + 2)
    for _ in generate_frames(lm, prompt, **options):
        stamps.append(time.perf_counter())
    steps = [b - a for a, b in zip(stamps, stamps[1:])]
    decoded = _rss()
    return {
        "precision": lm.precision,
        "kernel": lm.kernel,
        "slow_layers": lm.config.slow.layers,
        "threads": torch.get_num_threads(),
        "rss_before_gib": before / 2**30,
        "held_gib": held_bytes(lm) / 2**30,
        "rss_loaded_gib": loaded / 2**30,
        "rss_decoded_gib": decoded / 2**30,  # weights read from the file as stored (mapped) count once touched
        "frames_timed": len(steps),
        "ms_per_frame": 1000 * sum(steps) / len(steps) if steps else None,
        "ms_per_frame_min": 1000 * min(steps) if steps else None,
    }


if __name__ == "__main__":  # python -m koe_fish_speech.accuracy FOLDER PRECISION [--threads N] [--footprint]
    import argparse
    import json

    p = argparse.ArgumentParser(
        prog="python -m koe_fish_speech.accuracy", description="a mode's error (or with --footprint its memory and speed) on an S2 folder"
    )
    p.add_argument("folder", type=Path)
    p.add_argument("precision", choices=("fp32", *MODES))
    p.add_argument("--frames", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--footprint", action="store_true", help="RSS after load and ms per frame instead of the error")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    run = footprint if a.footprint else measure
    print(json.dumps(run(a.folder, a.precision, a.frames, a.seed), indent=1))
