"""Inputs of the `infer_v4` golden (koe's side): v4 end to end through upstream's `TTS.run` on a
random folder at the released DiT size (`write_random_model(variant="v4")`: a LoRA over a
random pretrained model, merged by peft upstream): clone with a transcript, a few `sample_steps`
(upstream's 32 would take minutes at this size), speed, the batched vocoder synthesis
(`parallel_infer`, one CFM call for every chunk, SOLA joins) and the serial one, several
fragments. Slow: see test_gpt_sovits_v4.py. See infer_goldens.py."""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # scripts/goldens.py puts only tests/ on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import dit_goldens  # noqa: E402
import infer_goldens as common  # noqa: E402

SEED = 53
BY_CPU_KIND = True  # the DiT at its released size: its products take other paths on other kinds of AVX-512 CPU (cpu_kind.py)
VARIANTS = {"v4": "v4"}
CASES = dit_goldens.cases("v4")


def write_inputs(folder: Path) -> None:
    common.write_inputs(folder, VARIANTS, CASES, SEED, ref_seconds=3.5)
