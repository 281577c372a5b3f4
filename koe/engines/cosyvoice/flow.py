"""CosyVoice's flow models: speech tokens (25 Hz) + a prompt's tokens and mel + a speaker vector ->
mel frames (50 Hz, 80 bins), named as the released `flow.pt`.

- **v2** (`CausalMaskedDiffWithXvec`): tokens embedded (512), the upsampling conformer encoder
  (`flow_encoder`), a projection to 80, then the CFM (`cfm`) with the causal U-Net (`unet`).
- **v3** (`CausalMaskedDiffWithDiT`): tokens embedded (80), a look-ahead conv layer, each token
  repeated for its two frames, then the CFM with the DiT (`dit`).

Both: the speaker embedding (192, CAM++) is L2-normalised and projected to 80; the prompt's mel
conditions the first frames; the output drops them. `streaming=True` is upstream's chunk-causal
attention; `finalize=False` treats the last 3 tokens as look-ahead only (a streamed chunk: they
make no frames). Upstream's `flow.inference` returns the same frames bit for bit (CPU, float32).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from koe.engines.cosyvoice import cfm
from koe.engines.cosyvoice.dit import DiT, DiTConfig
from koe.engines.cosyvoice.flow_encoder import EncoderConfig, PreLookahead, UpsampleConformerEncoder
from koe.engines.cosyvoice.unet import CausalUNet, UNetConfig
from koe.runtime.weights import build_on_meta

__all__ = ["Flow", "FlowConfig", "load_flow"]


@dataclass(frozen=True)
class FlowConfig:
    """The yaml's `flow` mapping, read for the parts koe builds."""

    version: int
    input_size: int
    output_size: int = 80
    spk_embed_dim: int = 192
    vocab_size: int = 6561
    input_frame_rate: int = 25
    token_mel_ratio: int = 2
    pre_lookahead_len: int = 3
    inference_cfg_rate: float = 0.7
    encoder: EncoderConfig | None = None  # v2
    unet: UNetConfig | None = None  # v2
    dit: DiTConfig | None = None  # v3
    lookahead_channels: int = 1024  # v3's pre-lookahead layer

    @classmethod
    def from_yaml(cls, args: dict[str, Any], version: int) -> FlowConfig:
        decoder = args.get("decoder") or {}
        params = decoder.get("cfm_params") or {}
        params = params.get("content", params)
        if params.get("t_scheduler", "cosine") != "cosine" or params.get("solver", "euler") != "euler":
            raise ValueError("flow.decoder.cfm_params: koe runs the released Euler solver on the cosine schedule")
        if int(args.get("output_size", 80)) != 80 or int(decoder.get("spk_emb_dim", 80)) != 80:
            raise ValueError("flow: koe runs 80-bin mels (upstream's CFM hard-codes 80)")
        common = {
            "version": version,
            "input_size": int(args.get("input_size", 512)),
            "output_size": 80,
            "spk_embed_dim": int(args.get("spk_embed_dim", 192)),
            "vocab_size": int(args.get("vocab_size", 4096)),
            "input_frame_rate": int(args.get("input_frame_rate", 50)),
            "token_mel_ratio": int(args.get("token_mel_ratio", 2)),
            "pre_lookahead_len": int(args.get("pre_lookahead_len", 3)),
            "inference_cfg_rate": float(params.get("inference_cfg_rate", 0.7)),
        }
        estimator = decoder.get("estimator") or {}
        if version == 2:
            if common["input_size"] != 512 or int(args.get("pre_lookahead_len", 3)) != 3:
                raise ValueError("flow (v2): upstream's encoder is built at 512 with a 3-token look-ahead; the yaml says otherwise")
            return cls(**common, encoder=EncoderConfig.from_yaml(args.get("encoder") or {}), unet=UNetConfig.from_yaml(estimator))
        look = args.get("pre_lookahead_layer") or {}
        return cls(**common, dit=DiTConfig.from_yaml(estimator), lookahead_channels=int(look.get("channels", 1024)))


class Decoder(nn.Module):
    """`flow.decoder`: the CFM sampler around its estimator (`decoder.estimator.*`)."""

    def __init__(self, estimator: nn.Module, cfg_rate: float) -> None:
        super().__init__()
        self.estimator = estimator
        self.cfg_rate = cfg_rate

    def forward(self, mu: torch.Tensor, mask: torch.Tensor, spks: torch.Tensor, cond: torch.Tensor, streaming: bool) -> torch.Tensor:
        return cfm.solve(self.estimator, mu, mask, spks, cond, n_timesteps=10, cfg_rate=self.cfg_rate, streaming=streaming)


class Flow(nn.Module):
    """The v2 or v3 flow; `inference` is upstream's `flow.inference` for one utterance."""

    def __init__(self, config: FlowConfig) -> None:
        super().__init__()
        c = self.config = config
        self.input_embedding = nn.Embedding(c.vocab_size, c.input_size)
        self.spk_embed_affine_layer = nn.Linear(c.spk_embed_dim, c.output_size)
        if c.version == 2:
            assert c.encoder is not None and c.unet is not None
            self.encoder = UpsampleConformerEncoder(c.encoder)
            self.encoder_proj = nn.Linear(512, c.output_size)
            self.decoder = Decoder(CausalUNet(c.unet), c.inference_cfg_rate)
        else:
            assert c.dit is not None
            self.pre_lookahead_layer = PreLookahead(c.input_size, c.lookahead_channels, c.pre_lookahead_len)
            self.decoder = Decoder(DiT(c.dit), c.inference_cfg_rate)

    def _hidden(self, token: torch.Tensor, finalize: bool, streaming: bool) -> torch.Tensor:
        """Embedded tokens (1, L, C) -> frames the CFM is conditioned on, (1, T, 80)."""
        c = self.config
        look = c.pre_lookahead_len
        if c.version == 2:
            if finalize:
                h = self.encoder(token, streaming=streaming)
            else:
                h = self.encoder(token[:, :-look], context=token[:, -look:], streaming=streaming)
            return self.encoder_proj(h)
        if finalize:
            h = self.pre_lookahead_layer(token)
        else:
            h = self.pre_lookahead_layer(token[:, :-look], context=token[:, -look:])
        return h.repeat_interleave(c.token_mel_ratio, dim=1)

    @torch.inference_mode()
    def inference(
        self,
        token: torch.Tensor,
        prompt_token: torch.Tensor,
        prompt_feat: torch.Tensor,
        embedding: torch.Tensor,
        streaming: bool = False,
        finalize: bool = True,
    ) -> torch.Tensor:
        """token (1, N), prompt_token (1, P) ids; prompt_feat (1, F, 80) the prompt's mel; embedding
        (1, 192) the speaker vector -> mel (1, 80, frames) of the new tokens (2 per token; with
        `finalize=False` the last 3 tokens make none). The prompt's mel conditions the first F of
        the 2 (N + P) frames and the rest are returned, as upstream's: F is 2P where the front end
        trimmed the prompt (text-to-speech), and may be a frame more or less where it did not
        (voice conversion), which moves the first returned frame by as much."""
        if token.shape[0] != 1:
            raise ValueError("the flow runs one utterance at a time (batch 1), as upstream's")
        c = self.config
        if not finalize and token.shape[1] + prompt_token.shape[1] <= c.pre_lookahead_len:
            raise ValueError(f"a streamed chunk needs more than {c.pre_lookahead_len} tokens (its look-ahead)")
        frames = c.token_mel_ratio * (token.shape[1] + prompt_token.shape[1] - (0 if finalize else c.pre_lookahead_len))
        if prompt_feat.shape[1] >= frames:
            raise ValueError(f"the prompt's mel has {prompt_feat.shape[1]} frames, as many as the {frames} the flow makes with it: nothing is left to speak")
        if frames > cfm.MAX_FRAMES:
            raise ValueError(f"{frames} mel frames (prompt included): the flow makes at most {cfm.MAX_FRAMES} per call (300 s), upstream's noise table")
        for name, ids in (("token", token), ("prompt_token", prompt_token)):
            if ids.numel() and (int(ids.max()) >= c.vocab_size):
                raise ValueError(f"{name}: speech token {int(ids.max())} is past the flow's {c.vocab_size} (an LM's stop or control id?)")
        embedding = self.spk_embed_affine_layer(F.normalize(embedding, dim=1))
        token = torch.concat([prompt_token, token], dim=1)
        mask = torch.ones(1, token.shape[1], 1, dtype=embedding.dtype, device=embedding.device)
        token = self.input_embedding(torch.clamp(token, min=0)) * mask
        h = self._hidden(token, finalize, streaming)
        prompt_frames = prompt_feat.shape[1]
        frames = h.shape[1]
        conds = torch.zeros([1, frames, c.output_size], device=token.device).to(h.dtype)
        conds[:, :prompt_frames] = prompt_feat
        conds = conds.transpose(1, 2)
        frame_mask = torch.ones(1, 1, frames, dtype=h.dtype, device=h.device)
        feat = self.decoder(h.transpose(1, 2).contiguous(), frame_mask, embedding, conds, streaming)
        return feat[:, :, prompt_frames:].float()


def load_flow(state: dict[str, torch.Tensor], config: FlowConfig) -> Flow:
    """A flow from `flow.pt`'s state dict, strictly: a missing or unexpected tensor is an error naming it."""
    model = build_on_meta(lambda: Flow(config))  # no random init: its meta-tensor `normal_` imports torch's compiler
    wanted = set(model.state_dict())
    missing, unexpected = sorted(wanted - set(state)), sorted(set(state) - wanted)
    if missing or unexpected:
        raise ValueError(f"flow.pt does not match the v{config.version} flow: missing {missing[:8]}, unexpected {unexpected[:8]}")
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval()
