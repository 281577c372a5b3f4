"""VoxCPM's AudioVAE (V1 and V2) against upstream voxcpm 2.0.3, bit for bit on the CPU in float32.

One oracle run builds upstream's `AudioVAE` / `AudioVAEV2` for each small config below, with random
weights (weight_g too), and returns its state dict, `encode`, `decode` (V2: at several output
rates) and `streaming_decode()` chunk by chunk. koe loads that state dict strictly and must give
`torch.equal` results everywhere; its streamed concatenation is also compared with one decode.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import save_file

from koe.engines.voxcpm.audio_vae import AudioVAE, VAEConfig

SMALL = dict(encoder_dim=16, latent_dim=16, decoder_dim=64)
CASES = [
    # name, version, config, batch, audio samples, latent frames, decode rates, stream patches, noise seed
    ("v1_dw", 1, dict(SMALL, encoder_rates=[2, 5], decoder_rates=[5, 2, 3], depthwise=True), 2, 10 * 7 + 3, 9, [None], [], None),
    ("v1_full", 1, dict(SMALL, encoder_rates=[3, 2], decoder_rates=[4, 3], depthwise=False, sample_rate=24000), 1, 6 * 11, 7, [None], [], None),
    (
        "v2_dw",
        2,
        dict(SMALL, encoder_rates=[2, 5], decoder_rates=[3, 2, 5], depthwise=True),
        2,
        10 * 6 + 1,
        10,
        [None, 16000, 24000, 30000, 44100],
        [1, 2, 1, 3, 3],
        None,
    ),
    ("v2_no_sr", 2, dict(SMALL, encoder_rates=[2, 3], decoder_rates=[2, 4], depthwise=False, sr_bin_boundaries=None), 2, 6 * 9, 8, [None], [3, 1, 4], None),
    (
        "v2_add",
        2,
        dict(
            SMALL,
            encoder_rates=[4],
            decoder_rates=[2, 3, 2],
            depthwise=True,
            cond_type="add",
            cond_out_layer=True,
            sr_bin_boundaries=[24000],
            out_sample_rate=24000,
        ),
        2,
        4 * 5,
        6,
        [None, 48000],
        [2, 2, 2],
        None,
    ),
    (
        "v2_concat",
        2,
        dict(SMALL, encoder_rates=[2, 2], decoder_rates=[5, 2], depthwise=False, cond_type="concat", cond_dim=8, cond_out_layer=True),
        1,
        4 * 8,
        7,
        [None, 16000],
        [1, 1, 5],
        None,
    ),
    (
        "v2_scale_bias_init",
        2,
        dict(SMALL, encoder_rates=[5], decoder_rates=[2, 2, 2, 2], depthwise=True, cond_type="scale_bias_init", cond_out_layer=True),
        2,
        5 * 4,
        5,
        [None, 20000],
        [2, 3],
        None,
    ),
    ("v2_noise", 2, dict(SMALL, encoder_rates=[2], decoder_rates=[3, 2], depthwise=True, use_noise_block=True), 2, 9, 6, [None], [2, 4], 1234),
]


def _case_dict(index: int, case) -> dict:
    name, version, config, _b, _t, _f, rates, patches, noise_seed = case
    return dict(name=name, version=version, config=config, seed=100 + index, encode=True, decode_rates=rates, patches=patches, noise_seed=noise_seed)


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("voxcpm-vae")
    gen = torch.Generator().manual_seed(0)
    inputs = {}
    for name, _v, config, batch, samples, frames, *_ in CASES:
        inputs[f"{name}/audio"] = 0.5 * torch.randn(batch, samples, generator=gen)
        inputs[f"{name}/z"] = torch.randn(batch, config["latent_dim"], frames, generator=gen)
    save_file(inputs, str(workdir / "inputs.safetensors"))
    job = {"inputs": str(workdir / "inputs.safetensors"), "cases": [_case_dict(i, c) for i, c in enumerate(CASES)]}
    tensors, info = run_oracle(
        "vae", job, workdir, family="voxcpm", keep=("*/state/*", "*/decode/0")
    )  # upstream's weights (koe loads them), a decode it slices
    return inputs, tensors, info


def _koe(case, tensors) -> AudioVAE:
    name, version, config = case[:3]
    vae = AudioVAE(VAEConfig.from_json(config, version)).eval()
    prefix = f"{name}/state/"
    vae.load_state_dict({k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}, strict=True)
    return vae


def _ids(cases):
    return [c[0] for c in cases]


def test_defaults_are_upstreams(oracle):
    _, _, info = oracle
    for version in (1, 2):
        upstream = info["defaults"][str(version)]
        assert VAEConfig.from_json(None, version).to_json() == upstream
        assert VAEConfig.from_json({}, version) == VAEConfig.from_json(upstream, version)
    v1, v2 = VAEConfig.from_json(None, 1), VAEConfig.from_json(None, 2)
    assert (v1.hop_length, v1.chunk_size, v1.decode_chunk_size, v1.sample_rate, v1.out_sample_rate) == (640, 640, 640, 16000, 16000)
    assert (v2.hop_length, v2.chunk_size, v2.decode_chunk_size, v2.sample_rate, v2.out_sample_rate) == (640, 640, 1920, 16000, 48000)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_state_dict_names_are_upstreams(oracle, case):
    _, tensors, _ = oracle
    prefix = f"{case[0]}/state/"
    upstream = {k[len(prefix) :]: tuple(v.shape) for k, v in tensors.items() if k.startswith(prefix)}
    mine = {k: tuple(v.shape) for k, v in AudioVAE(VAEConfig.from_json(case[2], case[1])).state_dict().items()}
    assert mine == upstream


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_encode_exact(oracle, case):
    inputs, tensors, _ = oracle
    name = case[0]
    vae = _koe(case, tensors)
    with torch.inference_mode():
        mu = vae.encode(inputs[f"{name}/audio"], vae.sample_rate)
        assert same(mu, tensors[f"{name}/mu"])
        assert torch.equal(vae.encode(inputs[f"{name}/audio"].unsqueeze(1)), mu)  # (B, 1, T) and the default rate
    assert mu.shape[-1] == -(-case[4] // vae.config.hop_length)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_decode_exact(oracle, case):
    inputs, tensors, _ = oracle
    name, rates, noise_seed = case[0], case[6], case[8]
    vae = _koe(case, tensors)
    z = inputs[f"{name}/z"]
    for grad in (False, True):  # in-place kernels without autograd, upstream's plain ops with it
        for i, rate in enumerate(rates):
            if noise_seed is not None:
                torch.manual_seed(noise_seed)
            with torch.inference_mode(not grad):
                audio = vae.decode(z, rate)
            assert audio.shape == (z.shape[0], 1, z.shape[-1] * vae.config.decode_chunk_size)
            assert same(audio, tensors[f"{name}/decode/{i}"]), (name, rate, grad)


STREAMED = [c for c in CASES if c[7]]


@pytest.mark.parametrize("case", STREAMED, ids=_ids(STREAMED))
def test_stream_decoder_exact(oracle, case):
    inputs, tensors, _ = oracle
    name, patches, noise_seed = case[0], case[7], case[8]
    vae = _koe(case, tensors)
    z = inputs[f"{name}/z"]
    dec = vae.stream_decoder()
    for attempt in range(2):  # reset() starts a new stream
        if noise_seed is not None:
            torch.manual_seed(noise_seed)
        start, chunks = 0, []
        with torch.inference_mode():
            for i, n in enumerate(patches):
                chunk = dec.decode(z[..., start : start + n])
                assert same(chunk, tensors[f"{name}/stream/{i}"]), (name, i, attempt)
                chunks.append(chunk)
                start += n
        dec.reset()
    if noise_seed is None:
        one_shot = tensors[f"{name}/decode/0"][..., : start * vae.config.decode_chunk_size]
        diff = (torch.cat(chunks, dim=-1) - one_shot).abs().max().item()
        print(f"{name}: streamed vs one-shot decode, max |diff| = {diff:.3g} (peak {one_shot.abs().max().item():.3g})")
        assert diff < 1e-5


def test_stream_first_chunk_is_a_plain_decode(oracle):
    inputs, tensors, _ = oracle
    case = STREAMED[0]
    vae = _koe(case, tensors)
    z = inputs[f"{case[0]}/z"]
    with torch.inference_mode():
        assert torch.equal(vae.stream_decoder().decode(z), vae.decode(z))


def test_weight_norm_follows_the_parameters(oracle):
    """The folded weights are the hook's bits, and a new state dict (or an in-place edit) refreshes them."""
    inputs, tensors, _ = oracle
    a = CASES[2]
    z = inputs[f"{a[0]}/z"]
    vae = _koe(a, tensors)
    with torch.inference_mode():
        first = vae.decode(z)
        assert torch.equal(vae.decode(z), first)
    conv = vae.decoder.model[0]
    assert torch.equal(conv.weight(), torch._weight_norm(conv.weight_v, conv.weight_g, 0))
    other = {k: (v * 1.5 if k.endswith("weight_g") else v) for k, v in vae.state_dict().items()}
    vae.load_state_dict(other, strict=True)
    with torch.inference_mode():
        changed = vae.decode(z)
    assert not torch.equal(changed, first)
    with torch.no_grad():
        conv.weight_g.mul_(2)
        assert torch.equal(conv.weight(), torch._weight_norm(conv.weight_v, conv.weight_g, 0))


def test_fc_logvar_is_kept():
    vae = AudioVAE(VAEConfig.from_json(dict(SMALL, encoder_rates=[2], decoder_rates=[2]), 2))
    names = set(vae.state_dict())
    assert {"encoder.fc_logvar.weight_g", "encoder.fc_logvar.weight_v", "encoder.fc_logvar.bias"} <= names


def test_errors():
    with pytest.raises(ValueError, match="version"):
        VAEConfig.from_json(None, 3)
    with pytest.raises(ValueError, match="encoder_dim"):
        VAEConfig.from_json({"encoder_dim": 0}, 2)
    with pytest.raises(ValueError, match="decoder_rates"):
        VAEConfig.from_json({"decoder_rates": []}, 1)
    with pytest.raises(ValueError, match="depthwise"):
        VAEConfig.from_json({"depthwise": "yes"}, 2)
    with pytest.raises(ValueError, match="cond_type"):
        VAEConfig.from_json({"cond_type": "film"}, 2)
    with pytest.raises(ValueError, match="cond_out_layer"):
        VAEConfig.from_json({"cond_type": "concat"}, 2)
    with pytest.raises(ValueError, match="sr_bin_boundaries"):
        VAEConfig.from_json({"sr_bin_boundaries": [40000, 20000]}, 2)
    with pytest.raises(ValueError, match="decoder_dim"):
        VAEConfig.from_json({"decoder_dim": 32}, 2)
    with pytest.raises(ValueError, match="audio_vae_config"):
        VAEConfig.from_json([1, 2], 2)
    with pytest.raises(ValueError, match="sr_bin_boundaries"):
        dataclasses.replace(VAEConfig.from_json(None, 1), sr_bin_boundaries=(1,))
    # V1 ignores V2's fields, as upstream's pydantic config ignores unknown keys
    assert VAEConfig.from_json({"out_sample_rate": 48000, "sr_bin_boundaries": [1]}, 1) == VAEConfig.from_json(None, 1)

    small = dict(SMALL, encoder_rates=[2], decoder_rates=[2])
    v1, v2 = AudioVAE(VAEConfig.from_json(small, 1)), AudioVAE(VAEConfig.from_json(small, 2))
    with pytest.raises(ValueError, match="16000 Hz"):
        v2.encode(torch.zeros(1, 8), 24000)
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        v2.encode(torch.zeros(1, 2, 8), 16000)
    with pytest.raises(ValueError, match="16000 Hz only"):
        v1.decode(torch.zeros(1, 16, 2), 48000)
    with pytest.raises(NotImplementedError, match="re-decoding"):
        v1.stream_decoder()
