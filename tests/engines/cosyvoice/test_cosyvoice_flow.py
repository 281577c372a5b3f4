"""CosyVoice's flow models (koe.engines.cosyvoice.flow, cfm, flow_encoder, unet, dit) and the
tokens-to-waveform glue (token2wav) on their own: the fixture writer's names and shapes, strict
loading, the precomputed start noise, the streamed chunks' shapes, the hop schedule."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from koe.engines.cosyvoice import cfm
from koe.engines.cosyvoice.fixtures_flow import flow_args, flow_config, flow_state, hift_config, hift_state, write_flow, yaml_sections
from koe.engines.cosyvoice.flow import Flow, FlowConfig, load_flow
from koe.engines.cosyvoice.flow_encoder import chunk_mask, relative_positions
from koe.engines.cosyvoice.hift import hift_tables, load_hift, v3_draws_before_source
from koe.engines.cosyvoice.token2wav import HopSchedule, Token2Wav, fade_in_out


def _inputs(n: int, p: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randint(0, 6561, (1, n), generator=g),
        torch.randint(0, 6561, (1, p), generator=g),
        torch.randn(1, 2 * p, 80, generator=g),
        torch.randn(1, 192, generator=g),
    )


@pytest.fixture(scope="module", params=[2, 3])
def flow(request):
    return request.param, load_flow(flow_state(request.param), flow_config(request.param))


def test_start_noise_is_upstreams_seed0_draw():
    torch.manual_seed(0)
    expected = torch.randn([1, 80, 50 * 300])
    torch.manual_seed(5)
    before = torch.get_rng_state()
    assert torch.equal(cfm.start_noise(123), expected[:, :, :123])
    assert torch.equal(torch.get_rng_state(), before)  # the global generator is not used
    with pytest.raises(ValueError, match="at most 15000"):
        cfm.start_noise(15001)


def test_released_v2_names_and_shapes():
    with torch.device("meta"):
        model = Flow(flow_config(2, "real"))
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert shapes["input_embedding.weight"] == (6561, 512)
    assert shapes["spk_embed_affine_layer.weight"] == (80, 192)
    assert shapes["encoder.embed.out.0.weight"] == (512, 512)
    assert shapes["encoder.encoders.5.self_attn.pos_bias_u"] == (8, 64)
    assert shapes["encoder.up_encoders.3.feed_forward.w_1.weight"] == (2048, 512)
    assert shapes["encoder.pre_lookahead_layer.conv1.weight"] == (512, 512, 4)
    assert shapes["encoder.up_layer.conv.weight"] == (512, 512, 5)
    assert shapes["encoder_proj.weight"] == (80, 512)
    assert shapes["decoder.estimator.time_mlp.linear_1.weight"] == (1024, 320)
    assert shapes["decoder.estimator.down_blocks.0.0.block1.block.0.weight"] == (256, 320, 3)
    assert shapes["decoder.estimator.down_blocks.0.1.3.attn1.to_q.weight"] == (512, 256)
    assert shapes["decoder.estimator.mid_blocks.11.1.3.ff.net.0.proj.weight"] == (1024, 256)
    assert shapes["decoder.estimator.up_blocks.0.0.res_conv.weight"] == (256, 512, 1)
    assert shapes["decoder.estimator.final_proj.weight"] == (80, 256, 1)
    assert "encoder.encoders.0.self_attn.linear_pos.bias" not in shapes
    assert 110e6 < sum(torch.Size(s).numel() for s in shapes.values()) < 116e6  # flow.pt is 451 MB of float32


def test_released_v3_names_and_shapes():
    with torch.device("meta"):
        model = Flow(flow_config(3, "real"))
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert shapes["input_embedding.weight"] == (6561, 80)
    assert shapes["pre_lookahead_layer.conv1.weight"] == (1024, 80, 4)
    assert shapes["pre_lookahead_layer.conv2.weight"] == (80, 1024, 3)
    assert shapes["decoder.estimator.input_embed.proj.weight"] == (1024, 320)
    assert shapes["decoder.estimator.input_embed.conv_pos_embed.conv1.0.weight"] == (1024, 64, 31)
    assert shapes["decoder.estimator.transformer_blocks.21.attn.to_q.weight"] == (1024, 1024)
    assert shapes["decoder.estimator.transformer_blocks.0.ff.ff.0.0.weight"] == (2048, 1024)
    assert shapes["decoder.estimator.norm_out.linear.weight"] == (2048, 1024)
    assert shapes["decoder.estimator.proj_out.weight"] == (80, 1024)
    assert 320e6 < sum(torch.Size(s).numel() for s in shapes.values()) < 340e6  # flow.pt is 1.33 GB of float32


def test_fixture_is_deterministic(tmp_path):
    a = torch.load(write_flow(tmp_path / "a.pt", 2, seed=1), weights_only=True)
    b = flow_state(2, seed=1)
    assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)


def test_strict_loading_names_what_is_wrong():
    state = flow_state(2)
    del state["encoder.after_norm.bias"]
    with pytest.raises(ValueError, match="encoder.after_norm.bias"):
        load_flow(state, flow_config(2))
    state = flow_state(2)
    state["decoder.rand_noise"] = torch.zeros(1)
    with pytest.raises(ValueError, match="decoder.rand_noise"):
        load_flow(state, flow_config(2))


def test_yaml_checks():
    args = flow_args(2)
    args["encoder"] = {**args["encoder"], "use_cnn_module": True}
    with pytest.raises(ValueError, match="use_cnn_module"):
        FlowConfig.from_yaml(args, 2)
    args = flow_args(2)
    args["decoder"] = {**args["decoder"], "estimator": {**args["decoder"]["estimator"], "channels": [256, 256]}}
    with pytest.raises(ValueError, match="one-level"):
        FlowConfig.from_yaml(args, 2)


def test_frames_per_token_and_streamed_chunks(flow):
    version, model = flow
    token, prompt_token, prompt_feat, embedding = _inputs(20, 6)
    torch.manual_seed(3)
    before = torch.get_rng_state()
    mel = model.inference(token, prompt_token, prompt_feat, embedding)
    assert torch.equal(torch.get_rng_state(), before)  # the flow draws nothing
    assert mel.shape == (1, 80, 40) and mel.dtype == torch.float32
    chunk = model.inference(token, prompt_token, prompt_feat, embedding, streaming=True, finalize=False)
    assert chunk.shape == (1, 80, 34)  # the 3 look-ahead tokens make no frames
    streamed = model.inference(token, prompt_token, prompt_feat, embedding, streaming=True)
    assert streamed.shape == mel.shape and not torch.equal(streamed, mel)  # chunk-causal attention
    assert torch.equal(model.inference(token, prompt_token, prompt_feat, embedding), mel)
    with pytest.raises(ValueError, match="batch 1"):
        model.inference(token.repeat(2, 1), prompt_token.repeat(2, 1), prompt_feat.repeat(2, 1, 1), embedding.repeat(2, 1))


def test_chunk_mask_and_positions():
    m = chunk_mask(5, 2)
    assert m.tolist()[0] == [True, True, False, False, False] and m.tolist()[4] == [True] * 5
    pos = relative_positions(4, 8)
    assert pos.shape == (1, 7, 8)
    assert torch.equal(pos[0, 3], torch.tensor([0.0, 1.0] * 4))  # relative position 0


def test_hop_schedule_is_upstreams():
    s = HopSchedule(prompt_tokens=8)
    assert s.pad == 17 and not s.ready(44) and s.ready(45)
    assert s.take() == (45, 0) and s.hop == 50
    assert not s.ready(42 + 52) and s.ready(42 + 53)
    assert s.take() == (95, 42) and s.hop == 100
    assert s.take() == (195, 92) and s.hop == 100  # capped at 4x the start
    assert HopSchedule(prompt_tokens=50).pad == 0


def test_fade_in_out_sums_in_float64():
    window = torch.from_numpy(np.hamming(8))
    a, b = torch.randn(1, 10), torch.randn(1, 10)
    out = fade_in_out(a, b, window)
    expected = (a[:, :4].double() * window[:4] + b[:, -4:].double() * window[4:]).float()
    assert out.dtype == torch.float32 and torch.equal(out[:, :4], expected) and torch.equal(out[:, 4:], a[:, 4:])


def test_token2wav_checks_versions():
    flow2 = load_flow(flow_state(2), flow_config(2))
    hift3 = load_hift(hift_state(3), hift_config(3), hift_tables(v3_draws_before_source(6561, 80, 192, 80, hift_config(3))))
    with pytest.raises(ValueError, match="different CosyVoice versions"):
        Token2Wav(flow2, hift3)


def test_v2_stream_chunk_lengths():
    t2w = Token2Wav(load_flow(flow_state(2), flow_config(2)), load_hift(hift_state(2), hift_config(2)))
    tokens, prompt_token, prompt_feat, embedding = _inputs(80, 0)
    stream, schedule = t2w.stream(prompt_token, prompt_feat, embedding, generator=torch.Generator().manual_seed(0)), HopSchedule(0)
    lengths = []
    while schedule.ready(tokens.shape[1]):
        end, offset = schedule.take()
        lengths.append(stream.chunk(tokens[:, :end], offset).shape[1])
    lengths.append(stream.chunk(tokens, schedule.offset, finalize=True).shape[1])
    # 25 tokens (50 frames) less the 8 held back; then 50 tokens; then the last 5 and the held-back 8 frames
    assert lengths == [(50 - 8) * 480, 100 * 480, (10 + 8) * 480]
    assert sum(lengths) == 80 * 2 * 480


@pytest.mark.parametrize("frames", [7, 123, 400])
@pytest.mark.parametrize("heads", [8, 16])
def test_sdpa_without_a_mask_is_sdpa_with_one_that_hides_nothing(frames, heads):
    # the estimators leave out a mask that hides nothing (offline, unpadded); upstream passes it
    g = torch.Generator().manual_seed(frames)
    q, k, v = (torch.randn(2, heads, frames, 64, generator=g) for _ in range(3))
    plain = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert torch.equal(plain, torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=torch.zeros(2, heads, frames, frames)))
    assert torch.equal(plain, torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(2, 1, frames, frames, dtype=torch.bool)))


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("size", ["tiny", "real"])
def test_yaml_sections_read_back_through_the_config_reader(version, size):
    # the folder's yaml (as koe.engines.cosyvoice.config reads it) gives the writers' architecture
    from koe.engines.cosyvoice.config import parse_yaml, plain
    from koe.engines.cosyvoice.hift import HiFTConfig

    data = parse_yaml(yaml_sections(version, size))
    assert FlowConfig.from_yaml(plain(data["flow"]), version) == flow_config(version, size)
    assert HiFTConfig.from_yaml(plain(data["hift"]), causal=version == 3) == hift_config(version, size)


def test_bad_inputs_are_clear_errors(flow):
    _, model = flow
    token, prompt_token, prompt_feat, embedding = _inputs(10, 4)
    mel = model.inference(token, prompt_token, prompt_feat[:, :-1], embedding)  # a frame short of twice its tokens (an untrimmed VC prompt)
    assert mel.shape[2] == 2 * 10 + 1  # taken as upstream takes it: the prompt conditions its frames, the rest are returned
    with pytest.raises(ValueError, match="nothing is left to speak"):
        model.inference(token[:, :0], prompt_token, prompt_feat, embedding)
    with pytest.raises(ValueError, match="past the flow's 6561"):
        model.inference(torch.tensor([[1, 2, 6561]]), prompt_token, prompt_feat, embedding)
    with pytest.raises(ValueError, match="look-ahead"):
        model.inference(token[:, :2], prompt_token[:, :0], prompt_feat[:, :0], embedding, finalize=False)
    with pytest.raises(ValueError, match="at most 15000"):
        model.inference(torch.zeros(1, 7501, dtype=torch.long), prompt_token[:, :0], prompt_feat[:, :0], embedding)


@pytest.mark.parametrize("version", [2, 3])
def test_load_folder_reads_the_released_files(version, tmp_path):
    from koe.engines.cosyvoice.config import parse_yaml, plain
    from koe.engines.cosyvoice.fixtures_flow import write_hift
    from koe.engines.cosyvoice.token2wav import load_folder
    from koe.runtime.weights import WeightsError

    data = parse_yaml(yaml_sections(version))
    config = SimpleNamespace(version=version, flow=plain(data["flow"]), hift=plain(data["hift"]))  # what it reads of a CosyVoiceConfig
    with pytest.raises(FileNotFoundError, match="flow.pt"):
        load_folder(tmp_path, config)
    write_flow(tmp_path / "flow.pt", version)
    write_hift(tmp_path / "hift.pt", version)
    t2w = load_folder(tmp_path, config)
    assert t2w.version == version
    token, prompt_token, prompt_feat, embedding = _inputs(6, 2)
    assert t2w.offline(token, prompt_token, prompt_feat, embedding, generator=torch.Generator().manual_seed(0)).shape == (1, 12 * 480)
    (tmp_path / "hift.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(WeightsError, match="hift.pt"):
        load_folder(tmp_path, config)
