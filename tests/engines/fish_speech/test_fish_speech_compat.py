"""The Fish Speech drop-in (`koe.compat.fish_speech`) against upstream's server engine on the golden
`infer` (upstream's `TTSInferenceEngine.inference(ServeTTSRequest(...))` on koe's tiny random
release, in float32): the five requests made with the drop-in's request objects give upstream's
audio bit for bit, streamed (a header, a segment per batch, the final audio) and not; a reference
folder (`reference_id`) gives the same voice as the clips given inline; upstream's constructor and
`from_pretrained` build the same engine; built as upstream's server builds it in bfloat16, the
golden `infer_bf16`'s requests give its audio bit for bit; `encode_audio` / `decode_to_audio` give
the golden `codec`'s codes and waves. Then upstream's checks and error results."""

from __future__ import annotations

import base64
import io
import random
import shutil
import sys
import wave

import numpy as np
import pytest
import torch
from fish_goldens import check_recorded, fixtures, inputs, load_golden, written
from koe_fish_speech import spec
from pydantic import ValidationError

from koe.compat import fish_speech as compat
from koe.compat.fish_speech import InferenceResult, ServeReferenceAudio, ServeTTSRequest, TTSInferenceEngine
from koe.engines.base import RequestError

G = inputs("infer")
JOBS = {job["name"]: job for job in G.JOBS}

HOP = 2048  # samples a codec frame
# upstream's streamed header, as its inference yielded it on this golden's folder
UPSTREAM_HEADER = b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00D\xac\x00\x00\x88X\x01\x00\x02\x00\x10\x00data\x00\x00\x00\x00"


golden, folder = fixtures("infer")


@pytest.fixture(scope="module")
def tts(folder):
    torch.set_num_threads(1)
    return TTSInferenceEngine.from_pretrained(folder)


def request(folder, name: str, **changes) -> ServeTTSRequest:
    """The job's request as upstream's oracle makes it: the clips' bytes and transcripts inline."""
    job = JOBS[name]
    refs = [ServeReferenceAudio(audio=(folder / f"{r}.wav").read_bytes(), text=(folder / f"{r}.lab").read_text(encoding="utf-8")) for r in job["references"]]
    return ServeTTSRequest(**{"text": job["text"], "references": refs, "seed": job["seed"], **job["options"], **changes})


@pytest.mark.parametrize("name", JOBS)
def test_streamed_request_is_upstreams(tts, folder, golden, name):
    results = list(tts.inference(request(folder, name, streaming=True)))
    batches = int(golden[f"{name}.batches"])
    assert [r.code for r in results] == ["header"] + ["segment"] * batches + ["final"]
    assert all(isinstance(r, InferenceResult) and r.error is None and r.audio[0] == 44100 for r in results)
    header = results[0].audio[1]
    assert header.shape == () and header.dtype == np.dtype("S44"), "upstream's np.array(bytes)"
    assert header.tobytes() == UPSTREAM_HEADER
    with wave.open(io.BytesIO(header.tobytes())) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()) == (44100, 1, 2, 0)
    segments = [r.audio[1] for r in results[1:-1]]
    for i, segment in enumerate(segments):
        assert segment.dtype == np.float32 and segment.shape == (golden[f"{name}.batch{i}.codes"].shape[1] * HOP,)
    final = results[-1].audio[1]
    G.assert_audio(golden, name, final)
    assert np.array_equal(final, np.concatenate(segments))


def test_reference_folder_is_the_clips(tts, folder, golden, tmp_path, monkeypatch):
    """`reference_id` reads `references/<id>/` under the working folder: clips in the order of their
    paths (speaker 0 first), each with its `.lab`; not streamed, the one result is the final audio."""
    refs = tmp_path / "references" / "duo"
    refs.mkdir(parents=True)
    for i, clip in enumerate(JOBS["two_speakers"]["references"]):
        shutil.copy(folder / f"{clip}.wav", refs / f"{i}.wav")
        shutil.copy(folder / f"{clip}.lab", refs / f"{i}.lab")
    monkeypatch.chdir(tmp_path)
    results = list(tts.inference(request(folder, "two_speakers", references=[], reference_id="duo")))
    assert [r.code for r in results] == ["final"]
    G.assert_audio(golden, "two_speakers", results[0].audio[1])
    assert tts.list_reference_ids() == ["duo"]


def test_an_empty_reference_folder_speaks_in_the_models_voice(tts, folder, tmp_path, monkeypatch):
    """As upstream: no clips under the id (or no folder), no references (the model's own voice), with a warning here."""
    monkeypatch.setattr(tts, "references_dir", tmp_path / "refs")
    (tmp_path / "refs" / "empty").mkdir(parents=True)
    for id in ("nobody", "empty"):
        with pytest.warns(UserWarning, match="no clips in"):
            assert tts._voice(request(folder, "clone44k", reference_id=id)) is None  # reference_id first, as upstream


def test_upstreams_constructor_builds_the_same_engine(folder, golden):
    queue = compat.launch_thread_safe_queue(folder, "cpu", torch.float32)
    codec = compat.load_codec_model(folder / "codec.pth", "cpu", torch.float32)
    tts = TTSInferenceEngine(llama_queue=queue, decoder_model=codec, precision=torch.float32, compile=True)
    assert tts.decoder_model is codec and tts.llama_queue is queue and tts.sample_rate == 44100
    results = list(tts.inference(request(folder, "clone44k")))
    G.assert_audio(golden, "clone44k", results[-1].audio[1])
    with pytest.raises(ValueError, match="float32 or torch.bfloat16"):
        TTSInferenceEngine(queue, codec, torch.half, False)
    with pytest.raises(ValueError, match="codec in float32"):
        TTSInferenceEngine(queue, compat.load_codec_model(folder / "codec.pth", "cpu"), torch.float32, False)  # upstream's bf16 default
    with pytest.raises(TypeError, match="launch_thread_safe_queue"):
        TTSInferenceEngine(object(), codec, torch.float32, False)
    with pytest.raises(TypeError, match="load_codec_model"):
        TTSInferenceEngine(queue, object(), torch.float32, False)
    with pytest.raises(ValueError, match="CPU"):
        compat.launch_thread_safe_queue(folder, "cuda", torch.float32)
    with pytest.raises(ValueError, match="float32 or torch.bfloat16"):
        compat.launch_thread_safe_queue(folder, "cpu", torch.float16)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        compat.launch_thread_safe_queue(folder / "nowhere", "cpu", torch.float32)


@pytest.fixture(scope="module")
def golden_bf16(folder):
    golden = load_golden("infer_bf16")
    check_recorded(golden, folder)  # infer_bf16's folder is infer's, with other jobs
    return golden


@pytest.fixture(scope="module")
def tts_bf16(folder):
    """As upstream's server (ModelManager(half=False)) builds it: the transformer in bfloat16, its DAC
    loader's float32 codec, the engine's precision bfloat16."""
    queue = compat.launch_thread_safe_queue(folder, "cpu", torch.bfloat16)
    return TTSInferenceEngine(queue, compat.load_model("modded_dac_vq", folder / "codec.pth", "cpu"), torch.bfloat16, False)


@pytest.mark.parametrize("name", [job["name"] for job in inputs("infer_bf16").JOBS])
def test_bfloat16_request_is_upstreams(tts_bf16, folder, golden_bf16, name):
    job = {job["name"]: job for job in inputs("infer_bf16").JOBS}[name]
    refs = [ServeReferenceAudio(audio=(folder / f"{r}.wav").read_bytes(), text=(folder / f"{r}.lab").read_text(encoding="utf-8")) for r in job["references"]]
    results = list(tts_bf16.inference(ServeTTSRequest(text=job["text"], references=refs, seed=job["seed"], **job["options"])))
    assert [r.code for r in results] == ["final"]
    G.assert_audio(golden_bf16, name, results[0].audio[1])


def test_from_pretrained_in_bfloat16_is_upstreams_server(folder):
    """koe's engine loaded with precision "bf16" (test_fish_speech_infer_bf16: upstream's bits)."""
    tts = TTSInferenceEngine.from_pretrained(folder, precision=torch.bfloat16)
    assert tts.engine.lm.dtype == torch.bfloat16 and tts.decoder_model.dtype == torch.float32 and tts.precision == torch.bfloat16
    assert tts.decoder_model.decode_autocast == torch.bfloat16 and tts.engine.precision == "bfloat16"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_encode_audio_and_decode_to_audio_are_upstreams(tmp_path_factory, dtype):
    """Upstream's command-line codec functions on the golden `codec`'s clips and codes."""
    codec_golden, codec_folder = load_golden("codec"), written("codec")
    codec = compat.load_codec_model(codec_folder / "codec.pth", "cpu", dtype)
    name = str(dtype).removeprefix("torch.")
    for clip in inputs("codec").CLIPS:
        codes = compat.encode_audio(codec_folder / f"{clip}.wav", codec, "cpu")
        assert codes.dtype == torch.int64 and np.array_equal(codes.numpy(), codec_golden[f"{name}.{clip}.codes"])
    audio = compat.decode_to_audio(torch.from_numpy(np.load(codec_folder / "codes_short.npy")), codec)
    assert audio.dtype == dtype and audio.ndim == 1
    assert np.array_equal(audio.float().numpy(), codec_golden[f"{name}.codes_short.audio"])


# -- upstream's checks ---------------------------------------------------------------------------------
def test_request_defaults_are_the_servers():
    req = ServeTTSRequest(text="Hi.")
    upstreams = {k: v for k, v in spec.DEFAULTS.items() if k not in ("top_k", "stream_frames")}  # koe's own: stream_frames
    assert {k: getattr(req, k) for k in upstreams} == upstreams
    assert (req.format, req.latency, req.references, req.reference_id, req.seed) == ("wav", "normal", [], None, None)
    assert (req.use_memory_cache, req.normalize, req.streaming) == ("off", True, False)
    assert compat.TOP_K == spec.DEFAULTS["top_k"]


@pytest.mark.parametrize(
    "field",
    [
        {"top_p": 0.05},
        {"top_p": 1.01},
        {"temperature": True},
        {"temperature": "0.5"},
        {"repetition_penalty": 2.5},
        {"seed": 1.5},
        {"use_memory_cache": True},
        {"format": "flac"},
        {"latency": "fast"},
        {"reference_id": 5},
        {"text": None},
    ],
    ids=str,
)
def test_bad_fields_are_refused_as_upstream(field):
    with pytest.raises(ValidationError, match=next(iter(field))) as e:
        ServeTTSRequest(**{"text": "Hi.", **field})
    assert isinstance(e.value, ValueError)


def test_fields_upstream_takes():
    """What upstream's pydantic takes: numbers' strings for ints, ints for floats, any chunk_length
    (its 100..1000 is not applied), unknown fields ignored (`top_k`: the server has none)."""
    req = ServeTTSRequest(text="Hi.", chunk_length=50, seed="3", max_new_tokens=7.0, top_p=1, top_k=5)
    assert (req.chunk_length, req.seed, req.max_new_tokens, req.top_p, hasattr(req, "top_k")) == (50, 3, 7, 1.0, False)
    data = b"RIFF" + bytes(400)
    assert ServeReferenceAudio(audio=base64.b64encode(data).decode(), text="t").audio == data
    assert ServeReferenceAudio(audio="short.wav", text="t").audio == b"short.wav"
    assert repr(ServeReferenceAudio(audio=data, text="t")) == "ServeReferenceAudio(text='t', audio_size=404)"
    with pytest.raises(ValidationError, match="text"):
        ServeReferenceAudio(audio=data)


def test_seed_is_upstreams_set_seed():
    """Python's, numpy's and torch's generators, from |seed| capped at 2**31."""
    for seed, used in ((-7, 7), (2**40, 2**31)):
        compat._set_seed(seed)
        drawn = (random.random(), np.random.random(), torch.initial_seed())
        random.seed(used)
        np.random.seed(used)
        assert drawn == (random.random(), np.random.random(), used)


@pytest.mark.parametrize("id", ["../duo", "a/b", "", "x" * 256, "duo\n", "é"])
def test_reference_ids_are_checked_as_upstream(tts, id):
    with pytest.raises(ValueError, match="only letters, digits"):
        next(tts.inference(ServeTTSRequest(text="Hi.", reference_id=id)))
    with pytest.raises(ValueError, match="only letters, digits"):
        tts.delete_reference(id)


def test_a_reference_clip_without_its_transcript(tts, folder, tmp_path, monkeypatch):
    monkeypatch.setattr(tts, "references_dir", tmp_path)
    (tmp_path / "x").mkdir()
    shutil.copy(folder / "ref44k.wav", tmp_path / "x" / "a.wav")
    with pytest.raises(FileNotFoundError, match="a.lab"):
        next(tts.inference(ServeTTSRequest(text="Hi.", reference_id="x")))
    assert tts.list_reference_ids() == []


def test_the_memory_cache(tts, folder, monkeypatch):
    """`use_memory_cache="on"` reuses a clip encoded before (by its bytes: with the transcript first given), "off" encodes again."""
    made = []
    prepare = tts.engine.prepare_voice
    monkeypatch.setattr(tts.engine, "prepare_voice", lambda audio, text: made.append(text) or prepare(audio, text))
    clip = (folder / "ref44k.wav").read_bytes()
    first = tts._voice(ServeTTSRequest(text="Hi.", references=[ServeReferenceAudio(audio=clip, text="One.")]))
    again = tts._voice(ServeTTSRequest(text="Hi.", references=[ServeReferenceAudio(audio=clip, text="Two.")], use_memory_cache="on"))
    assert made == ["One."] and again.clips[0].codes is first.clips[0].codes and again.text == "One."
    tts._voice(ServeTTSRequest(text="Hi.", references=[ServeReferenceAudio(audio=clip, text="Three.")]))
    assert made == ["One.", "Three."]


def test_add_list_delete_references(tts, folder, tmp_path, monkeypatch):
    monkeypatch.setattr(tts, "references_dir", tmp_path / "refs")
    assert tts.list_reference_ids() == []
    tts.add_reference("my voice", folder / "ref44k.wav", "Words.")
    assert tts.list_reference_ids() == ["my voice"]
    assert (tmp_path / "refs" / "my voice" / "sample.lab").read_text(encoding="utf-8") == "Words."
    with pytest.raises(FileExistsError):
        tts.add_reference("my voice", folder / "ref44k.wav", "Words.")
    with pytest.raises(ValueError, match="Unsupported audio format"):
        tts.add_reference("other", folder / "jobs.json", "Words.")
    assert not (tmp_path / "refs" / "other").exists()
    tts.delete_reference("my voice")
    assert tts.list_reference_ids() == []
    with pytest.raises(FileNotFoundError, match="does not exist"):
        tts.delete_reference("my voice")


# -- errors as upstream hands them back ----------------------------------------------------------------
def test_a_failed_generation_is_an_error_result(tts, folder):
    """Upstream's worker hands the exception back ("error"), then, no batch spoken, "No audio generated"."""
    refs = request(folder, "clone44k").references
    results = list(tts.inference(ServeTTSRequest(text="<|speaker:0|>Hi.<|speaker:1|>Yo.", references=refs, seed=1)))
    assert [r.code for r in results] == ["error", "error"] and all(r.audio is None for r in results)
    assert isinstance(results[0].error, RequestError) and "speaker:1" in str(results[0].error)
    assert isinstance(results[1].error, RuntimeError) and str(results[1].error) == compat.NO_AUDIO
    for bad in (1, -3):
        results = list(tts.inference(ServeTTSRequest(text="Hi.", max_new_tokens=bad, streaming=True)))
        assert [r.code for r in results] == ["header", "error", "error"] and "max_new_tokens" in str(results[1].error)


def test_one_request_at_a_time(tts):
    first = tts.inference(ServeTTSRequest(text="Hi.", streaming=True))
    assert next(first).code == "header"
    with pytest.raises(RuntimeError, match="speaking another request"):
        next(tts.inference(ServeTTSRequest(text="Hi.", streaming=True)))
    first.close()
    second = tts.inference(ServeTTSRequest(text="Hi.", streaming=True))
    assert next(second).code == "header"
    second.close()
    with pytest.raises(TypeError, match="ServeTTSRequest"):
        next(tts.inference({"text": "Hi."}))


def test_without_the_family_package_the_import_error_says_how_to_install_it(monkeypatch, folder):
    monkeypatch.setitem(sys.modules, "koe_fish_speech", None)  # as if it were not installed
    with pytest.raises(ImportError, match="pip install -e families/fish_speech"):
        TTSInferenceEngine.from_pretrained(folder)
    assert ServeTTSRequest(text="Hi.").text == "Hi."  # the request objects need no family
