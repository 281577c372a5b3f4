"""OmniVoice's training data in upstream's layout: WebDataset tar shards of audio tokens, a label
JSONL beside each, and the manifest and data config that upstream's trainer reads.

    shards/shard-000000.tar     KEY.npy: the clip's audio tokens, int16 (8, frames), numpy's format
    shards/shard-000000.jsonl   {"id": KEY, "text": ..., ["language_id", "instruct"], "audio_duration", "num_tokens"}
    data.lst                    TAR JSONL COUNT SECONDS a line (absolute paths)
    data_config.json            {"train": [{"manifest_path": [data.lst]}]}

This is what upstream's `extract_audio_tokens.py` writes (koe: one shard per data-loader worker,
as upstream's loader needs at least as many shards as workers), so
upstream's `omnivoice.cli.train --data_config data_config.json` trains on the same data. The tar
entries carry no time, owner or mode of their own (the bytes depend on the data only).
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["Sample", "read_shard", "write_dataset", "write_shard"]


@dataclass(frozen=True)
class Sample:
    """One clip as upstream's `SampleDecoder` gives it: its key, its tokens (8, frames) and its label."""

    key: str
    tokens: np.ndarray  # int16 (8, frames)
    label: dict = field(compare=False)


def write_shard(tar_path: Path, jsonl_path: Path, samples: list[Sample]) -> None:
    """One tar shard of `KEY.npy` entries and its label JSONL (one line a sample, in its order)."""
    tar_path, jsonl_path = Path(tar_path), Path(jsonl_path)
    partial = tar_path.with_name(f".{tar_path.name}.partial")
    with tarfile.open(partial, "w", format=tarfile.USTAR_FORMAT) as tar:
        for sample in samples:
            buffer = io.BytesIO()
            np.save(buffer, np.ascontiguousarray(sample.tokens, dtype=np.int16))
            info = tarfile.TarInfo(f"{sample.key}.npy")
            info.size, info.mtime, info.mode = buffer.tell(), 0, 0o644
            buffer.seek(0)
            tar.addfile(info, buffer)
    lines = "".join(json.dumps({"id": s.key, **s.label}, ensure_ascii=False) + "\n" for s in samples)
    jsonl_partial = jsonl_path.with_name(f".{jsonl_path.name}.partial")
    jsonl_partial.write_text(lines, encoding="utf-8")
    partial.replace(tar_path)
    jsonl_partial.replace(jsonl_path)


def write_dataset(folder: Path, samples: list[Sample], shards: int) -> list[tuple[Path, Path]]:
    """`samples` in `shards` shards of consecutive samples (sizes differing by one at most, the
    larger first), with `data.lst` and `data_config.json`, into `folder`; returns the (tar,
    jsonl) pairs in order."""
    folder = Path(folder)
    (folder / "shards").mkdir(parents=True, exist_ok=True)
    pairs = []
    lines = []
    size, extra = divmod(len(samples), shards)
    starts = [i * size + min(i, extra) for i in range(shards + 1)]
    for index in range(shards):
        chunk = samples[starts[index] : starts[index + 1]]
        tar, jsonl = folder / "shards" / f"shard-{index:06d}.tar", folder / "shards" / f"shard-{index:06d}.jsonl"
        write_shard(tar, jsonl, chunk)
        pairs.append((tar, jsonl))
        seconds = sum(float(s.label.get("audio_duration", 0.0)) for s in chunk)
        lines.append(f"{os.path.abspath(tar)} {os.path.abspath(jsonl)} {len(chunk)} {seconds:.3f}\n")
    (folder / "data.lst").write_text("".join(lines), encoding="utf-8")
    config = {"train": [{"manifest_path": [os.path.abspath(folder / "data.lst")]}]}
    (folder / "data_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return pairs


def read_shard(tar_path: Path, jsonl_path: Path) -> list[Sample]:
    """The samples of a shard in its tar's order, each with its label (by `id`), as upstream's
    reader pairs them."""
    labels = {}
    for line in Path(jsonl_path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            if "id" in item:
                labels[item["id"]] = item
    samples = []
    with tarfile.open(tar_path, "r") as tar:
        for member in tar:
            if not member.isfile() or not member.name.endswith(".npy"):
                continue
            key = member.name[: -len(".npy")]
            handle = tar.extractfile(member)
            assert handle is not None
            tokens = np.load(io.BytesIO(handle.read()), allow_pickle=False)
            samples.append(Sample(key, tokens, labels[key]))
    return samples
