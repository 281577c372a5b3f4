"""Inputs of the `sovits_v3` golden (koe's side): the whole v3/v4 waveform path at the released DiT
size (upstream's `SynthesizerTrnV3` hard-codes DiT(1024, depth 22): ~330 M parameters, a 660 MB
fp16 file), with small vocoders (proven alone by the `bigvgan` and `vocoder_v4` goldens) at the
released hops (256 and 480 samples per mel frame).

- `s2Gv3.pth`: `write_sovits_v3(..., "v3", SEED)` (header b"02"); it is also the pretrained model
  under the v4 LoRA (v3 and v4 files share one layout).
- `lora_v4.pth`: `write_sovits_v3_lora(..., "v4", SEED, rank=4)` (header b"04").
- `bigvgan/`, `vocoder.pth` (+ `vocoder.json`): small vocoders.
- `inputs.npz`: the reference spectrogram `spec` (1, 1025, frames), the raw reference `ref_audio`
  (1, samples) at REF_RATE, the prompt's `prompt_codes` (1, 1, P) / `prompt_phones` (1, M), the
  target's `codes` (1, 1, T) / `phones` (1, N).
- `cases.json`: per case the model, speed, sample steps and the seed set before the call.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import torch

from koe.engines.gpt_sovits.bigvgan import BigVGANConfig
from koe.engines.gpt_sovits.fixtures_v3 import random_sovits_v3_state, write_bigvgan, write_sovits_v3, write_sovits_v3_lora, write_vocoder_v4
from koe.engines.gpt_sovits.vocoder_v4 import VocoderConfig
from koe.runtime.weights import state_sha256

SEED = 61
BY_CPU_KIND = True  # the DiT at its released size: its products take other paths on other kinds of AVX-512 CPU (cpu_kind.py)
REF_RATE = 44100
BIGVGAN = BigVGANConfig(upsample_initial_channel=64, resblock_kernel_sizes=(3,), resblock_dilation_sizes=((1, 3),))
VOCODER = VocoderConfig(upsample_initial_channel=64, resblock_kernel_sizes=(3,), resblock_dilation_sizes=((1, 3, 5),))
CASES = {
    "v3": {"model": "s2Gv3.pth", "speed": 1.0, "sample_steps": 2, "seed": 1},
    "v4_lora": {"model": "lora_v4.pth", "speed": 1.1, "sample_steps": 1, "seed": 2},
}


def inputs() -> dict[str, np.ndarray]:
    g = torch.Generator().manual_seed(SEED + 1)
    return {
        "spec": (torch.randn(1, 1025, 40, generator=g).abs() * torch.linspace(2.0, 0.05, 1025).view(1, -1, 1)).numpy(),
        "ref_audio": (torch.rand(1, int(REF_RATE * 0.8), generator=g) - 0.5).numpy(),
        "prompt_codes": torch.randint(0, 1024, (1, 1, 20), generator=g).numpy(),
        "prompt_phones": torch.randint(0, 732, (1, 15), generator=g).numpy(),
        "codes": torch.randint(0, 1024, (1, 1, 16), generator=g).numpy(),
        "phones": torch.randint(0, 732, (1, 12), generator=g).numpy(),
    }


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_sovits_v3(folder / "s2Gv3.pth", "v3", SEED)
    write_sovits_v3_lora(folder / "lora_v4.pth", "v4", SEED, rank=4)
    write_bigvgan(folder / "bigvgan", BIGVGAN, SEED)
    write_vocoder_v4(folder / "vocoder.pth", VOCODER, SEED)
    (folder / "vocoder.json").write_text(json.dumps(dataclasses.asdict(VOCODER)))
    np.savez(folder / "inputs.npz", **inputs())
    (folder / "cases.json").write_text(json.dumps({"cases": CASES, "ref_rate": REF_RATE}, indent=1))
    (folder / "state_sha256.txt").write_text(state_sha256(random_sovits_v3_state("v3", SEED)) + "\n")
