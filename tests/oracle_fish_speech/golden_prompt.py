"""The `prompt` golden, upstream's side: the conversation `generate_long` builds and encodes, and the
token ids `FishTokenizer.encode` gives.

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_fish_speech/golden_prompt.py <folder> <out.npz>
`folder` holds what tests/engines/fish_speech/golden_prompt.py `write_inputs` wrote. The tokenizer
is upstream's `FishTokenizer(folder)` (transformers' `AutoTokenizer`). Each case runs upstream's own
`generate_long` (the server's arguments: text, chunk_length, the references' transcripts and codes as
lists) on a stand-in model that has only what the conversation needs (`tokenizer`, `config.
num_codebooks`, `config.max_seq_len`, no parameters), with the module's `generate` replaced by one
that records the prompt it is given (and that audio masks and parts are None) and answers with the
batch's made-up codes, which `generate_long` feeds back into the next batch's prompt.

Recorded: `<case>.batches` (each batch's text, from the responses), `<case>.prompt.<i>` (each
batch's encoded prompt, int64), `<case>.audio_none` (masks and parts None for every batch),
`batching.batches` / `batching.offsets` (the batches of batching.json's texts, split and grouped as
`generate_long` does, one text's after another), `tokenizer.ids` / `tokenizer.offsets` (the ids of strings.json's strings, one after another),
`tokenizer.specials` (semantic begin and end, pad, eos, im_start, im_end, <|voice|>, audio_pad),
`tokenizer.state_sha256`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import fish_speech.models.text2semantic.inference as inference  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from fish_speech.tokenizer import FishTokenizer  # noqa: E402
from loguru import logger  # noqa: E402


class StandIn:
    """What `generate_long` reads of a model for the conversation."""

    def __init__(self, tokenizer: FishTokenizer, num_codebooks: int) -> None:
        self.tokenizer = tokenizer
        self.config = SimpleNamespace(num_codebooks=num_codebooks, max_seq_len=1 << 20)

    def parameters(self):
        return iter(())


def recorded_hashes(folder: Path) -> dict[str, np.ndarray]:
    out = {}
    for line in (folder / "state_sha256.txt").read_text().splitlines():
        words = line.split()
        if words:
            out["state_sha256" if len(words) == 1 else f"{words[0]}.state_sha256"] = np.array(words[-1])
    return out


def run_case(model: StandIn, case_folder: Path, case: dict, result: dict, name: str) -> None:
    answers = sorted(case_folder.glob("answer_*.npy"), key=lambda p: int(p.stem.split("_")[1]))
    answers = [torch.from_numpy(np.load(p)) for p in answers]
    prompts, audio_none = [], []

    def generate(*, model, prompt, audio_masks, audio_parts, **_):
        codes = answers[len(prompts)]
        prompts.append(prompt.clone())
        audio_none.append(audio_masks is None and audio_parts is None)
        tail = torch.zeros(prompt.shape[0], codes.shape[1] + 1, dtype=prompt.dtype)
        tail[1:, : codes.shape[1]] = codes  # generate_long keeps y[1:, prompt_length:-1]
        return torch.cat([prompt, tail], dim=1)

    inference.generate = generate
    references = case["references"]
    texts = [t for t, _ in references]
    codes = [torch.from_numpy(np.load(case_folder / f"reference_{i}.npy")) for i in range(len(references))]
    batches = []
    with contextlib.redirect_stdout(io.StringIO()):  # the prompt's visualisation
        for response in inference.generate_long(
            model=model,
            device="cpu",
            decode_one_token=None,
            text=case["text"],
            chunk_length=case["chunk_length"],
            prompt_text=texts,
            prompt_tokens=codes,
        ):
            if response.action == "sample":
                batches.append(response.text)
    assert len(batches) == len(prompts)
    result[f"{name}.batches"] = np.array(batches)
    for i, prompt in enumerate(prompts):
        result[f"{name}.prompt.{i}"] = prompt.numpy()
    result[f"{name}.audio_none"] = np.array(all(audio_none))


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    logger.remove()
    tokenizer = FishTokenizer(str(folder))
    num_codebooks = int((folder / "num_codebooks.txt").read_text())
    result = recorded_hashes(folder)
    strings = json.loads((folder / "strings.json").read_text(encoding="utf-8"))
    ids = [tokenizer.encode(s) for s in strings]
    result["tokenizer.strings"] = np.array(strings)
    result["tokenizer.ids"] = np.array([i for row in ids for i in row], dtype=np.int64)
    result["tokenizer.offsets"] = np.cumsum([0] + [len(row) for row in ids]).astype(np.int64)
    specials = [tokenizer.semantic_begin_id, tokenizer.semantic_end_id, tokenizer.pad_token_id, tokenizer.eos_token_id]
    specials += [tokenizer.get_token_id(t) for t in ("<|im_start|>", "<|im_end|>", "<|voice|>", "<|audio_pad|>")]
    result["tokenizer.specials"] = np.array(specials, dtype=np.int64)
    batches = []  # generate_long's split and grouping of each text
    for text, chunk_length in json.loads((folder / "batching.json").read_text(encoding="utf-8")):
        turns = inference.split_text_by_speaker(text)
        batches.append(inference.group_turns_into_batches(turns, max_speakers=5, max_bytes=chunk_length) if turns else [text])
    result["batching.batches"] = np.array([b for row in batches for b in row])
    result["batching.offsets"] = np.cumsum([0] + [len(row) for row in batches]).astype(np.int64)
    model = StandIn(tokenizer, num_codebooks)
    for name, case in json.loads((folder / "cases.json").read_text(encoding="utf-8")).items():
        run_case(model, folder / name, case, result, name)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
