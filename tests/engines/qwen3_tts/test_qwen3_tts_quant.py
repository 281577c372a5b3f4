"""int8 linear layers against float32 references, with stated tolerances."""

from __future__ import annotations

import torch

from koe.engines.qwen3_tts.native import Qwen3TTS
from koe.runtime.quant import Int8Linear, quantize_linears, quantize_per_channel


def test_quantize_per_channel_round_trip() -> None:
    w = torch.randn(64, 256, generator=torch.Generator().manual_seed(0))
    q, scale = quantize_per_channel(w)
    assert q.dtype == torch.int8 and q.abs().max() <= 127
    # symmetric rounding: each weight within half a step of its channel's scale
    assert ((q.float() * scale[:, None] - w).abs() <= scale[:, None] / 2 + 1e-6).all()


def test_int8_linear_close_to_fp32() -> None:
    g = torch.Generator().manual_seed(1)
    for bias in (False, True):
        linear = torch.nn.Linear(1024, 3072, bias=bias)
        with torch.no_grad():
            linear.weight.copy_(torch.randn(3072, 1024, generator=g) / 32)
        x = torch.randn(2, 3, 1024, generator=g)
        ref = linear(x)
        got = Int8Linear(linear)(x)
        assert got.shape == ref.shape and got.dtype == torch.float32
        rel = ((got - ref).norm() / ref.norm()).item()
        cos = torch.nn.functional.cosine_similarity(got.flatten(), ref.flatten(), dim=0).item()
        assert rel < 0.03, rel  # 8-bit weights and 7-bit dynamic activations: ~1.5% measured
        assert cos > 0.999, cos
        # and against the exact product of the dequantized weight: only activation rounding remains
        q, scale = quantize_per_channel(linear.weight)
        deq = torch.nn.functional.linear(x, q.float() * scale[:, None], linear.bias)
        assert ((got - deq).norm() / deq.norm()).item() < 0.02


def test_quantize_linears_replaces_in_place() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(32, 8)))
    assert quantize_linears(model, skip=("2",)) == 1
    assert isinstance(model[0], Int8Linear) and isinstance(model[2][0], torch.nn.Linear)
    assert model(torch.randn(4, 16)).shape == (4, 8)


def test_fused_projections_equal_separate_int8_layers() -> None:
    from koe.nn.decoder import DecoderLayer, DecoderSpec

    torch.manual_seed(0)
    spec = DecoderSpec(hidden_size=64, intermediate_size=96, num_layers=1, num_heads=4, num_kv_heads=2, head_dim=16, rms_norm_eps=1e-6, rope_theta=1e6)
    separate = DecoderLayer(spec)
    fused = DecoderLayer(spec)
    fused.load_state_dict(separate.state_dict())
    assert quantize_linears(separate, fuse=False) == 7
    assert quantize_linears(fused) == 7
    assert fused.self_attn.qkv_proj is not None and not hasattr(fused.self_attn, "q_proj") and fused.mlp.gate_up_proj is not None
    x = torch.randn(1, 3, 64)
    cos, sin = torch.ones(1, 1, 3, 16), torch.zeros(1, 1, 3, 16)
    # one activation quantization per call from the same input, per-channel weight scales: the same numbers
    assert torch.equal(separate(x, cos, sin, None, None), fused(x, cos, sin, None, None))


def test_int4_and_int8_modes_are_named_with_their_kernel(session_tmp) -> None:
    import warnings

    from fixtures_models import model_folder

    from koe.engines.qwen3_tts.engine import Qwen3TTSEngine
    from koe.runtime import kernels
    from koe.runtime.quant import Int4Linear

    folder = model_folder(session_tmp, "custom_voice")
    results = {}
    for mode in ("int8", "int4"):
        engine = Qwen3TTSEngine.load(folder, device="cpu", precision=mode)
        assert engine.precision == mode and engine.kernel == kernels.describe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results[mode] = Qwen3TTS(engine).generate("Hello there.", speaker="ryan", language="english", seed=0, max_new_tokens=6)
        assert results[mode].metadata["precision"] == mode and results[mode].metadata["kernel"] == kernels.describe()
        if mode == "int4":
            assert isinstance(engine.network.talker.model.layers[0].mlp.gate_up_proj, Int4Linear)
            assert isinstance(engine.network.talker.code_predictor.lm_head[0], Int4Linear)
            # the text projection stays float32 in both modes
            assert isinstance(engine.network.talker.text_projection.linear_fc1, torch.nn.Linear)
    # the exact path names koe's exact kernel where it runs the products (torch's bits), else none
    from koe.runtime import exact as exact_products

    exact = Qwen3TTSEngine.load(folder, device="cpu")
    assert exact.precision == "float32"
    if exact_products.summation_orders() is None:
        assert "kernel" not in exact.result_metadata()
    else:
        assert exact.result_metadata()["kernel"] == exact_products.describe(exact.network.talker) == "koe-exact-fp32"  # float32 random weights
        assert isinstance(exact.network.talker.code_predictor.lm_head[0], exact_products.ExactLinear)


def test_low_precision_modes_step_the_stacks_in_c(session_tmp) -> None:
    """int8 / int4: the talker's and the code predictor's stacks run on koe's C step (koe.nn.kernel_stack),
    teacher-forced logits equal the kernel-layer modules' within float rounding, and a greedy batch
    of texts of different lengths (left padding) gives each text's codes alone."""
    from dataclasses import replace

    from fixtures_models import model_folder, talker_request

    from koe.bench.accuracy import compare
    from koe.engines.qwen3_tts.bench.accuracy import forced_logits
    from koe.engines.qwen3_tts.engine import Qwen3TTSEngine
    from koe.nn.kernel_stack import KernelStack

    for size in ("tiny", "tiny-proj"):  # tiny-proj: the 1.7B layout (a projection into the code predictor)
        folder = model_folder(session_tmp, "custom_voice", size)
        for mode in ("int8", "int4"):
            engine = Qwen3TTSEngine.load(folder, device="cpu", precision=mode)
            talker = engine.network.talker
            assert isinstance(talker.model.kernel, KernelStack) and isinstance(talker.code_predictor.model.kernel, KernelStack)
            items = engine.prompt_items(["Hello there, how are you?"], ["english"], ["ryan"], [None])
            codes = torch.randint(0, 2048, (8, engine.cfg.talker.code_predictor.num_code_groups), generator=torch.Generator().manual_seed(3))
            t_c, p_c = forced_logits(engine, items, codes)
            stacks = talker.model.kernel, talker.code_predictor.model.kernel
            talker.model.kernel = talker.code_predictor.model.kernel = None  # the kernel-layer modules
            t_m, p_m = forced_logits(engine, items, codes)
            talker.model.kernel, talker.code_predictor.model.kernel = stacks
            for got, want in ((t_c, t_m), (p_c, p_m)):
                # within float rounding, except where that rounding moves an activation across an
                # 8-bit step (the kernels quantize every product's input): then one logit row moves
                # by about a step's worth (seen: int4 tiny, max 0.03, cosine 0.99995)
                assert compare(want, got)["cosine_min"] > 0.9999, (size, mode)
                assert (got - want).abs().median() < 1e-5, (size, mode)

            texts = ["Hi.", "A rather longer sentence than the first one."]
            _, settings = talker_request(engine, texts, max_new_tokens=7, greedy=True)
            settings = replace(settings, eos_id=settings.suppress_ids[-1])

            with torch.inference_mode():
                batch = _greedy_frames(engine, texts, settings)
                assert all(torch.equal(batch[row], _greedy_frames(engine, [text], settings)[0]) for row, text in enumerate(texts)), (size, mode)


def _greedy_frames(engine, texts: list[str], settings) -> torch.Tensor:
    """Codes (B, T, G) of `texts` spoken by "ryan", the whole text in the prompt (so a shorter text is left padded)."""
    from koe.engines.qwen3_tts.generate import decode_frames
    from koe.engines.qwen3_tts.prompt import build_talker_inputs

    items = engine.prompt_items(texts, ["english"] * len(texts), ["ryan"] * len(texts), [None] * len(texts))
    inputs = build_talker_inputs(engine.network.talker, engine.cfg, items, True)
    assert len(texts) == 1 or not bool(inputs.attention_mask.all())
    return torch.stack([f.codes for f in decode_frames(engine.network.talker, inputs, settings)], dim=1)
