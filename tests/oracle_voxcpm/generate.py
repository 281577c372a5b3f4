"""Upstream VoxCPM end to end: a job of synthesis cases -> waveforms, after a strict check of the loaded keys.

Job: {"model": folder, "cases": [case, ...]}; each case is a dict with `text` and any of
upstream `VoxCPM.generate`'s keyword arguments (`prompt_wav_path`, `prompt_text`,
`reference_wav_path`, `cfg_value`, `inference_timesteps`, `min_len`, `max_len`,
`retry_badcase`, `retry_badcase_max_times`, `retry_badcase_ratio_threshold`, ...: passed through
as given, so upstream rejects a misspelt one), plus `streaming` (bool, default false) and `seed`
(int, default 0), which are this script's own.

The model is built as koe's tests need it: `VoxCPM(voxcpm_model_path=folder,
zipenhancer_model_path=None, enable_denoiser=False, optimize=False, device="cpu")`; with
`"lora": folder` in the job also `lora_config` (that folder's `lora_config.json`, as upstream's
LoRA inference script reads it) and `lora_weights_path=folder`, every adapter loaded (none
skipped, none left out).

Upstream loads its weights with `load_state_dict(strict=False)`, which would hide a fixture
whose names do not match. So this script first redoes upstream's choice of files
(model.safetensors, else pytorch_model.bin; audiovae.safetensors, else audiovae.pth, its keys
under `audio_vae.`; a `.bin`/`.pth` holding {"state_dict": ...} is unwrapped as upstream does)
and compares their keys with `m.tts_model.state_dict()`'s (parameters and persistent buffers;
non-persistent buffers are in neither). Any missing or unexpected key fails the script, listing
them.

Then, per case i: `torch.manual_seed(seed)` right before the call, and
`m.generate(**kwargs)` or `list(m.generate_streaming(**kwargs))`. Written: tensors `case{i}`
(the float32 waveform; for a streaming case, its chunks concatenated) and, for a streaming case,
`case{i}.chunk{j}`; info {"sample_rate", "model_class", "dtype", "keys": {"checked",
"missing", "unexpected"}, "cases": [{"samples", "streaming", "chunks", "chunk_samples"}]}.
"""

from __future__ import annotations

import os
import sys

import torch
from common import read_job, write_results
from safetensors.torch import load_file

OWN_KEYS = ("streaming", "seed")


def _state_dict_file(folder: str, safetensors_name: str, pickle_name: str) -> dict[str, torch.Tensor]:
    """The tensors upstream's from_local reads: the safetensors file if present, else the pickle."""
    path = os.path.join(folder, safetensors_name)
    if os.path.exists(path):
        return load_file(path, device="cpu")
    path = os.path.join(folder, pickle_name)
    if os.path.exists(path):
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        return checkpoint.get("state_dict", checkpoint)
    raise FileNotFoundError(f"neither {safetensors_name} nor {pickle_name} in {folder}")


def checkpoint_keys(folder: str) -> set[str]:
    keys = set(_state_dict_file(folder, "model.safetensors", "pytorch_model.bin"))
    keys |= {f"audio_vae.{k}" for k in _state_dict_file(folder, "audiovae.safetensors", "audiovae.pth")}
    return keys


def check_keys(model: torch.nn.Module, folder: str) -> dict:
    """Fail (exit 3, listing them) on checkpoint keys the model lacks or model keys the checkpoint lacks."""
    loaded = checkpoint_keys(folder)
    expected = {k for k in model.state_dict() if "lora_" not in k}  # adapters: checked against their own file
    missing, unexpected = sorted(expected - loaded), sorted(loaded - expected)
    if missing or unexpected:
        print(f"load_state_dict(strict=False) would hide {len(missing)} missing and {len(unexpected)} unexpected keys", file=sys.stderr)
        for key in missing:
            print(f"  missing:    {key}", file=sys.stderr)
        for key in unexpected:
            print(f"  unexpected: {key}", file=sys.stderr)
        sys.exit(3)
    return {"checked": len(expected), "missing": missing, "unexpected": unexpected}


def as_tensor(wav) -> torch.Tensor:
    return torch.from_numpy(wav.copy()).to(torch.float32)


def run_case(m, case: dict) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
    kwargs = {k: v for k, v in case.items() if k not in OWN_KEYS}
    torch.manual_seed(int(case.get("seed", 0)))
    if case.get("streaming", False):
        chunks = [as_tensor(c) for c in m.generate_streaming(**kwargs)]
        return (torch.cat(chunks) if chunks else torch.zeros(0)), chunks
    return as_tensor(m.generate(**kwargs)), None


def main() -> None:
    job, out = read_job()
    from voxcpm import VoxCPM

    lora = {}
    if job.get("lora"):
        import json

        from voxcpm.model.voxcpm2 import LoRAConfig

        described = json.loads(open(os.path.join(job["lora"], "lora_config.json"), encoding="utf-8").read())
        lora = {"lora_config": LoRAConfig(**described["lora_config"]), "lora_weights_path": job["lora"]}
    m = VoxCPM(
        voxcpm_model_path=job["model"],
        zipenhancer_model_path=None,
        enable_denoiser=False,
        optimize=False,
        device="cpu",
        **lora,
    )
    info = {
        "sample_rate": int(m.tts_model.sample_rate),
        "model_class": type(m.tts_model).__name__,
        "dtype": str(m.tts_model.config.dtype),
        "keys": check_keys(m.tts_model, job["model"]),
        "cases": [],
    }
    if lora:
        adapters = set(load_file(os.path.join(job["lora"], "lora_weights.safetensors")))
        own = {k for k in m.tts_model.state_dict() if "lora_" in k}
        if adapters != own:
            print(f"the LoRA weights do not match the model's adapters: {sorted(adapters ^ own)[:5]}", file=sys.stderr)
            sys.exit(3)
        info["adapters"] = len(own)
    tensors = {}
    for i, case in enumerate(job.get("cases", [])):
        wav, chunks = run_case(m, case)
        tensors[f"case{i}"] = wav
        row = {"samples": int(wav.numel()), "streaming": chunks is not None}
        if chunks is not None:
            row["chunks"] = len(chunks)
            row["chunk_samples"] = [int(c.numel()) for c in chunks]
            tensors.update({f"case{i}.chunk{j}": c for j, c in enumerate(chunks)})
        info["cases"].append(row)
    write_results(out, tensors, info)


if __name__ == "__main__":
    main()
