"""Random-weight model folders for the benchmark, built once and cached.

Speed does not depend on weight values, so the benchmark builds models at the released sizes, stored
as the releases store them (each family's `write_model`, `koe.engines.benchmark.FamilyBench`), and
keeps them under `$KOE_HOME/bench` (or `~/.cache/koe/bench`). A folder counts as built only once
its `.complete` marker exists (and names the writer's `model_version`), so an interrupted build is
redone rather than half used.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path


def cache_root() -> Path:
    """`$KOE_HOME/bench` when KOE_HOME is set, else `~/.cache/koe/bench`."""
    home = os.environ.get("KOE_HOME")
    return Path(home) / "bench" if home else Path.home() / ".cache" / "koe" / "bench"


def bench_model(family: str, variant: str, size: str, root: Path | None = None, seed: int = 0) -> Path:
    """The folder of a random-weight `family` model (`variant` at `size`), building it on first use
    with the family's `write_model`; `ValueError` for a variant or size the family has no model of."""
    from koe.bench.families import family_bench

    bench = family_bench(family)
    if size not in bench.sizes:
        raise ValueError(f"unknown {family} size {size!r}: sizes {bench.sizes}")
    name = bench.model_name(variant, size, seed)  # ValueError for a variant the family has no model of
    folder = (root or cache_root()) / name
    info = {"version": bench.model_version, "family": family, "variant": variant, "size": size, "seed": seed}
    return cached_folder(folder, lambda tmp: bench.write_model(tmp, variant, size, seed), info)


def cached_folder(folder: Path, write, marker_info: dict) -> Path:
    """`folder` if its `.complete` marker says `marker_info["version"]`, else built by `write(tmp)` and renamed."""
    marker = folder / ".complete"
    if marker.exists() and json.loads(marker.read_text()).get("version") == marker_info["version"]:
        return folder
    if folder.exists():
        shutil.rmtree(folder)
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    write(tmp)
    tmp.rename(folder)
    marker.write_text(json.dumps(marker_info))
    return folder


def weights_bytes(folder: Path, patterns: tuple[str, ...] = ("*.safetensors",)) -> int:
    """Bytes of every weight file of a model folder (the files matching `patterns`, anywhere in it)."""
    return sum(p.stat().st_size for pattern in patterns for p in Path(folder).rglob(pattern))
