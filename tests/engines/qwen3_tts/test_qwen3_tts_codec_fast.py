"""The fast codec of the opt-in modes (codec/fast.py, koe/runtime/kernels/snake.c): its parts against
the exact layers, its waveform against the exact codec (SNR), streaming against one-shot, which
engines use it and what their results say, and that the exact path is untouched."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fixtures_models import push_all

from koe.engines.qwen3_tts.codec import SpeechTokenizer
from koe.engines.qwen3_tts.codec.fast import (
    FastCodec,
    FastConvTranspose,
    FastMonoConv,
    cpu_has_bf16_dot,
    fast_codec_for,
)
from koe.engines.qwen3_tts.codec.incremental import ConvState, ConvTransposeState
from koe.engines.qwen3_tts.codec.random_weights import write_random_speech_tokenizer
from koe.engines.qwen3_tts.native import Qwen3TTS
from koe.nn.conv import CausalConv1d, CausalConvTranspose1d, SnakeBeta
from koe.runtime.kernels import snake as snake_kernel

SPF = 1920
IRREGULAR = (5, 1, 17, 3, 40, 2, 29)
# Measured on the tiny codec (several code sequences): bf16 fast vs exact 37.3-37.5 dB, fp32 fast vs
# exact 119-124 dB; bf16 streamed vs its own one-shot 50-56 dB (the bf16 products round differently
# in other piece sizes). The bounds leave a margin and still catch a wrong layer (a lost residual,
# bias or overlap gives SNRs near 0 dB).
BF16_SNR_DB = 32.0
FP32_SNR_DB = 90.0
BF16_STREAM_SNR_DB = 42.0
FP32_SAMPLE_BOUND = 1e-5  # as the exact codec's streaming (test_qwen3_tts_codec_incremental.py)
DEFAULT_FAST = "bf16" if cpu_has_bf16_dot() else "fp32"  # the int8 / int4 default on this CPU


def snr_db(ref: torch.Tensor, test: torch.Tensor) -> float:
    noise = (ref.double() - test.double()).pow(2).sum().item()
    return math.inf if noise == 0 else 10 * math.log10(ref.double().pow(2).sum().item() / noise)


@pytest.fixture(scope="module")
def codec(tmp_path_factory) -> SpeechTokenizer:
    folder = tmp_path_factory.mktemp("codec_fast_tiny")
    write_random_speech_tokenizer(folder, size="tiny")
    return SpeechTokenizer.from_folder(folder)


def _codes(frames: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 2048, (frames, 16), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- SnakeBeta in one pass
def _snake_inputs(channels: int = 24, steps: int = 1000, scale: float = 4.0):
    g = torch.Generator().manual_seed(channels)
    act = SnakeBeta(channels)
    with torch.no_grad():
        act.alpha.copy_(0.3 * torch.randn(channels, generator=g))
        act.beta.copy_(0.3 * torch.randn(channels, generator=g))
    x = scale * torch.randn(2, channels, steps, generator=g)
    alpha = torch.exp(act.alpha.detach())
    inv_beta = 1.0 / (torch.exp(act.beta.detach()) + 1e-9)
    return act, x, alpha.contiguous(), inv_beta.contiguous()


def test_snake_kernel_builds_here() -> None:
    assert snake_kernel.describe() == "koe-c", "snake.c should build with this machine's compiler"


def test_snake_beta_matches_the_module() -> None:
    act, x, alpha, inv_beta = _snake_inputs()
    with torch.no_grad():
        ref = act(x)
    got = snake_kernel.snake_beta(x, alpha, inv_beta)
    assert got.dtype == torch.float32 and got.shape == ref.shape
    assert (got - ref).abs().max() <= 1e-5  # a polynomial sin: ~1e-6 here
    fallback = snake_kernel._torch_snake_beta(x, alpha, inv_beta)
    assert (fallback - ref).abs().max() <= 1e-5


def test_snake_beta_bfloat16_in_and_out() -> None:
    act, x, alpha, inv_beta = _snake_inputs()
    with torch.no_grad():
        ref = act(x)
        ref_from_bf16 = act(x.bfloat16().float())
    out_bf16 = snake_kernel.snake_beta(x, alpha, inv_beta, torch.bfloat16)
    assert out_bf16.dtype == torch.bfloat16
    assert torch.equal(out_bf16, (snake_kernel.snake_beta(x, alpha, inv_beta)).bfloat16())  # rounded as torch rounds
    both = snake_kernel.snake_beta(x.bfloat16(), alpha, inv_beta, torch.bfloat16)
    assert torch.equal(both, snake_kernel.snake_beta(x.bfloat16().float(), alpha, inv_beta).bfloat16())
    to_f32 = snake_kernel.snake_beta(x.bfloat16(), alpha, inv_beta, torch.float32)
    assert (to_f32 - ref_from_bf16).abs().max() <= 1e-5
    assert (out_bf16.float() - ref).abs().max() <= ref.abs().max() * 2**-8 + 1e-6


def test_snake_beta_same_bits_for_any_thread_count() -> None:
    _, x, alpha, inv_beta = _snake_inputs(channels=96, steps=3000)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = snake_kernel.snake_beta(x, alpha, inv_beta)
        torch.set_num_threads(max(2, threads))
        many = snake_kernel.snake_beta(x, alpha, inv_beta)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, many)


def test_snake_beta_large_arguments() -> None:
    """The range reduction holds far beyond a codec's activations."""
    x = torch.linspace(-2000, 2000, 40001).reshape(1, 1, -1)
    ones = torch.ones(1)
    got = snake_kernel.snake_beta(x, ones, ones)
    ref = x.double() + torch.sin(x.double()) ** 2
    assert (got.double() - ref).abs().max() <= 2e-4  # x's own float32 spacing near 2000 is 1.2e-4


# ---------------------------------------------------------------- the fast layers against the exact ones
@pytest.mark.parametrize("kernel, stride", [(4, 2), (2, 2), (5, 2), (6, 3), (16, 8)])
def test_transposed_conv_as_one_product(kernel, stride) -> None:
    torch.manual_seed(kernel * 10 + stride)
    conv = CausalConvTranspose1d(6, 5, kernel, stride)
    x = torch.randn(1, 6, 23)
    with torch.no_grad():
        ref = conv(x)
        fast = FastConvTranspose(conv, torch.float32)
        exact_state = ConvTransposeState(conv)
        pieces = [fast(x[..., a:b]) for a, b in ((0, 1), (1, 8), (8, 9), (9, 23))]
        exact = torch.cat([exact_state(x[..., a:b]) for a, b in ((0, 1), (1, 8), (8, 9), (9, 23))], dim=-1)
    got = torch.cat(pieces, dim=-1)
    assert got.shape == ref.shape
    assert (got - ref).abs().max() <= 1e-5 and (exact - ref).abs().max() <= 1e-5


def test_mono_output_conv_as_one_product() -> None:
    torch.manual_seed(0)
    conv = CausalConv1d(8, 1, 7, dilation=2)
    x = torch.randn(1, 8, 50)
    with torch.no_grad():
        ref = conv(x)
        fast, exact_state = FastMonoConv(conv), ConvState(conv)
        got = torch.cat([fast(x[..., a:b]) for a, b in ((0, 3), (3, 4), (4, 50))], dim=-1)
        exact = torch.cat([exact_state(x[..., a:b]) for a, b in ((0, 3), (3, 4), (4, 50))], dim=-1)
    assert got.shape == ref.shape == (1, 1, 50)
    assert (got - ref).abs().max() <= 1e-5 and (exact - ref).abs().max() <= 1e-5


def test_fresh_states_share_weights_not_history(codec) -> None:
    fast = FastCodec(codec, "bf16")
    a, b = fast.weights.fresh(), fast.weights.fresh()
    assert a.steps[0].weight is b.steps[0].weight and a.steps[0] is not b.steps[0]
    codes = _codes(30, seed=5)
    first = fast.decode([codes])[0]
    assert torch.equal(first, fast.decode([codes])[0])  # nothing carried from one decode to the next


# ---------------------------------------------------------------- the waveform against the exact codec
@pytest.mark.parametrize("kind, bound", [("bf16", BF16_SNR_DB), ("fp32", FP32_SNR_DB)])
@pytest.mark.parametrize("frames", [1, 9, 80, 310])
def test_fast_codec_snr_against_exact(codec, kind, bound, frames) -> None:
    """Across a piece, the 72-frame attention window (80) and the 300-frame chunk restart (310)."""
    fast = FastCodec(codec, kind)
    for seed in range(3):
        codes = _codes(frames, seed=seed)
        ref = codec.decode([codes])[0]
        got = fast.decode([codes])[0]
        assert got.shape == ref.shape == (frames * SPF,) and got.dtype == torch.float32
        assert got.abs().max() <= 1.0  # clamped as the exact decode
        assert snr_db(ref, got) >= bound, (kind, frames, seed)


@pytest.mark.parametrize("kind", ["bf16", "fp32"])
@pytest.mark.parametrize("frames", [80, 310, 650])
def test_streaming_agrees_with_one_shot(codec, kind, frames) -> None:
    """As the exact codec's streaming: fp32 within float32 rounding, bf16 within its own rounding."""
    fast = FastCodec(codec, kind)
    codes = _codes(frames, seed=frames)
    one_shot = fast.decode([codes])[0]
    streamed = push_all(fast.incremental_decoder(), codes, IRREGULAR)
    assert streamed.shape == one_shot.shape
    if kind == "fp32":
        assert (streamed - one_shot).abs().max() <= FP32_SAMPLE_BOUND
    else:
        assert snr_db(one_shot, streamed) >= BF16_STREAM_SNR_DB
        assert snr_db(codec.decode([codes])[0], streamed) >= BF16_SNR_DB


@pytest.mark.parametrize("prefix_frames, frames", [(40, 50), (310, 40)])
def test_prefix_is_context_only(codec, prefix_frames, frames) -> None:
    fast = FastCodec(codec, "fp32")
    codes = _codes(prefix_frames + frames, seed=prefix_frames)
    streamed = push_all(fast.incremental_decoder(codes[:prefix_frames]), codes[prefix_frames:], IRREGULAR)
    ref = fast.decode([codes])[0][prefix_frames * SPF :]
    assert streamed.shape == ref.shape
    assert (streamed - ref).abs().max() <= FP32_SAMPLE_BOUND


def test_padded_batch_as_the_exact_codec(codec) -> None:
    """-1 padding: the same lengths as `SpeechTokenizer.decode`, each row as decoded alone."""
    rows = [_codes(n, seed=n) for n in (12, 30, 1)]
    fast = FastCodec(codec, "fp32")
    ref = codec.decode(rows)
    got = fast.decode(rows)
    padded = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=-1)
    assert [w.shape for w in fast.decode(padded)] == [w.shape for w in got] == [w.shape for w in ref]
    for r, g in zip(ref, got, strict=True):
        assert (r - g).abs().max() <= FP32_SAMPLE_BOUND
    assert fast.decode([torch.zeros(0, 16, dtype=torch.long)])[0].shape == (0,)


def test_settings_and_refusals(codec) -> None:
    assert fast_codec_for(codec, None) is None and fast_codec_for(codec, "fp32") is None  # the exact path by default
    assert fast_codec_for(codec, "int8").name == f"fast-{DEFAULT_FAST}" and fast_codec_for(codec, "int4").conv_dtype == DEFAULT_FAST
    assert fast_codec_for(codec, "int8", "0") is None and fast_codec_for(codec, "int4", "exact") is None
    assert fast_codec_for(codec, "int8", "fp32").conv_dtype == "fp32" and fast_codec_for(codec, None, "1").conv_dtype == DEFAULT_FAST
    assert fast_codec_for(codec, "bf16", "1") is None  # the bf16 mode keeps upstream's bf16 codec
    with pytest.raises(ValueError, match="KOE_FAST_CODEC"):
        fast_codec_for(codec, "int8", "fastest")
    with pytest.raises(ValueError):
        FastCodec(codec, "fp16")


# ---------------------------------------------------------------- engines: who uses it, what results say
def _speak(engine, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one_shot = Qwen3TTS(engine).generate("Hello there.", speaker="ryan", language="english", seed=0, max_new_tokens=30, **kwargs)
        chunks = list(Qwen3TTS(engine).stream("Hello there.", speaker="ryan", language="english", seed=0, max_new_tokens=30, **kwargs))
    return one_shot, chunks


def test_exact_path_is_untouched(session_tmp, monkeypatch) -> None:
    """fp32 (the default): the exact codec's bits, named "exact"; KOE_FAST_CODEC unset."""
    from fixtures_models import model_folder

    from koe.engines.qwen3_tts.engine import Qwen3TTSEngine

    monkeypatch.delenv("KOE_FAST_CODEC", raising=False)
    engine = Qwen3TTSEngine.load(model_folder(session_tmp, "custom_voice"), device="cpu")
    assert engine.fast_codec is None and engine.result_metadata()["codec"] == "exact"
    result, chunks = _speak(engine)
    assert result.metadata["codec"] == "exact" and chunks[-1].metadata["codec"] == "exact"
    assert np.array_equal(result.audio, engine.codec.decode([result.codes])[0].numpy())


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_low_precision_modes_decode_with_the_fast_codec(session_tmp, monkeypatch, mode) -> None:
    from fixtures_models import model_folder

    from koe.engines.qwen3_tts.engine import Qwen3TTSEngine

    monkeypatch.delenv("KOE_FAST_CODEC", raising=False)
    engine = Qwen3TTSEngine.load(model_folder(session_tmp, "custom_voice"), device="cpu", precision=mode)
    name = f"fast-{DEFAULT_FAST}"
    assert isinstance(engine.fast_codec, FastCodec) and engine.fast_codec.name == name
    result, chunks = _speak(engine)
    assert result.metadata["codec"] == name and chunks[-1].metadata["codec"] == name
    assert np.array_equal(result.audio, engine.fast_codec.decode([result.codes])[0].numpy())
    exact = engine.codec.decode([result.codes])[0]
    assert snr_db(exact, torch.from_numpy(result.audio)) >= BF16_SNR_DB
    streamed = np.concatenate([c.samples for c in chunks])
    assert streamed.shape == result.audio.shape
    assert snr_db(torch.from_numpy(result.audio), torch.from_numpy(streamed)) >= BF16_STREAM_SNR_DB


def test_switches(session_tmp, monkeypatch) -> None:
    """KOE_FAST_CODEC=0 keeps the exact codec in int8; =fp32 picks the float32 fast codec; bf16 keeps its own."""
    from fixtures_models import model_folder

    from koe.engines.qwen3_tts.engine import Qwen3TTSEngine

    folder = model_folder(session_tmp, "custom_voice")
    monkeypatch.setenv("KOE_FAST_CODEC", "0")
    exact_int8 = Qwen3TTSEngine.load(folder, device="cpu", precision="int8")
    result, _ = _speak(exact_int8)
    assert exact_int8.fast_codec is None and result.metadata["codec"] == "exact"
    assert np.array_equal(result.audio, exact_int8.codec.decode([result.codes])[0].numpy())
    monkeypatch.setenv("KOE_FAST_CODEC", "fp32")
    assert Qwen3TTSEngine.load(folder, device="cpu").result_metadata()["codec"] == "fast-fp32"
    monkeypatch.setenv("KOE_FAST_CODEC", "1")
    bf16 = Qwen3TTSEngine.load(folder, device="cpu", precision="bf16")
    assert bf16.fast_codec is None and bf16.result_metadata()["codec"] == "exact"


def test_icl_clone_streams_as_it_speaks_with_the_fast_codec(session_tmp, monkeypatch) -> None:
    """A Base model's ICL prompt: the reference frames are decoded in front (one-shot) or as the
    stream's context, and cut off; both agree as for the exact codec, within the fp32 fast bound."""
    from fixtures_models import model_folder

    from koe.engines.qwen3_tts.engine import Qwen3TTSEngine

    monkeypatch.setenv("KOE_FAST_CODEC", "fp32")
    engine = Qwen3TTSEngine.load(model_folder(session_tmp, "base"), device="cpu")
    clip = (0.1 * np.sin(np.arange(24000 * 2) / 24000 * 2 * np.pi * 220)).astype(np.float32), 24000
    voice = engine.prepare_voice(clip, ref_text="A reference clip.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = Qwen3TTS(engine).generate("Hello there.", voice=voice, language="english", seed=0, max_new_tokens=20)
        streamed = np.concatenate([c.samples for c in Qwen3TTS(engine).stream("Hello there.", voice=voice, language="english", seed=0, max_new_tokens=20)])
    assert one.metadata["codec"] == "fast-fp32" and streamed.shape == one.audio.shape
    assert np.abs(streamed - one.audio).max() <= FP32_SAMPLE_BOUND
    engine.fast_codec = None  # the documented Python switch back to the exact codec
    exact = engine.decode_waveforms([one.codes], engine.prompt_items(["Hello there."], ["english"], [None], [None], [voice]))[0]
    assert snr_db(torch.as_tensor(exact), torch.from_numpy(one.audio)) >= FP32_SNR_DB
    assert engine.result_metadata()["codec"] == "exact"


def test_decode_matches_functional_conv_transpose_layout() -> None:
    """The product's weight layout: one step's blocks are the transposed conv's output samples."""
    torch.manual_seed(1)
    conv = CausalConvTranspose1d(3, 2, 6, 3)
    x = torch.zeros(1, 3, 1)
    x[0, 1, 0] = 1.0
    with torch.no_grad():
        got = FastConvTranspose(conv, torch.float32)(x)
        full = F.conv_transpose1d(x, conv.conv.weight, conv.conv.bias, stride=3)
    assert torch.allclose(got, full[..., :3], atol=1e-6)
