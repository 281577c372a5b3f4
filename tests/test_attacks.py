"""The attack set, run against every model family in `koe.engines.registry` (issue 13: poisoned requests).

A real uvicorn server on a loopback port over one KOE_HOME that holds a tiny random-weight model
of each registered family (`registry.write_fixture`, so a new family is covered as soon as it is
registered; one without a fixture, or missing from `FAST` below, fails loudly). Each poisoned
body must be a 400 in OpenAI's error shape naming the right `param`, before anything is queued:
lone surrogates in any text, input with nothing to speak, control characters, over-long
instructions, seeds out of range, unknown fields, and for every option of the family's schema a
value of the wrong type and values just outside its range. The smallest value of every whole-number
option's range is served (the range is the real minimum, not only a check). And a poisoned
request among eight concurrent good ones (one batch where the family batches) fails alone: the
other seven get their audio. No text passes validation and still breaks an engine any more, so
that request is simulated: the engines are wrapped to fail on a marker in the text.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import threading

import httpx
import pytest
from product_helpers import decode, speechy, write_wav
from shared_folders import fixture as shared_fixture
from test_server import wait_for
from test_server_e2e import live_server

from koe.engines import registry
from koe.engines.base import CLONE, CLONE_WITHOUT_TRANSCRIPT, NO_VOICE, PRESET, Capabilities, RequestError
from koe.engines.registry import load_engine
from koe.server import create_app
from koe.service import KoeHome, Synthesizer, load_settings

pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off", "ignore:segment 0 was cut off", "ignore:.*ignor")

FAMILIES = list(registry.FAMILIES)
# Each family's options for a request of a few steps (tiny models, 2-core CI). A family added to the
# registry must be added here: its attack tests fail until it is.
FAST = {
    "qwen3_tts": {"max_new_tokens": 4},
    "f5_tts": {"nfe_step": 1, "fix_duration": 1.6},
    "voxcpm": {"max_len": 2, "inference_timesteps": 1},
    "omnivoice": {"num_step": 1, "duration": 0.4},
    "cosyvoice": {"max_tokens": 4},
    "gpt_sovits": {"fragment_interval": 0.0},  # its tiny GPT stops at 50 tokens (max_sec 1)
}
LIBRARY_VOICE = "attack-voice"
REF_TEXT = "A short test clip."
TEXT = "Hello there, how are you?"
HOLD = "HOLD-THE-LANE"  # a text with this waits on `GATE` inside the engine, keeping the lane busy
BREAKS = "BREAKS-THE-ENGINE"  # ... makes the engine raise an unexpected error (a bug one text triggers)
REFUSED = "REFUSED-BY-ENGINE"  # ... makes the engine refuse the request (RequestError)
GATE = threading.Event()


# -- the server --------------------------------------------------------------------------------
def _poisonable(engine):
    """`engine` with its `synthesize` (and `synthesize_batch`, where it has one) failing on the
    markers above; instance attributes, so the engine still meets the contract's protocols."""
    speak, batch = engine.synthesize, getattr(engine, "synthesize_batch", None)

    def check(requests) -> None:
        for r in requests:
            if HOLD in r.text:
                assert GATE.wait(60), "the test never opened the gate"
            if BREAKS in r.text:
                raise RuntimeError("simulated engine failure: this text breaks the engine")
            if REFUSED in r.text:
                raise RequestError("simulated refusal: the engine cannot speak this text", param="input")

    def synthesize(request):
        check([request])
        return speak(request)

    def synthesize_batch(requests):
        check(requests)
        return batch(requests)

    engine.synthesize = synthesize
    if batch is not None:
        engine.synthesize_batch = synthesize_batch
    return engine


def _loader(settings):
    m = settings.models
    return lambda ref: _poisonable(load_engine(ref.path, device=m.device, dtype=m.dtype, precision=m.precision))


class Attacked:
    """The live server, its home and each family's model name and capabilities."""

    def __init__(self, server, home: KoeHome, caps: dict[str, Capabilities]) -> None:
        self.server = server
        self.home = home
        self.caps = caps

    @property
    def url(self) -> str:
        return self.server.url

    def lane(self, family: str):
        return self.server.app.state.koe.scheduler.stats().get(family)


@pytest.fixture(scope="module")
def attacked(tmp_path_factory) -> Attacked:
    root = tmp_path_factory.mktemp("attacks")
    settings = load_settings(root / "home", flags={"models": {"default": FAMILIES[0]}}, environ={})
    home = KoeHome(settings)
    caps = {}
    for family in FAMILIES:
        folder = shared_fixture(family)  # a family without a fixture fails here
        caps[family] = home.models.import_model(folder, family, link=True).capabilities
    home.voices.add(LIBRARY_VOICE, str(write_wav(root / "clip.wav", speechy(3.5))), REF_TEXT)  # GPT-SoVITS clones from 3-10 s
    synth = Synthesizer(home, loader=_loader(settings), max_input_chars=settings.server.max_input_chars)
    try:
        with live_server(create_app(home, synth)) as server:
            yield Attacked(server, home, caps)
    finally:
        GATE.set()
        synth.close()


def good_body(attacked: Attacked, family: str, **body) -> dict:
    """A body the family's model speaks quickly: its voice, its few-step options, WAV."""
    if family not in FAST:
        pytest.fail(f"family {family!r} has no entry in FAST (tests/test_attacks.py): give its options for a request of a few steps")
    caps = attacked.caps[family]
    modes = caps.voice_modes
    if PRESET in modes:
        voice = caps.speakers[0]
    elif NO_VOICE in modes:
        voice = "alloy"
    elif modes & {CLONE, CLONE_WITHOUT_TRANSCRIPT}:
        voice = LIBRARY_VOICE
    else:
        pytest.fail(f"family {family!r}: no voice mode the attack set knows how to use ({sorted(modes)})")
    return {"model": family, "input": TEXT, "voice": voice, "response_format": "wav", "options": dict(FAST[family]), **body}


def post(attacked: Attacked, body: dict, timeout: float = 120) -> httpx.Response:
    """POST /v1/audio/speech with `body` as ASCII JSON (lone surrogates travel as \\ud800 escapes)."""
    data = json.dumps(body).encode("ascii")
    return httpx.post(f"{attacked.url}/v1/audio/speech", content=data, headers={"Content-Type": "application/json"}, timeout=timeout)


def assert_openai_error(r: httpx.Response, status: int, param: str | None, *words: str) -> dict:
    """An error answer in OpenAI's shape: `status`, the four fields, the type for the status, `param`, `words`."""
    assert r.status_code == status, f"{r.status_code}: {r.text}"
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    err = body["error"]
    assert err["type"] == ("invalid_request_error" if status < 500 else "server_error"), err
    assert err["param"] == param, err
    for w in words:
        assert w in err["message"], err
    return err


# -- poisoned bodies: 400 naming the field ---------------------------------------------------------
def _long_instructions(attacked: Attacked) -> str:
    return "Speak slowly. " * (attacked.home.settings.server.max_instructions_chars // 14 + 1)


POISON = {
    # id: (body changes (a callable gets the server), param, words in the message)
    "input-lone-surrogate": ({"input": "a\ud800b"}, "input", ["surrogate", "U+D800"]),
    "input-low-surrogate-alone": ({"input": "Hello \udfff"}, "input", ["surrogate"]),
    "instructions-lone-surrogate": ({"instructions": "calm\udc00"}, "instructions", ["surrogate"]),
    "voice-lone-surrogate": ({"voice": "al\ud800loy"}, "voice", ["surrogate"]),
    "voice-object-lone-surrogate": ({"voice": {"id": "\ud800"}}, "voice", ["surrogate"]),
    "model-lone-surrogate": ({"model": "qwen\ud800"}, "model", ["surrogate"]),
    "language-lone-surrogate": ({"language": "english\ud800"}, "language", ["surrogate"]),
    "option-value-lone-surrogate": ({"options": {"deep": [{"x": "\ud800"}]}}, "deep", ["surrogate"]),
    "input-zero-width-only": ({"input": "\u200b\u200c\u200d\u2060"}, "input", ["nothing to speak"]),
    "input-bom-only": ({"input": "\ufeff \ufeff"}, "input", ["nothing to speak"]),
    "input-nul-only": ({"input": "\x00\x00\x00"}, "input", ["nothing to speak"]),
    "input-controls-and-fillers": ({"input": "\x01\u3164\u2800\x7f\u0301"}, "input", ["nothing to speak"]),
    "input-blank": ({"input": " \n\t "}, "input", ["empty"]),
    "input-nul-inside": ({"input": "Hel\x00lo there"}, "input", ["U+0000", "character 3"]),
    "input-escape-sequence": ({"input": "\x1b[31mred\x1b[0m text"}, "input", ["U+001B"]),
    "input-c1-control": ({"input": "Hello\x9b there"}, "input", ["U+009B"]),
    "instructions-nul": ({"instructions": "calm\x00"}, "instructions", ["U+0000"]),
    "instructions-too-long": (lambda a: {"instructions": _long_instructions(a)}, "instructions", ["at most", "max_instructions_chars"]),
    "seed-2**64": ({"seed": 2**64}, "seed", ["2**63"]),
    "seed-2**63": ({"seed": 2**63}, "seed", ["2**63"]),
    "seed-negative": ({"seed": -1}, "seed", []),
    "seed-fraction": ({"seed": 1.5}, "seed", []),
    "seed-string": ({"seed": "lucky"}, "seed", []),
    "unknown-field": ({"no_such_field": 1}, "no_such_field", ["unknown field"]),
    "unknown-option": ({"options": {"no_such_option": 1}}, "no_such_option", ["unknown option"]),
    "options-not-an-object": ({"options": [1, 2]}, "options", []),
    "speed-out-of-range": ({"speed": 100}, "speed", []),
    "format-unknown": ({"response_format": "exe"}, "response_format", ["unsupported format"]),
    "sse-with-lone-surrogate": ({"input": "a\ud800b", "stream_format": "sse"}, "input", ["surrogate"]),
    "audio-stream-nothing-to-speak": ({"input": "\u200b", "stream_format": "audio"}, "input", ["nothing to speak"]),
}


@pytest.mark.parametrize("case", list(POISON))
@pytest.mark.parametrize("family", FAMILIES)
def test_a_poisoned_body_is_a_400_naming_the_field(attacked, family, case):
    change, param, words = POISON[case]
    before = attacked.lane(family)
    r = post(attacked, good_body(attacked, family, **(change(attacked) if callable(change) else change)))
    assert_openai_error(r, 400, param, *words)
    after = attacked.lane(family)
    if before is not None:  # refused before it was queued: the lane saw nothing
        assert (after.completed, after.failed) == (before.completed, before.failed)


def option_attacks(caps: Capabilities) -> list[tuple[str, object]]:
    """(option, value) pairs every schema must refuse: the wrong type, and just outside the range."""
    attacks: list[tuple[str, object]] = []
    for o in caps.options.options:
        attacks.append((o.name, {"bool": "yes", "int": 2.5, "float": "fast", "str": 7}[o.type]))
        if o.type == "int":
            attacks += [(o.name, "many"), (o.name, True)]
        if o.type == "float":
            attacks.append((o.name, [1.0]))
        if o.low is not None:
            step = 1 if o.type == "int" else 0.5
            attacks.append((o.name, o.low if o.low_open else o.low - step))
        if o.high is not None:
            attacks.append((o.name, o.high + 1))
    return attacks


@pytest.mark.parametrize("family", FAMILIES)
def test_every_option_refuses_wrong_types_and_values_out_of_range(attacked, family):
    attacks = option_attacks(attacked.caps[family])
    assert attacks, f"{family}: no options to attack"
    wrong = []
    for name, value in attacks:
        body = good_body(attacked, family)
        body["options"] = {**body["options"], name: value}
        r = post(attacked, body)
        err = r.json().get("error") if r.status_code != 200 else None
        if r.status_code != 400 or err is None or err.get("param") != name or err.get("type") != "invalid_request_error":
            wrong.append(f"{name}={value!r}: {r.status_code} {r.text[:200]}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_smallest_value_of_each_whole_number_range_is_served(attacked, family):
    """The low end of an int option's range is what the engine really takes (e.g. Qwen3-TTS's
    max_new_tokens=2), so a request at the minimum is spoken, not refused after queueing."""
    wrong = []
    for o in attacked.caps[family].options.options:
        if o.type != "int" or o.low is None:
            continue
        body = good_body(attacked, family)
        body["options"] = {**body["options"], o.name: int(o.low) + (1 if o.low_open else 0)}
        r = post(attacked, body)
        if r.status_code != 200:
            wrong.append(f"{o.name}={body['options'][o.name]}: {r.status_code} {r.text[:200]}")
    assert not wrong, "\n".join(wrong)


# -- a poisoned request among good ones fails alone -------------------------------------------------
@pytest.mark.parametrize(("marker", "status"), [(BREAKS, 500), (REFUSED, 400)], ids=["engine-bug", "engine-refusal"])
@pytest.mark.parametrize("family", FAMILIES)
def test_a_poisoned_request_among_eight_fails_alone(attacked, family, marker, status):
    """Eight requests wait while the lane is held; one of them makes the engine fail. Where the
    family batches they form one batch, which fails and is spoken again one request at a time."""
    GATE.clear()
    texts = [f"Good request number {i}, spoken well." for i in range(7)]
    texts.insert(3, f"{marker} This one is poisoned.")
    before = attacked.lane(family)
    with concurrent.futures.ThreadPoolExecutor(9) as pool:
        try:
            blocker = pool.submit(post, attacked, good_body(attacked, family, input=f"{HOLD} Please wait."))
            wait_for(lambda: (lane := attacked.lane(family)) is not None and lane.running == 1, timeout=60)
            futures = [pool.submit(post, attacked, good_body(attacked, family, input=t)) for t in texts]
            wait_for(lambda: attacked.lane(family).waiting == len(texts), timeout=60)
        finally:
            GATE.set()
        answers = [f.result() for f in futures]
        assert blocker.result().status_code == 200
    for text, r in zip(texts, answers, strict=True):
        if marker in text:
            assert_openai_error(r, status, "input" if status == 400 else None, "simulated")
            continue
        assert r.status_code == 200, r.text
        codec, rate, samples = decode(r.content)
        assert codec == "pcm_s16le" and rate == attacked.caps[family].sample_rate and len(samples) > 0
    done_before = (before.completed, before.failed) if before else (0, 0)
    counts = lambda: (attacked.lane(family).completed - done_before[0], attacked.lane(family).failed - done_before[1])  # noqa: E731
    with contextlib.suppress(AssertionError):  # jobs are counted just after they are answered
        wait_for(lambda: counts() == (8, 1), timeout=10)
    assert counts() == (8, 1)  # the blocker, seven good, one poisoned
    if attacked.caps[family].batch:
        assert attacked.lane(family).largest_batch == len(texts), "the eight did not form one batch: the test proves nothing about batches"


def test_every_registered_family_has_its_few_step_options():
    """A new family in the registry must be added to FAST, so the attack set runs it quickly."""
    assert set(FAMILIES) <= set(FAST), f"add {sorted(set(FAMILIES) - set(FAST))} to FAST in tests/test_attacks.py"
