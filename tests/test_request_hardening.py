"""Poisoned requests below the server (issue 13): the shared text checks, the engine contract's
request, each family's native API, the service planner, the batch runner's isolation of a failing
request, and `koe speak` (non-UTF-8 input, an interrupted `--stream -o`). The HTTP attack set over
every family is tests/test_attacks.py.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pytest
from fixtures_models import model_folder
from product_helpers import leftovers, one_line_error, speechy, strict_koe_command
from shared_folders import fixture as shared_fixture
from test_server import make_home, wait_for

import koe
from koe.engines import registry
from koe.engines.base import EmptyText, RequestError, SynthesisRequest, UnsupportedVoice, check_seed
from koe.service import InvalidRequest, RequestCancelled, SpeechRequest, Synthesizer, Unavailable
from koe.service.synthesis.requests import StreamChunk
from koe.service.synthesis.scheduler import Scheduler, one_requests_fault
from koe.text.checks import Utf8Error, argument_bytes_problem, decode_utf8, has_speech, text_problem

pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off", "ignore:segment 0 was cut off", "ignore:.*ignor")


# -- the shared checks -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "kind", "index"),
    [
        ("a\ud800b", "surrogate", 1),
        ("\udfff", "surrogate", 0),
        ("\u200b\u200c\u200d\ufeff\u2060", "silent", None),
        ("\x00\x00", "silent", None),
        (" \u3164\u115f\u2800\u0301 ", "silent", None),
        ("Hel\x00lo", "control", 3),
        ("\x1b[1mbold", "control", 0),
        ("DEL\x7f", "control", 3),
        ("C1\x9b", "control", 2),
        (5, "type", None),
        (None, "type", None),
    ],
)
def test_text_problems_are_found_and_placed(text, kind, index):
    problem = text_problem(text, "input", controls=True, speech=True)
    assert problem is not None and (problem.kind, problem.index) == (kind, index)
    assert problem.message.startswith("input")


@pytest.mark.parametrize("text", ["Hello", "tab\tnew\nline\r\n\v\f and next line\x85", "👩‍👩‍👧 family", "ZWNJ: می‌خواهم", "…!?", "3.14", "\ufeffBOM then words"])
def test_valid_text_passes_every_check(text):
    assert text_problem(text, "input", controls=True, speech=True) is None and has_speech(text)


def test_decode_utf8_names_the_offset_and_drops_a_bom():
    assert decode_utf8(b"\xef\xbb\xbfhello", "stdin") == "hello"
    for data, offset in ((b"ab\xffc", 2), (b"\xef\xbb\xbfab\xffc", 5), (b"caf\xc3", 3)):
        with pytest.raises(Utf8Error, match=f"offset {offset}") as e:
            decode_utf8(data, "stdin")
        assert e.value.offset == offset and "stdin is not UTF-8" in str(e.value)


def test_command_line_bytes_that_are_not_utf8():
    assert argument_bytes_problem("ab\udcffc", "TEXT") == "TEXT is not UTF-8 text: byte 0xff at offset 2 cannot be decoded"
    assert argument_bytes_problem("plain", "TEXT") is None
    assert argument_bytes_problem("a\ud800", "TEXT") is None  # not from bytes: left to text_problem


# -- the engine contract's request -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("kw", "error", "param", "match"),
    [
        ({"text": None}, RequestError, "input", "text must be a string, got NoneType"),
        ({"text": b"bytes"}, RequestError, "input", "got bytes"),
        ({"text": "a\ud800b"}, RequestError, "input", "lone surrogate"),
        ({"text": "\u200b\ufeff"}, EmptyText, "input", "nothing to speak"),
        ({"instruct": "calm\ud800"}, RequestError, "instructions", "surrogate"),
        ({"voice": "ry\udc00an"}, UnsupportedVoice, "voice", "surrogate"),
        ({"language": 7}, RequestError, "language", "must be a string"),
        ({"seed": 2**64}, RequestError, "seed", "0 <= seed < 2**63"),
        ({"seed": 2**63}, RequestError, "seed", "2**63"),
        ({"seed": -1}, RequestError, "seed", "2**63"),
        ({"seed": 1.0}, RequestError, "seed", "whole number"),
        ({"seed": True}, RequestError, "seed", "whole number"),
        ({"pause_s": -1}, RequestError, "pause_s", ">= 0"),
        ({"pause_s": math.nan}, RequestError, "pause_s", ">= 0"),
        ({"pause_s": "long"}, RequestError, "pause_s", ">= 0"),
        ({"chunk_s": 0}, RequestError, "chunk_s", "> 0"),
        ({"first_chunk_s": math.inf}, RequestError, "first_chunk_s", "> 0"),
        ({"max_segment_s": -2.0}, RequestError, "max_segment_s", "> 0"),
        ({"max_segment_chars": 0}, RequestError, "max_segment_chars", ">= 1"),
        ({"options": [("top_k", 3)]}, RequestError, "options", "mapping"),
    ],
)
def test_synthesis_request_refuses_what_no_engine_can_take(kw, error, param, match):
    with pytest.raises(error, match=re.escape(match)) as e:
        SynthesisRequest(**{"text": "Hello.", **kw})
    assert e.value.param == param


def test_synthesis_request_keeps_valid_values():
    r = SynthesisRequest("Hello\tthere.", seed=2**63 - 1, pause_s=0, chunk_s=0.1, max_segment_chars=1, options={"top_k": 3})
    assert (r.text, r.seed, r.pause_s) == ("Hello\tthere.", 2**63 - 1, 0)
    assert check_seed(np.int64(7)) == 7 and check_seed(None) is None
    SynthesisRequest("   ")  # blank text is the pipeline's EmptyText ("text is empty"), as before


# -- each family's native API ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def natives():
    """{family: (engine, how to call its generate with a voice it takes)} for every registered family."""
    clip = (speechy(1.5), 24000)
    voiced = {
        "qwen3_tts": lambda e: {"speaker": e.speakers[0], "max_new_tokens": 3},
        "f5_tts": lambda e: {"voice": e.prepare_voice(clip, "A short clip."), "nfe_step": 1, "fix_duration": 1.6},
        "voxcpm": lambda e: {"max_len": 2, "inference_timesteps": 1},
        "omnivoice": lambda e: {"num_step": 1, "duration": 0.4},
        "cosyvoice": lambda e: {"voice": e.prepare_voice(clip, "A short clip."), "max_tokens": 4},
        "gpt_sovits": lambda e: {"voice": e.prepare_voice((speechy(3.5), 24000), "A short clip."), "fragment_interval": 0.0},  # clones from 3-10 s
    }
    out = {}
    for family in registry.FAMILIES:
        assert family in voiced, f"add {family!r} to `voiced` in tests/test_request_hardening.py"
        engine = koe.load(shared_fixture(family), device="cpu")
        out[family] = (engine, voiced[family](engine))
    yield out
    for engine, _ in out.values():
        engine.close()


@pytest.mark.parametrize("family", list(registry.FAMILIES))
@pytest.mark.parametrize(
    ("kw", "param"),
    [
        ({"text": None}, "input"),
        ({"text": 42}, "input"),
        ({"text": "a\ud800b"}, "input"),
        ({"seed": 2**64}, "seed"),
        ({"seed": -5}, "seed"),
        ({"pause_s": -1}, "pause_s"),
    ],
)
def test_native_generate_raises_request_errors_naming_the_argument(natives, family, kw, param):
    engine, voice = natives[family]
    args = {"text": "Hello there.", **voice, **kw}
    with pytest.raises(RequestError) as e:
        engine.generate(args.pop("text"), **args)
    assert e.value.param == param, e.value


@pytest.mark.parametrize("family", list(registry.FAMILIES))
def test_native_generate_still_speaks_at_the_largest_seed(natives, family):
    engine, voice = natives[family]
    out = engine.generate("Hello there.", seed=2**63 - 1, **voice)
    assert len(out.audio) > 0 and out.metadata["seed"] == 2**63 - 1


def test_f5_batch_longer_than_its_text_positions_is_a_request_error(natives):
    engine, voice = natives["f5_tts"]
    with pytest.raises(RequestError, match="at most 87.4 s per text batch") as e:
        engine.generate("Hello there.", **{**voice, "fix_duration": 100.0})
    assert e.value.param == "fix_duration"
    with pytest.raises(RequestError, match="raise speed") as e:
        engine.generate("Hello there, this is a somewhat longer sentence.", **{k: v for k, v in voice.items() if k != "fix_duration"}, speed=0.01)
    assert e.value.param == "speed"


# -- the service planner (the Python API and the CLI meet it) -------------------------------------
@pytest.fixture(scope="module")
def synth(tmp_path_factory, session_tmp):
    s = Synthesizer(make_home(tmp_path_factory.mktemp("home"), session_tmp))
    yield s
    s.close()


def plan(synth, **kw):
    return synth.plan(SpeechRequest(**{"text": "Hello there.", "model": "cv", "speaker": "ryan", **kw}))


@pytest.mark.parametrize(
    ("kw", "param", "match"),
    [
        ({"text": None}, "input", "must be a string, got NoneType"),
        ({"text": "a\ud800b"}, "input", "lone surrogate"),
        ({"text": "\u200b\u2060\ufeff"}, "input", "nothing to speak"),
        ({"text": "\x00"}, "input", "nothing to speak"),
        ({"text": "Say\x00this"}, "input", "U+0000 at character 3"),
        ({"text": "\x1b[2Jclear"}, "input", "U+001B"),
        ({"instruct": "x" * 4097}, "instructions", "at most 4096"),
        ({"instruct": "calm\x07"}, "instructions", "U+0007"),
        ({"instruct": "calm\ud800"}, "instructions", "surrogate"),
        ({"design": "y" * 4097, "speaker": None, "model": "cv"}, "design", "at most 4096"),
        ({"ref_text": "t" * 2001}, "ref_text", "at most 2000"),
        ({"ref_text": "line\x00"}, "ref_text", "U+0000"),
        ({"voice": "\ud800"}, "voice", "surrogate"),
        ({"speaker": "ry\udfffan"}, "speaker", "surrogate"),
        ({"language": "en\ud800"}, "language", "surrogate"),
        ({"seed": 2**64}, "seed", "0 <= seed < 2**63"),
        ({"seed": -1}, "seed", "2**63"),
        ({"seed": "7"}, "seed", "whole number"),
    ],
)
def test_the_planner_refuses_poisoned_fields(synth, kw, param, match):
    with pytest.raises(InvalidRequest, match=re.escape(match)) as e:
        plan(synth, **kw)
    assert e.value.param == param and e.value.status == 400


def test_the_planner_leaves_valid_text_as_it_is(synth):
    text = "Tabs\tand\nnew lines, 👩‍👩‍👧 and ZWJ: fine."
    p = plan(synth, text=f"  {text}  ", instruct="Calm.\nWarm.", seed=2**63 - 1)
    assert p.text == text and p.seed == 2**63 - 1


# -- the batch runner: a failing request fails alone --------------------------------------------------
@dataclass
class FakePlan:
    text: str
    batchable: bool = True
    seed_given: bool = False
    model: object = field(default_factory=lambda: type("Ref", (), {"key": "m", "name": "m"})())

    def batch_key(self) -> tuple:
        return ("m",)


class FakeSynth:
    """The scheduler's view of a synthesizer: texts with `poison` in them fail with `error`."""

    def __init__(self, poison: str, error: BaseException) -> None:
        self.poison, self.error = poison, error
        self.gate = threading.Event()
        self.batches: list[int] = []
        self.alone: list[str] = []

    def plan(self, request):
        return FakePlan(request.text)

    def _maybe_fail(self, texts, cancel) -> None:
        if any("HOLD" in t for t in texts):
            assert self.gate.wait(30)
        if any(self.poison in t for t in texts):
            raise self.error
        if cancel is not None and cancel.cancelled:
            raise RequestCancelled("the request was cancelled")

    def speak(self, plan, cancel=None):
        self.alone.append(plan.text)
        self._maybe_fail([plan.text], cancel)
        return f"audio of {plan.text}"

    def speak_batch(self, plans, cancel=None):
        self.batches.append(len(plans))
        self._maybe_fail([p.text for p in plans], cancel)
        return [f"audio of {p.text}" for p in plans]


def run_batch(fake: FakeSynth, texts: list[str], before_release=None):
    """Hold the lane, queue `texts` (one batch), release; the jobs and the scheduler's stats."""
    sched = Scheduler(fake, batch_window=0.05)
    try:
        blocker = sched.submit(SpeechRequest("HOLD"))
        wait_for(lambda: sched.stats()["m"].running == 1)
        jobs = [sched.submit(SpeechRequest(t)) for t in texts]
        if before_release:
            before_release(jobs)
        fake.gate.set()
        blocker.future.result(10)
        for job in jobs:
            with contextlib.suppress(Exception):
                job.future.result(10)
        settled = len(texts) + 1
        with contextlib.suppress(AssertionError):  # jobs are counted just after they are answered
            wait_for(lambda: (lambda s: s.completed + s.failed + s.cancelled)(sched.stats()["m"]) == settled, timeout=5)
        return jobs, sched.stats()["m"]
    finally:
        fake.gate.set()
        sched.close()


@pytest.mark.parametrize("error", [RuntimeError("tokenizer choked"), InvalidRequest("the engine refused it", param="input"), TypeError("str")])
def test_a_request_that_fails_inside_a_batch_fails_alone(error):
    fake = FakeSynth("POISON", error)
    texts = ["one", "two", "POISON three", "four"]
    jobs, stats = run_batch(fake, texts)
    assert fake.batches == [4]  # they formed one batch, which failed ...
    assert sorted(fake.alone) == sorted(["HOLD", *texts])  # ... and each was spoken again alone
    for text, job in zip(texts, jobs, strict=True):
        if "POISON" in text:
            assert job.future.exception() is error
        else:
            assert job.future.result() == f"audio of {text}"
    assert (stats.completed, stats.failed, stats.cancelled) == (4, 1, 0)


@pytest.mark.parametrize("error", [RequestCancelled("the request was cancelled"), Unavailable("cannot load the model"), OSError(28, "No space left on device")])
def test_failures_that_are_no_one_request_s_still_fail_the_batch(error):
    fake = FakeSynth("POISON", error)
    texts = ["one", "POISON two", "three"]
    jobs, stats = run_batch(fake, texts)
    assert fake.batches == [3] and fake.alone == ["HOLD"]  # not spoken again
    assert all(job.future.exception() is error for job in jobs)
    assert (stats.cancelled if isinstance(error, RequestCancelled) else stats.failed) == 3


def test_a_cancelled_member_of_a_failed_batch_is_not_spoken_again():
    fake = FakeSynth("POISON", RuntimeError("boom"))
    texts = ["one", "POISON two", "three"]
    jobs: list = []
    speak_batch = fake.speak_batch

    def cancel_three_then_fail(plans, cancel=None):
        jobs[2].cancel()  # its client goes away while the batch runs
        return speak_batch(plans, cancel)

    fake.speak_batch = cancel_three_then_fail
    jobs[:], stats = run_batch(fake, texts, before_release=lambda queued: jobs.extend(queued))
    assert fake.batches == [3] and "three" not in fake.alone
    assert jobs[0].future.result() == "audio of one" and isinstance(jobs[1].future.exception(), RuntimeError)
    assert isinstance(jobs[2].future.exception(), RequestCancelled)
    assert (stats.completed, stats.failed, stats.cancelled) == (2, 1, 1)


def test_which_failures_are_one_request_s():
    assert one_requests_fault(InvalidRequest("x")) and one_requests_fault(RuntimeError("x")) and one_requests_fault(UnicodeEncodeError("utf-8", "", 0, 1, "x"))
    assert not one_requests_fault(RequestCancelled("x")) and not one_requests_fault(Unavailable("x"))
    assert not one_requests_fault(OSError("disk")) and not one_requests_fault(KeyboardInterrupt())


@pytest.mark.parametrize("kind", ["one-shot", "stream"])
def test_a_poisoned_request_in_a_real_batch_fails_alone(synth, kind):
    """The same with the tiny Qwen3-TTS model: a text the tokenizer cannot take (it reaches the
    engine only because it skips the planner) inside a real batch of four, one-shot or streamed:
    it fails alone (before any audio), the other three are spoken (streams one at a time)."""
    good = [plan(synth, text=t, options={"max_new_tokens": 3}) for t in ("One.", "Two.", "Three.")]
    poisoned = replace(good[0], text="Fo\ud800ur.")  # a plan made by hand, past validation
    sched = Scheduler(synth, batch_window=0.2)
    if kind == "one-shot":
        submit, audio = (lambda p: sched.submit(p, batchable=True)), (lambda job: job.future.result(60).audio)
    else:
        submit, audio = sched.submit_stream, (lambda job: b"".join(c.data for c in job))
    try:
        jobs = [submit(p) for p in (good[0], poisoned, good[1], good[2])]
        results = []
        for job in jobs:
            try:
                results.append(audio(job))
            except Exception as e:  # noqa: BLE001 - the poisoned one
                results.append(e)
        largest = sched.stats()["cv"].largest_batch
    finally:
        sched.close()
    assert largest == 4, "the four did not form one batch"
    assert isinstance(results[1], InvalidRequest) and results[1].param == "input"
    assert [r[:4] for i, r in enumerate(results) if i != 1] == [b"RIFF"] * 3


# -- koe speak ---------------------------------------------------------------------------------------
@pytest.fixture
def cli(tmp_path, monkeypatch):
    return strict_koe_command(tmp_path, monkeypatch)


@pytest.fixture(scope="module")
def cv(session_tmp) -> Path:
    return model_folder(session_tmp, "custom_voice")


def test_speak_refuses_stdin_that_is_not_utf8(cli, cv):
    from typer.testing import CliRunner

    from koe.cli.main import app

    for args, data, offset in ((["speak", "-", "-m", cv], b"Hello \xff there", 6), (["speak", "-m", cv], b"\xef\xbb\xbfok\xc3(", 5)):
        r = CliRunner().invoke(app, [str(a) for a in args], input=data)
        one_line_error(r, "stdin is not UTF-8 text", f"offset {offset}")


def test_speak_refuses_a_file_or_argument_that_is_not_utf8(cli, cv, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xe9 au lait")
    one_line_error(cli("speak", "--file", bad, "-m", cv), "bad.txt is not UTF-8 text", "byte 0xe9 at offset 3")
    one_line_error(cli("speak", "ab\udcffc", "-m", cv), "TEXT is not UTF-8 text", "offset 2")
    one_line_error(cli("speak", "hi", "-m", cv, "--instruct", "\udcfe"), "--instruct is not UTF-8 text", "offset 0")
    one_line_error(cli("speak", "Say\x00this", "-m", cv), "U+0000")
    one_line_error(cli("speak", "\u200b\u200b", "-m", cv), "nothing to speak")


def test_speak_reads_a_file_with_a_bom(cli, cv, tmp_path):
    text = tmp_path / "bom.txt"
    text.write_bytes("\ufeffHello there.".encode())
    cli("speak", "--file", text, "-m", cv, "--max-new-tokens", "3", "-o", tmp_path / "bom.wav", ok=True)
    assert (tmp_path / "bom.wav").read_bytes()[:4] == b"RIFF"


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, RuntimeError])
def test_an_interrupted_stream_to_a_file_leaves_nothing_behind(cli, cv, tmp_path, monkeypatch, interrupt):
    """Ctrl-C (or a failure) in the middle of `koe speak --stream -o FILE`: the file there before
    is untouched and no partial file or temporary is left."""
    out = tmp_path / "out" / "speech.wav"
    out.parent.mkdir()
    out.write_bytes(b"the old file")
    seen = []

    def stream(self, plan, cancel=None, **kw):
        yield StreamChunk(b"RIFF" + b"\0" * 40, np.zeros(10, np.float32), 24000)
        seen.extend(p.name for p in out.parent.iterdir())  # the first chunk is on disk, in a temporary
        raise interrupt()

    monkeypatch.setattr(Synthesizer, "stream", stream)
    r = cli("speak", "Hello there.", "-m", cv, "--stream", "-o", out, ok=False)
    assert r.exit_code == (130 if interrupt is KeyboardInterrupt else 1) and "Traceback" not in r.output
    assert any(name.startswith(".speech.wav.") for name in seen), seen
    assert out.read_bytes() == b"the old file" and leftovers(out.parent) == []
