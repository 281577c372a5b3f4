"""What `koe bench --family sine` runs: requests only, so koe times them through the engine contract
(`koe.bench.contract`); torch-free until a model is written."""

from __future__ import annotations

from pathlib import Path

from koe.engines.benchmark import FamilyBench

TEXT = "A sine model speaks one tone for every word of this sentence."


def model_name(variant: str, size: str, seed: int) -> str:
    return f"koe-sine-{variant}-{size}-seed{seed}"


def write_model(folder: Path, variant: str, size: str, seed: int) -> None:
    from koe_sine.fixtures import write_random_model

    write_random_model(folder, variant, size, seed=seed)


BENCH = FamilyBench(
    cases=("sentence", "stream"),
    default_cases=("sentence", "stream"),
    sizes=("tiny",),
    default_size="tiny",
    model_name=model_name,
    write_model=write_model,
    model_variants=("base",),
    requests={"sentence": {"text": TEXT, "voice": "low"}, "stream": {"text": TEXT, "voice": "high", "stream": True}},
    about="a tone per word, one-shot and streamed",
)
