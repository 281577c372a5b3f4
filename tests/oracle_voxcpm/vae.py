"""VoxCPM's AudioVAE (V1 `audio_vae.py`, V2 `audio_vae_v2.py`), run by upstream (voxcpm 2.0.3).

Job (JSON):
  inputs: a safetensors file of input tensors (`<case>/audio` (B, T), `<case>/z` (B, latent, T))
  cases: [{name, version (1 | 2), config (upstream's config fields), seed, encode: bool,
           decode_rates: [null | Hz, ...] (V2's sr_cond; null: the default), patches: [frames, ...]
           (streaming_decode() chunk sizes over z; V2 only), noise_seed (torch.manual_seed before
           each decode and each stream, for the noise block)}]
  bench:  {config, frames, threads, repeats, patch} (optional): time of a V2 config's decode (and of
          streaming_decode() over the same frames, `patch` at a time), random weights
Each case builds upstream's AudioVAE from its config, fills every tensor of its state dict from a
generator seeded with `seed` (weight_g too, so weight norm is not the identity) and writes
`<case>/state/<key>`, `<case>/mu`, `<case>/decode/<i>` (one per decode rate) and
`<case>/stream/<i>` (one per patch), all under torch.inference_mode (as upstream's generate).
Info: `defaults` (each version's config defaults), `bench: {seconds: [...], stream_seconds: [...]}`, `version` (voxcpm's).

The audiovae modules are loaded from the installed package's files, without importing `voxcpm`
itself (its __init__ pulls in the whole TTS stack, which these modules do not use).
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import torch
from common import read_job, write_results
from safetensors.torch import load_file


def _module(name: str):
    root = Path(importlib.util.find_spec("voxcpm").submodule_search_locations[0])
    spec = importlib.util.spec_from_file_location(f"_koe_oracle_{name}", root / "modules" / "audiovae" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(version: int, config: dict):
    m = _module("audio_vae" if version == 1 else "audio_vae_v2")
    return m.AudioVAE(m.AudioVAEConfig(**config)).eval()


def randomise(vae: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """Every float tensor of the state dict from torch.Generator(seed), in sorted-name order."""
    gen = torch.Generator().manual_seed(seed)
    state = vae.state_dict()
    new = {}
    for key in sorted(state):
        t = state[key]
        if not t.is_floating_point():
            new[key] = t.clone()
        elif key.endswith("weight_g"):
            new[key] = 0.4 + 0.6 * torch.rand(t.shape, generator=gen)
        elif key.endswith("weight_v"):
            new[key] = torch.randn(t.shape, generator=gen)
        elif key.endswith("alpha"):
            new[key] = 0.5 + torch.rand(t.shape, generator=gen)
        elif "scale_embed" in key:
            new[key] = 1 + 0.2 * torch.randn(t.shape, generator=gen)
        else:  # biases, bias / cond embeddings
            new[key] = 0.1 * torch.randn(t.shape, generator=gen)
    vae.load_state_dict(new, strict=True)
    return new


def run_case(case: dict, inputs: dict[str, torch.Tensor], tensors: dict[str, torch.Tensor]) -> None:
    name, version = case["name"], case["version"]
    vae = build(version, case["config"])
    for key, t in randomise(vae, case["seed"]).items():
        tensors[f"{name}/state/{key}"] = t
    noise_seed = case.get("noise_seed")
    with torch.inference_mode():
        if case.get("encode"):
            tensors[f"{name}/mu"] = vae.encode(inputs[f"{name}/audio"], vae.sample_rate)
        z = inputs.get(f"{name}/z")
        for i, rate in enumerate(case.get("decode_rates", [])):
            if noise_seed is not None:
                torch.manual_seed(noise_seed)
            if version == 1:
                tensors[f"{name}/decode/{i}"] = vae.decode(z)
            else:
                sr = None if rate is None else torch.tensor([rate], dtype=torch.int32)
                tensors[f"{name}/decode/{i}"] = vae.decode(z, sr)
        if case.get("patches"):
            if noise_seed is not None:
                torch.manual_seed(noise_seed)
            start = 0
            with vae.streaming_decode() as dec:
                for i, n in enumerate(case["patches"]):
                    tensors[f"{name}/stream/{i}"] = dec.decode_chunk(z[..., start : start + n])
                    start += n


def bench(job: dict) -> dict:
    torch.set_num_threads(job.get("threads", 2))
    vae = build(2, job["config"])
    randomise(vae, 0)
    z = torch.randn(1, vae.latent_dim, job["frames"], generator=torch.Generator().manual_seed(1))
    seconds = []
    with torch.inference_mode():
        vae.decode(z)
        for _ in range(job.get("repeats", 3)):
            t0 = time.perf_counter()
            vae.decode(z)
            seconds.append(time.perf_counter() - t0)
        stream = []
        for _ in range(job.get("repeats", 3) if job.get("patch") else 0):
            t0 = time.perf_counter()
            with vae.streaming_decode() as dec:
                for start in range(0, z.shape[-1], job["patch"]):
                    dec.decode_chunk(z[..., start : start + job["patch"]])
            stream.append(time.perf_counter() - t0)
    return {"seconds": seconds, "stream_seconds": stream}


def main() -> None:
    job, out = read_job()
    inputs = load_file(job["inputs"]) if job.get("inputs") else {}
    tensors: dict[str, torch.Tensor] = {}
    info: dict = {}
    try:
        from importlib.metadata import version

        info["version"] = version("voxcpm")
    except Exception:
        info["version"] = None
    info["defaults"] = {v: _module(m).AudioVAEConfig().model_dump() for v, m in (("1", "audio_vae"), ("2", "audio_vae_v2"))}
    for case in job.get("cases", []):
        run_case(case, inputs, tensors)
    if job.get("bench"):
        info["bench"] = bench(job["bench"])
    write_results(out, tensors, info)


if __name__ == "__main__":
    main()
