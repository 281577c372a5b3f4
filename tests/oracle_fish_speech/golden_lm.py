"""The `lm` golden, upstream's side: Fish Speech S2's dual-AR LM as `init_model` loads it and
`generate` runs it.

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_fish_speech/golden_lm.py <folder> <out.npz>
`folder` holds what tests/engines/fish_speech/golden_lm.py `write_inputs` wrote. For each dtype
(float32, bfloat16: upstream's `init_model(folder, "cpu", dtype)`, as the CLI's precision), each
prompt's first logits (`forward_generate` over the whole prompt: their sha256 and the first 32
semantic ones with <|im_end|>'s), then each case after `torch.manual_seed(seed)`: `generate`'s
codes as `generate_long` extracts them (`y[1:, prompt_length:-1]`) and the frames whose main token
RAS replaced, observed by wrapping `sample` and `decode_one_token_ar` (their results unchanged).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from fish_speech.models.text2semantic import inference  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def recorded_hashes(folder: Path) -> dict[str, np.ndarray]:
    out = {}
    for line in (folder / "state_sha256.txt").read_text().splitlines():
        words = line.split()
        if words:
            out["state_sha256" if len(words) == 1 else f"{words[0]}.state_sha256"] = np.array(words[-1])
    return out


def sha(t: torch.Tensor) -> np.ndarray:
    return np.array(hashlib.sha256(t.detach().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest())


class Observer:
    """Records each frame's first main-token draw and the RAS window it was checked against."""

    def __init__(self) -> None:
        self.draws: list[int] = []
        self.windows: list[torch.Tensor | None] = []
        self.vocab = 0

    def install(self) -> None:
        sample, decode = inference.sample, inference.decode_one_token_ar

        def observed_sample(logits, **kw):
            out = sample(logits, **kw)
            if logits.shape[-1] == self.vocab:
                self.draws.append(int(out[0][0]))
            return out

        def observed_decode(model, x, input_pos, *args, previous_tokens=None, **kw):
            self.windows.append(None if previous_tokens is None else previous_tokens.clone())
            return decode(model, x, input_pos, *args, previous_tokens=previous_tokens, **kw)

        inference.sample = observed_sample
        inference.decode_one_token_ar = observed_decode

    def replaced(self, begin: int, end: int) -> list[int]:
        """Frames (in the returned codes' numbering) whose normal draw was semantic and in its window."""
        normal = self.draws[0::2]  # per frame: the user's draw, then RAS's
        out = []
        for i, (token, window) in enumerate(zip(normal, self.windows, strict=True)):
            if window is not None and begin <= token <= end and bool((window[0] == token).any()):
                out.append(i)
        return out


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    spec = json.loads((folder / "cases.json").read_text())
    prompts = {p.stem.removeprefix("prompt_"): torch.from_numpy(np.load(p)) for p in sorted(folder.glob("prompt_*.npy"))}
    arrays: dict[str, np.ndarray] = dict(recorded_hashes(folder))
    observer = Observer()
    observer.install()
    for dname in spec["dtypes"]:
        model, _ = inference.init_model(str(folder), "cpu", DTYPES[dname])
        observer.vocab = model.config.vocab_size
        begin, end = model.config.semantic_begin_id, model.config.semantic_end_id
        im_end = model.tokenizer.get_token_id(inference.IM_END_TOKEN)
        arrays["semantic_ids"] = np.array([begin, end, im_end])
        with torch.inference_mode():
            model.setup_caches(max_batch_size=1, max_seq_len=model.config.max_seq_len, dtype=next(model.parameters()).dtype)
            for name, p in prompts.items():
                result = model.forward_generate(p[None], torch.arange(p.shape[1]))
                logits = result.logits[0, -1]
                arrays[f"{dname}.{name}.logits_sha256"] = sha(logits)
                arrays[f"{dname}.{name}.logits_head"] = torch.cat([logits[begin : begin + 32], logits[im_end : im_end + 1]]).float().numpy()
        for i, case in enumerate(spec["cases"]):
            p = prompts[case["prompt"]]
            observer.draws, observer.windows = [], []
            torch.manual_seed(case["seed"])
            y = inference.generate(
                model=model,
                prompt=p,
                max_new_tokens=case["max_new_tokens"],
                audio_masks=None,
                audio_parts=None,
                decode_one_token=inference.decode_one_token_ar,  # the observed one (init_model's is the same function, unwrapped)
                temperature=case["temperature"],
                top_p=case["top_p"],
                top_k=case["top_k"],
            )
            arrays[f"{dname}.case{i}.codes"] = y[1:, p.shape[1] : -1].numpy().astype(np.int64)
            arrays[f"{dname}.case{i}.ras"] = np.array(observer.replaced(begin, end), dtype=np.int64)
            arrays[f"{dname}.case{i}.last_token"] = np.array(int(y[0, -1]))
            print(dname, i, arrays[f"{dname}.case{i}.codes"].shape, "ras", arrays[f"{dname}.case{i}.ras"].tolist(), flush=True)
    np.savez(out, **arrays)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
