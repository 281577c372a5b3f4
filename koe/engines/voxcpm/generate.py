"""VoxCPM's core: the prompt sequence, the autoregressive patch loop, and the two ways of turning
patches into audio (one-shot and streaming), each as upstream's `generate` / `generate_streaming`.

The sequence (upstream's `_generate_with_prompt_cache`): `[ref_start, ref patches, ref_end]`
(VoxCPM2's structural reference, when given), the text tokens of `prompt_text + text` and
`audio_start` (101), then the prompt's patches (continuation); text positions carry token
embeddings (times `scale_emb`), audio positions the local encoder's patch embeddings.

The loop makes at most `min(int(tokens(text) * ratio + 10), max_len)` patches — the cap is upstream's
even without retries — and stops when the stop head says so after more than `min_len` patches. One
`randn` per patch from the generator (the DiT's start noise), nothing else: a request with
`seed=N` gives upstream's samples after `torch.manual_seed(N)`. With `retry_badcase`, a
one-shot result of `ratio` patches per text token or more is made again (drawing on, no reseed),
up to `retry_badcase_max_times` runs; the last run is kept whatever its length.

Audio: one-shot decodes all patches at once, with the last prompt patches in front as context
(VoxCPM2: up to 3, cut off after decoding; VoxCPM 1.5: up to 2, and 2 patches' samples are cut
whenever there is a prompt). Streaming is not that: VoxCPM2 decodes each new patch alone with
the VAE's causal-conv state carried over (starting from silence, without the prompt as context);
VoxCPM 1.5 decodes the last 3 patches (prompt context included) for every new patch and keeps
the last patch's samples. So streamed and one-shot samples differ; each equals upstream's same mode.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from koe.engines.base import CancelToken, RequestError
from koe.engines.voxcpm.audio_vae import AudioVAE
from koe.engines.voxcpm.minicpm import SPAN_BLOCK
from koe.engines.voxcpm.model import VoxCPMModel

__all__ = ["AUDIO_START", "GenerationSettings", "PatchLoop", "Sequence", "build_sequence", "encode_clip", "one_shot", "patch_seconds", "stream"]

AUDIO_START, REF_START, REF_END = 101, 103, 104
STREAM_CONTEXT = {2: 4, 1: 3}  # upstream's streaming_prefix_len, by VAE version: context patches + 1


@dataclass(frozen=True)
class GenerationSettings:
    """upstream's `generate(...)` arguments that shape the loop (defaults: `VoxCPM.generate`'s)."""

    cfg_value: float = 2.0
    inference_timesteps: int = 10
    min_len: int = 2
    max_len: int = 4096
    retry_badcase: bool = True
    retry_badcase_max_times: int = 3
    retry_badcase_ratio_threshold: float = 6.0


@dataclass
class Sequence:
    """The model's input for one call, batch of one."""

    tokens: torch.Tensor  # (1, T) int64
    text_mask: torch.Tensor  # (1, T) int32
    feat: torch.Tensor  # (1, T, P, D)
    feat_mask: torch.Tensor  # (1, T) int32
    target_tokens: int  # tokens of the text to speak (the length cap's unit)

    @property
    def length(self) -> int:
        return self.tokens.shape[1]

    def context(self, version: int) -> torch.Tensor:
        """The prompt patches put in front of the generated ones (1, C, P, D); C may be 0."""
        mask = self.feat_mask[0]
        keep = STREAM_CONTEXT[version] - 1
        if version == 2:
            if int(mask[-1]) != 1:
                return self.feat[:, :0]
            audio = mask.nonzero(as_tuple=True)[0]
            return self.feat[:, audio[-min(keep, len(audio)) :]]
        count = int(mask.sum().item())
        return self.feat[:, -min(keep, count) :] if count > 0 else self.feat[:, :0]


def encode_clip(vae: AudioVAE, samples: np.ndarray, patch_size: int, left: bool, device: torch.device) -> torch.Tensor:
    """A clip at the VAE's rate -> its latent patches (T, P, D), zero-padded to whole patches on
    the left (a continuation prompt: the speech ends where the new speech begins) or the right
    (VoxCPM2's reference)."""
    audio = torch.from_numpy(np.ascontiguousarray(samples, dtype=np.float32)).unsqueeze(0)
    patch_len = patch_size * vae.config.chunk_size
    if audio.size(1) % patch_len != 0:
        pad = patch_len - audio.size(1) % patch_len
        audio = torch.nn.functional.pad(audio, (pad, 0) if left else (0, pad))
    with torch.inference_mode():
        feat = vae.encode(audio.to(device), vae.config.sample_rate).cpu()
    return feat.view(vae.config.latent_dim, -1, patch_size).permute(1, 2, 0)


def build_sequence(
    model: VoxCPMModel, tokenize, text: str, prompt_text: str | None = None, prompt_feat: torch.Tensor | None = None, ref_feat: torch.Tensor | None = None
) -> Sequence:
    """upstream's input layout for `text`, with an optional continuation prompt (its patches and
    transcript) and, on VoxCPM2, a structural reference (its patches)."""
    cfg = model.cfg
    p, d = cfg.patch_size, model.feat_encoder.in_proj.in_features
    full = (prompt_text or "") + text if prompt_feat is not None else text
    ids = torch.cat([torch.LongTensor(tokenize(full)), torch.tensor([AUDIO_START], dtype=torch.int32)], dim=-1)
    n = ids.shape[0]
    audio = prompt_feat if prompt_feat is not None else torch.empty((0, p, d), dtype=torch.float32)
    parts_tokens, parts_feat = [ids, torch.zeros(audio.size(0), dtype=torch.int32)], [torch.zeros((n, p, d), dtype=torch.float32), audio]
    text_mask = [torch.ones(n, dtype=torch.int32), torch.zeros(audio.size(0), dtype=torch.int32)]
    feat_mask = [torch.zeros(n, dtype=torch.int32), torch.ones(audio.size(0), dtype=torch.int32)]
    if ref_feat is not None:
        r = ref_feat.size(0)
        one, zero = torch.tensor([1], dtype=torch.int32), torch.tensor([0], dtype=torch.int32)
        z1 = torch.zeros((1, p, d), dtype=torch.float32)
        parts_tokens.insert(
            0, torch.cat([torch.tensor([REF_START], dtype=torch.int32), torch.zeros(r, dtype=torch.int32), torch.tensor([REF_END], dtype=torch.int32)])
        )
        parts_feat.insert(0, torch.cat([z1, ref_feat, z1], dim=0))
        text_mask.insert(0, torch.cat([one, torch.zeros(r, dtype=torch.int32), one]))
        feat_mask.insert(0, torch.cat([zero, torch.ones(r, dtype=torch.int32), zero]))
    dtype = next(model.parameters()).dtype
    return Sequence(
        tokens=torch.cat(parts_tokens).unsqueeze(0),
        text_mask=torch.cat(text_mask).unsqueeze(0),
        feat=torch.cat(parts_feat, dim=0).unsqueeze(0).to(dtype),
        feat_mask=torch.cat(feat_mask).unsqueeze(0),
        target_tokens=len(tokenize(text)),
    )


def patch_limit(seq: Sequence, settings: GenerationSettings) -> int:
    """upstream's cap on the patches of one run."""
    return min(int(seq.target_tokens * settings.retry_badcase_ratio_threshold + 10), settings.max_len)


class PatchLoop:
    """One run of the autoregressive loop: iterate for patches (1, P, D); afterwards `stopped`
    says whether the stop head ended it (else it ran to `limit`)."""

    def __init__(
        self,
        model: VoxCPMModel,
        seq: Sequence,
        settings: GenerationSettings,
        limit: int,
        generator: torch.Generator | None = None,
        cancel: CancelToken | None = None,
    ) -> None:
        self.model, self.seq, self.settings, self.limit = model, seq, settings, limit
        self.generator, self.cancel = generator, cancel
        self.stopped = False
        self.count = 0

    def __iter__(self) -> Iterator[torch.Tensor]:
        model, seq, s = self.model, self.seq, self.settings
        capacity = model.cfg.max_length
        if seq.length >= capacity:
            raise RequestError(
                f"the text and voice prompt take {seq.length} positions, more than the model's context ({capacity}): use a shorter prompt clip or text",
                param="input",
            )
        dev = next(model.parameters()).device
        with torch.inference_mode():
            state = model.prefill(
                seq.tokens.to(dev),
                seq.text_mask.to(dev),
                seq.feat.to(dev),
                seq.feat_mask.to(dev),
                capacity=min(capacity, -(-(seq.length + self.limit) // SPAN_BLOCK) * SPAN_BLOCK),
            )
            for i in range(self.limit):
                if self.cancel is not None:
                    self.cancel.raise_if_cancelled()
                patch = model.next_patch(state, s.inference_timesteps, s.cfg_value, self.generator)
                self.count += 1
                yield patch
                if i > s.min_len and model.stops(state):
                    self.stopped = True
                    return
                if i + 1 < self.limit:
                    if state.lm_cache.length >= capacity:
                        raise RequestError(
                            f"the model's context ({capacity} positions) filled up before the speech ended: use a shorter prompt clip or text", param="input"
                        )
                    model.step(state, patch)


def _to_latents(patches: list[torch.Tensor]) -> torch.Tensor:
    """[(1, P, D) or (1, T, P, D) ...] -> (1, D, T*P) float32, the VAE's input."""
    seq = torch.cat([p if p.dim() == 4 else p.unsqueeze(1) for p in patches], dim=1)
    b, t, p, d = seq.shape
    return seq.permute(0, 3, 1, 2).reshape(b, d, t * p).to(torch.float32)


@dataclass
class OneShot:
    samples: np.ndarray
    patches: int  # generated patches of the kept run
    stopped: bool
    runs: int


def one_shot(
    model: VoxCPMModel,
    vae: AudioVAE,
    seq: Sequence,
    settings: GenerationSettings,
    *,
    limit: int | None = None,
    generator: torch.Generator | None = None,
    cancel: CancelToken | None = None,
) -> OneShot:
    """upstream's `generate`: the loop (with retries), then one decode of context + patches."""
    version = model.cfg.vae_version
    cap = patch_limit(seq, settings) if limit is None else min(limit, patch_limit(seq, settings))
    context = seq.context(version)
    runs = 0
    while True:
        runs += 1
        loop = PatchLoop(model, seq, settings, cap, generator, cancel)
        patches = list(loop)
        made = len(patches) + (context.shape[1] if version == 1 else 0)  # upstream's 1.5 counts its context patches too
        if settings.retry_badcase and made >= seq.target_tokens * settings.retry_badcase_ratio_threshold and runs < settings.retry_badcase_max_times:
            continue
        break
    with torch.inference_mode():
        audio = vae.decode(_to_latents([context.to(patches[0].device), *patches]))
    if version == 2:
        cut = model.cfg.patch_size * vae.config.decode_chunk_size * context.shape[1]
    else:
        cut = model.cfg.patch_size * vae.config.chunk_size * (STREAM_CONTEXT[1] - 1) if int(seq.feat_mask.sum()) > 0 else 0
    samples = audio[..., cut:].squeeze(1).cpu()[0].numpy()
    return OneShot(samples, len(patches), loop.stopped, runs)


def stream(
    model: VoxCPMModel,
    vae: AudioVAE,
    seq: Sequence,
    settings: GenerationSettings,
    *,
    limit: int | None = None,
    generator: torch.Generator | None = None,
    cancel: CancelToken | None = None,
    loop_out: list | None = None,
) -> Iterator[np.ndarray]:
    """upstream's `generate_streaming`: one chunk of samples per patch (no retries, as upstream).
    `loop_out`, if given, receives the `PatchLoop` (its `stopped` and `count` once done)."""
    cap = patch_limit(seq, settings) if limit is None else min(limit, patch_limit(seq, settings))
    loop = PatchLoop(model, seq, settings, cap, generator, cancel)
    if loop_out is not None:
        loop_out.append(loop)
    if model.cfg.vae_version == 2:
        decoder = vae.stream_decoder()
        for patch in loop:
            with torch.inference_mode():
                yield decoder.decode(_to_latents([patch])).squeeze(1).cpu()[0].numpy()
        return
    window = STREAM_CONTEXT[1]
    patch_len = model.cfg.patch_size * vae.config.chunk_size
    recent = list(seq.context(1).split(1, dim=1))
    for patch in loop:
        recent = (recent + [patch.unsqueeze(1)])[-window:]
        with torch.inference_mode():
            audio = vae.decode(_to_latents([r.to(patch.device) for r in recent]))
        yield audio[..., -patch_len:].squeeze(1).cpu()[0].numpy()


def patch_seconds(model: VoxCPMModel, vae: AudioVAE) -> float:
    """Seconds of output audio per patch."""
    return model.cfg.patch_size * vae.config.decode_chunk_size / vae.config.out_sample_rate
