"""CosyVoice end to end against upstream (its source at ace7c47 in `.oracle-cosyvoice`): upstream's
`AutoModel(model_dir=...)` and its `inference_*` generators against koe's drop-in
(`koe.compat.cosyvoice.AutoModel`, on koe's core), on random-weight v2 and v3 folders in the
released layout, each call after `torch.manual_seed(seed)`, at one torch thread.

What holds: every yielded `tts_speech` equal (`torch.equal`) in count, shape and samples, for
zero-shot (English through the text normaliser, Chinese, a text split into pieces, `speed`),
cross-lingual, instruct2 and voice conversion, offline; and v3 streamed chunk by chunk (upstream's
v3 stream is deterministic; its v2 stream races two threads on one generator, so v2 streams are
compared with the LM's tokens fed in: test_cosyvoice_flow_token2wav_parity). Errors upstream
raises, koe raises too.
"""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle_harness import run_oracle, same

from koe.compat.cosyvoice import AutoModel
from koe.engines.cosyvoice.fixtures import write_random_model

pytestmark = pytest.mark.oracle

VARIANTS = ("CosyVoice2-0.5B", "Fun-CosyVoice3-0.5B-2512")
V3_PROMPT = "You are a helpful assistant.<|endofprompt|>"
LONG = ("The first sentence is here to make the text long enough for two pieces, with quite a few words in it. " * 4) + (
    "And then one more sentence follows, so that upstream splits the text in two."
)
CLIPS = [(2.4, 16000), (1.9, 24000), (2.2, 22050), (1.53, 24000), (2.07, 22050)]  # (seconds, rate); 3 and 4: a mel 2 and 1 frames short of twice the tokens


def _case(folder: int, mode: str, **kw) -> dict:
    return {"folder": folder, "mode": mode, "prompt": 0, "seed": 7, **kw}


CASES = [
    _case(0, "zero_shot", text="Hello there, it is 5 pm.", prompt_text="This is the prompt."),
    _case(0, "zero_shot", text="今天天气真不错。", prompt_text="希望你以后能够做的比我还好呦。", prompt=1, seed=3),
    _case(0, "zero_shot", text="Speak a little faster.", prompt_text="Faster.", speed=1.3),
    _case(0, "cross_lingual", text="<|en|>Across languages.", prompt=2),
    _case(0, "instruct2", text="Say it with joy!", instruct_text="用开心的语气说<|endofprompt|>"),
    _case(0, "vc", source=2, seed=1),
    _case(1, "zero_shot", text="Hello there, it is 5 pm.", prompt_text=V3_PROMPT + "This is the prompt."),
    _case(1, "zero_shot", text="A stream of speech, chunk by chunk.", prompt_text=V3_PROMPT + "Stream.", stream=True, seed=11),
    _case(1, "cross_lingual", text=V3_PROMPT + "Across languages.", prompt=2),
    _case(1, "instruct2", text="Say it with joy!", instruct_text="You are a helpful assistant. Speak happily.<|endofprompt|>"),
    _case(1, "vc", source=2, seed=1),
    _case(1, "vc", source=1, stream=True, seed=2),
    _case(1, "zero_shot", text="No system prompt.", prompt_text="This is the prompt."),  # v3 refuses: no <|endofprompt|>
    _case(0, "vc", source=0, prompt=3, seed=5),  # conversion keeps the prompt untrimmed: its mel is not twice its tokens
    _case(1, "vc", source=0, prompt=4, seed=6),
    _case(1, "vc", source=0, prompt=3, stream=True, seed=8),
    _case(
        1, "zero_shot", text=LONG, prompt_text=V3_PROMPT + "Pieces.", stream=True, seed=1
    ),  # two pieces: the second's stream starts at the hop the first grew to
]
NATIVE_K = [k for k, c in enumerate(CASES) if c["folder"] == 0 and c["mode"] != "vc"] + [6]  # koe's own CAM++: compared within a tolerance


def _speechy(seconds: float, sr: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    f0 = 110 + 30 * np.sin(2 * np.pi * 0.9 * t)
    x = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / sr) / k for k in range(1, 6)) * (0.5 + 0.5 * np.sin(2 * np.pi * 2.3 * t))
    return (0.4 * x / np.max(np.abs(x)) + 0.01 * rng.standard_normal(len(t))).astype(np.float32)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("cosyvoice-e2e")
    folders = [write_random_model(d / v, v, seed=40 + i) for i, v in enumerate(VARIANTS)]
    clips = []
    for i, (seconds, sr) in enumerate(CLIPS):
        path = d / f"clip{i}.wav"
        sf.write(path, _speechy(seconds, sr, i), sr, subtype="PCM_16")
        clips.append(str(path))
    job = {"folders": [str(f) for f in folders], "clips": clips, "cases": CASES}
    keep = ("embedding_*", *(f"speech_{k}_*" for k in NATIVE_K))  # fed to koe; the speech compared within a tolerance
    tensors, info = run_oracle("end_to_end", job, d / "work", family="cosyvoice", keep=keep)
    models = [AutoModel(model_dir=str(f)) for f in folders]
    return {"tensors": tensors, "info": info, "clips": clips, "models": models}


def _koe(model, case: dict, clips: list[str], embedding: torch.Tensor | None = None) -> list[torch.Tensor]:
    """The case through koe's drop-in; `embedding`: upstream's speaker embedding in place of koe's CAM++."""
    model._hop = 25  # as the oracle resets upstream's
    inputs = model.core.inputs
    inputs.embedding = (lambda samples, rate: embedding) if embedding is not None else type(inputs).embedding.__get__(inputs)
    kw = {"stream": case.get("stream", False), "speed": case.get("speed", 1.0)}
    prompt = clips[case["prompt"]]
    mode = case["mode"]
    torch.manual_seed(case["seed"])
    if mode == "zero_shot":
        made = model.inference_zero_shot(case["text"], case["prompt_text"], prompt, **kw)
    elif mode == "cross_lingual":
        made = model.inference_cross_lingual(case["text"], prompt, **kw)
    elif mode == "instruct2":
        made = model.inference_instruct2(case["text"], case["instruct_text"], prompt, **kw)
    else:
        made = model.inference_vc(clips[case["source"]], prompt, **kw)
    return [out["tts_speech"] for out in made]


IDS = [f"v{2 + c['folder']}-{c['mode']}-{i}" for i, c in enumerate(CASES)]


def _compare(setup, k: int, made: list[torch.Tensor], tolerance: float = 0.0) -> None:
    assert len(made) == setup["info"]["chunks"][k] > 0
    for j, speech in enumerate(made):
        want = setup["tensors"][f"speech_{k}_{j}"]
        assert speech.dtype == want.dtype and speech.shape == want.shape, f"chunk {j}: {tuple(speech.shape)} vs {tuple(want.shape)}"
        if tolerance == 0.0:
            assert same(speech, want), f"chunk {j}: samples differ"
        else:
            assert float((speech - want).abs().max()) <= tolerance, (
                f"chunk {j}: max |diff| {float((speech - want).abs().max())}, peak {float(want.abs().max())}"
            )


@pytest.mark.parametrize("k", range(len(CASES)), ids=IDS)
def test_speech_equals_upstreams(setup, k):
    """Bit for bit, given the same speaker embedding (onnxruntime's CAM++ and koe's differ by float
    rounding: test_cosyvoice_onnx_parity; the next test measures what that does to the speech)."""
    case, info = CASES[k], setup["info"]
    model = setup["models"][case["folder"]]
    if str(k) in info["errors"]:
        with pytest.raises(ValueError, match="endofprompt"):
            _koe(model, case, setup["clips"])
        return
    _compare(setup, k, _koe(model, case, setup["clips"], setup["tensors"][f"embedding_{k}"]))


NATIVE_TOLERANCE = 1e-2  # of full scale: what CAM++'s rounding (about 1e-6 in the embedding) becomes in the random-weight flow's output (measured up to 6e-3)


@pytest.mark.parametrize("k", NATIVE_K, ids=lambda k: IDS[k])
def test_speech_with_native_campplus_is_close(setup, k):
    """Wholly native (koe's CAM++): the same tokens, so the same length, and samples within the tolerance."""
    case = CASES[k]
    _compare(setup, k, _koe(setup["models"][case["folder"]], case, setup["clips"]), NATIVE_TOLERANCE)


# -- the engine (koe.load: what the CLI, the server and the Python API run) ---------------------------------------------

ENGINE_CASES = {  # case index -> how the engine is asked for it (the v3 system prompt and v2's <|endofprompt|> left to the engine)
    0: {"text": "Hello there, it is 5 pm.", "ref_text": "This is the prompt."},
    1: {"text": "今天天气真不错。", "ref_text": "希望你以后能够做的比我还好呦。"},
    2: {"text": "Speak a little faster.", "ref_text": "Faster.", "speed": 1.3},
    3: {"text": "<|en|>Across languages."},
    4: {"text": "Say it with joy!", "instruct": "用开心的语气说"},
    6: {"text": "Hello there, it is 5 pm.", "ref_text": "This is the prompt."},
    7: {"text": "A stream of speech, chunk by chunk.", "ref_text": "Stream.", "stream": True},
    8: {"text": "Across languages."},
    9: {"text": "Say it with joy!", "instruct": "Speak happily."},
    16: {"text": LONG, "ref_text": "Pieces.", "stream": True},
}


@pytest.fixture(scope="module")
def engines(setup, tmp_path_factory):
    import koe

    folders = [m.model_dir for m in setup["models"]]
    loaded = [koe.load(f, device="cpu") for f in folders]
    yield loaded
    for tts in loaded:
        tts.close()


def _voice(tts, setup, k: int, ref_text: str | None):
    """The case's prompt clip as an engine voice, carrying upstream's speaker embedding."""
    from dataclasses import replace

    case = CASES[k]
    voice = tts.prepare_voice(sf.read(setup["clips"][case["prompt"]], dtype="float32"), ref_text)
    return replace(voice, prompt=replace(voice.prompt, embedding=setup["tensors"][f"embedding_{k}"]))


def _upstreams_chunks(setup, k: int) -> list:
    """Upstream's `tts_speech` chunks of case k, each `(1, samples)`."""
    return [setup["tensors"][f"speech_{k}_{j}"] for j in range(setup["info"]["chunks"][k])]


def _equal_joined(samples: np.ndarray, want: list) -> bool:
    """Whether koe's samples are upstream's chunks joined: as long, and equal to each chunk where it lies."""
    lengths = [w.shape[1] for w in want]
    audio = torch.from_numpy(samples)
    return audio.shape == (sum(lengths),) and all(same(piece[None], w) for piece, w in zip(audio.split(lengths), want, strict=True))


@pytest.mark.parametrize("k", sorted(ENGINE_CASES), ids=lambda k: IDS[k])
def test_engine_speech_equals_upstreams(setup, engines, k):
    """`koe.load(folder).generate/stream(text, voice=..., seed=N)` gives upstream's `inference_*`
    samples after `torch.manual_seed(N)` (pieces joined; streamed chunk by chunk)."""
    ask = dict(ENGINE_CASES[k])
    tts = engines[CASES[k]["folder"]]
    voice = _voice(tts, setup, k, ask.pop("ref_text", None))
    stream = ask.pop("stream", False)
    text, speed = ask.pop("text"), ask.pop("speed", None)
    extra = {"speed": speed} if speed is not None else {}
    want = _upstreams_chunks(setup, k)
    if stream:
        made = [torch.from_numpy(c.samples) for c in tts.stream(text, voice=voice, seed=CASES[k]["seed"], **ask) if len(c.samples)]
        assert len(made) == len(want)
        for j, (a, b) in enumerate(zip(made, want, strict=True)):
            assert same(a[None], b), f"chunk {j}"
        return
    out = tts.generate(text, voice=voice, seed=CASES[k]["seed"], **ask, **extra)
    assert _equal_joined(out.audio, want)


@pytest.mark.parametrize("k", [k for k, c in enumerate(CASES) if c["mode"] == "vc"], ids=lambda k: IDS[k])
def test_engine_conversion_equals_upstreams(setup, engines, k):
    """`convert` (what `koe convert` and POST /v1/audio/conversions run) gives upstream's `inference_vc`."""
    from koe.engines.base import ConversionRequest, collect

    case = CASES[k]
    tts = engines[case["folder"]]
    voice = _voice(tts, setup, k, None)
    source = sf.read(setup["clips"][case["source"]], dtype="float32")
    request = ConversionRequest(source=source, voice=voice, seed=case["seed"], stream=case.get("stream", False))
    want = _upstreams_chunks(setup, k)
    chunks = list(tts.engine.convert(request))
    assert [len(c.samples) for c in chunks if len(c.samples)] == [w.shape[1] for w in want]  # upstream's chunks, one by one
    assert chunks[-1].final and chunks[-1].metadata["mode"] == "conversion"
    assert _equal_joined(collect(iter(chunks)).samples, want)
