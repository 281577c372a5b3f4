"""Error of a VoxCPM precision mode against the exact float32 path, on the same weights.

Teacher forcing: the float32 engine makes `patches` latent patches (the stop head ignored, each
patch's noise from its own seed); then the mode's engine reads the same prompt and is fed exactly
those patches. At every step we compare what the two LMs hand the DiT (its condition: cosine), the
stop head's logits (cosine, and whether both say stop or go), and the patch the mode's DiT samples
from the same noise (SNR against the float32 patch); and the AudioVAE's waveform of the mode's
patches against the float32 ones (SNR; the VAE is float32 in every mode).

    python -m koe.bench.accuracy --family voxcpm --precision int8 [--variant VoxCPM1.5] [--size real] [--patches 24]

VoxCPM's `accuracy` tool (`BENCH.tools`); its command line, the cosine and the SNR are the benchmark's
own (`kit.accuracy_tool`, `kit.cosine`, `kit.snr_db`).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

TEXT = "The quick brown fox jumps over the lazy dog, and then it runs back home."


@torch.inference_mode()
def forced_run(engine, patches: int, feed: list[torch.Tensor] | None = None, seed: int = 0) -> dict:
    """One run of `patches` steps: the DiT's conditions, the stop logits and the sampled patches;
    each step's next input is `feed[i]` where given (teacher forcing), else the patch just sampled."""
    from koe.engines.voxcpm.minicpm import SPAN_BLOCK

    model, settings = engine.model, engine.settings(None)
    seq = engine.sequence(TEXT, None)
    capacity = -(-(seq.length + patches) // SPAN_BLOCK) * SPAN_BLOCK
    state = model.prefill(seq.tokens, seq.text_mask, seq.feat, seq.feat_mask, capacity=capacity)
    conds, stops, made = [], [], []
    for i in range(patches):
        conds.append(model.dit_condition(state).float()[0])
        stops.append(model.stop_head(F.silu(model.stop_proj(state.lm_hidden))).float()[0])
        patch = model.next_patch(state, settings.inference_timesteps, settings.cfg_value, torch.Generator().manual_seed(seed + i))
        made.append(patch.float())
        model.step(state, (feed[i] if feed is not None else patch).to(patch.dtype))
    return {"conditions": torch.stack(conds), "stops": torch.stack(stops), "patches": made}


def measure(kit, folder: Path, precision: str, patches: int = 24, seed: int = 0) -> dict:
    from koe.engines.voxcpm.engine import VoxCPMEngine
    from koe.engines.voxcpm.generate import _to_latents

    exact = VoxCPMEngine.load(folder, device="cpu", precision="fp32")
    ref = forced_run(exact, patches, seed=seed)
    mode = VoxCPMEngine.load(folder, device="cpu", precision=precision)
    got = forced_run(mode, patches, feed=ref["patches"], seed=seed)
    with torch.inference_mode():
        wav_ref, wav_mode = (exact.vae.decode(_to_latents(run["patches"])).float() for run in (ref, got))
    agree = (ref["stops"].argmax(-1) == got["stops"].argmax(-1)).double().mean().item()
    return {
        "variant": mode.variant,
        "precision": mode.precision,
        "kernel": mode.kernel,
        "patches": patches,
        "dit_condition": kit.cosine(ref["conditions"], got["conditions"]),
        "stop": {**kit.cosine(ref["stops"], got["stops"]), "agreement": agree},
        "patch_snr_db": kit.snr_db(torch.cat(ref["patches"]), torch.cat(got["patches"])),
        "waveform_snr_db": kit.snr_db(wav_ref, wav_mode),
    }


def main(kit, argv: list[str] | None = None) -> int:
    from koe.engines.voxcpm.bench.models import SIZES, VARIANTS

    help = "random weights (real: the release's shapes, stored in bf16 as released)"
    patches = (("--patches", {"type": int, "default": 24}),)
    return kit.accuracy_tool(kit, argv, "voxcpm", __doc__, measure, ("bf16", "int8"), SIZES, variants=VARIANTS, size_help=help, options=patches)
