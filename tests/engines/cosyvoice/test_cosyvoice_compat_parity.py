"""The CosyVoice drop-in (`koe.compat.cosyvoice`) against upstream's `AutoModel(model_dir=...)` (its
source at ace7c47 in `.oracle-cosyvoice`, oracle script tests/oracle_cosyvoice/compat_cases.py),
one oracle run, at one torch thread, each call after `torch.manual_seed(seed)`, every yielded
`tts_speech` compared bit for bit (count, shape, samples). Where a prompt clip gives a
speaker embedding, koe is handed onnxruntime's (as in test_cosyvoice_end_to_end_parity, which
measures what koe's own CAM++ changes).

- Streamed text: `tts_text` a generator of strings (as an LLM streams it) through
  `inference_zero_shot`, `inference_instruct2` and `inference_cross_lingual`, v2 offline and v3
  offline and streamed (upstream's v2 stream races two threads on one generator), with a prompt
  clip or a saved speaker (`zero_shot_spk_id`). The random LM
  would soon draw an id upstream's streamed-text decoding refuses, and that decoding has no length
  limit, so these cases run on `fixtures.streamable_copy` folders, whose LM ends after the text;
  the oracle also stops a runaway one and records it, and the test asserts none ran away. v3's
  streamed text needs `<|endofprompt|>` in the prompt text, which cross-lingual does not have:
  upstream's LM thread fails (its stream would wait forever), koe raises a ValueError naming it.
- Speakers: `add_zero_shot_spk` gives upstream's entry (every tensor equal), `save_spkinfo`
  writes a file upstream's `AutoModel` loads (`torch.load(weights_only=True)`) and reads as koe
  wrote it, and `zero_shot_spk_id` in zero-shot, cross-lingual and instruct2 (whose instruction
  upstream then ignores: the saved prompt text stands) speaks as upstream does, with a speaker
  upstream added and one koe saved; `inference_sft` on a folder with an SFT `spk2info.pt`; a
  long text spoken in several pieces and `text_frontend=False`, with a saved speaker.
- The hop: consecutive v3 streams on one object start where the previous stream's hop grew to
  (25, 50, 100), as upstream's model object keeps it; an offline call leaves it.
"""

from __future__ import annotations

import pytest
import torch
from oracle_harness import run_oracle, same

from koe.compat.cosyvoice import AutoModel
from koe.engines.cosyvoice.fixtures import streamable_copy, write_clip, write_random_model, write_sft_speakers

pytestmark = pytest.mark.oracle

V3 = "You are a helpful assistant.<|endofprompt|>"
CLIPS = [(2.4, 16000), (1.9, 24000), (2.2, 22050), (3.5, 16000), (6.0, 24000)]  # (seconds, rate)
WORDS = ["The", " quick", " brown", "", " fox", " jumps", " over", " the", " lazy", " dog", ",", " and", " then", " it", " rests", "."]
LONG = " ".join(f"This is sentence number {i} of a text long enough to be spoken in several pieces." for i in range(1, 13))
PIECES = ["Hello there, ", "this is text ", "arriving from an LLM, ", "piece by piece."]
SPEAKERS = [  # added by each side, to every folder (2 and 3: saved speakers with streamed text)
    {"folder": f, "id": "alice", "prompt_text": (V3 if f % 2 else "") + "This is the prompt.", "prompt": 0} for f in range(4)
]
KOE_SPEAKERS = {0: ("Another prompt, saved by koe.", 1), 1: (V3 + "Another prompt, saved by koe.", 1)}  # koe_alice: (prompt text, clip)


def _case(folder: int, mode: str, seed: int, **kw) -> dict:
    return {"folder": folder, "mode": mode, "prompt": 0, "seed": seed, **kw}


STREAMED_TEXT = [  # folders 2 (v2) and 3 (v3): streamable copies
    _case(2, "zero_shot", 5, text=PIECES, prompt_text="This is the prompt."),
    _case(2, "instruct2", 6, text=PIECES, instruct_text="用开心的语气说<|endofprompt|>"),
    _case(2, "cross_lingual", 7, text=["<|en|>Across ", "languages, ", "streamed."], prompt=2),
    _case(2, "zero_shot", 11, text=WORDS, prompt_text="Words, one at a time.", prompt=1),
    _case(3, "zero_shot", 5, text=PIECES, prompt_text=V3 + "This is the prompt."),
    _case(3, "zero_shot", 8, text=PIECES, prompt_text=V3 + "This is the prompt.", stream=True),
    _case(3, "instruct2", 9, text=PIECES, instruct_text="You are a helpful assistant. Speak happily.<|endofprompt|>", stream=True),
    _case(3, "zero_shot", 10, text=["今天天气", "真不错，", "我们去公园吧。"], prompt_text=V3 + "希望你以后能够做的比我还好呦。", prompt=1, stream=True),
    _case(3, "zero_shot", 11, text=WORDS, prompt_text=V3 + "Words, one at a time, as an LLM writes them.", prompt=1),
    _case(2, "zero_shot", 12, text=PIECES, spk="alice"),
    _case(3, "zero_shot", 12, text=PIECES, spk="alice", stream=True),
]
NO_SYSTEM_PROMPT = [_case(3, "cross_lingual", 7, text=["Across ", "languages."])]  # v3 streamed text without <|endofprompt|>
SPEAKER_CASES = [  # folders 0 (v2) and 1 (v3): SFT speakers, koe_alice (saved by koe), alice (added by each side)
    _case(0, "zero_shot", 7, text="Hello there, it is 5 pm.", spk="alice"),
    _case(0, "zero_shot", 7, text="Hello there, it is 5 pm.", spk="koe_alice"),
    _case(0, "cross_lingual", 3, text="<|en|>Across languages.", spk="alice"),
    _case(0, "instruct2", 4, text="Say it with joy!", instruct_text="用开心的语气说<|endofprompt|>", spk="alice"),
    _case(0, "sft", 2, text="Hello from a fine-tuned speaker. It has two sentences.", spk="sft_0"),
    _case(1, "zero_shot", 7, text="Hello there, it is 5 pm.", spk="alice"),
    _case(1, "cross_lingual", 3, text=V3 + "Across languages.", spk="koe_alice"),
    _case(1, "instruct2", 4, text="Say it with joy!", instruct_text="You are a helpful assistant. Speak happily.<|endofprompt|>", spk="koe_alice"),
    _case(1, "sft", 2, text=V3 + "Hello from a fine-tuned speaker.", spk="sft_1"),
    _case(1, "zero_shot", 5, text=LONG, spk="koe_alice"),  # several pieces, one after another
    _case(0, "zero_shot", 6, text="It is 5 pm, see you at 6.", prompt_text="The prompt has 3 words.", text_frontend=False, spk="koe_alice"),
]
HOPS = [  # folder 1 (v3), in this order on one object (conversion: as many tokens as the source has)
    _case(1, "vc", 2, source=3, stream=True),  # 87 tokens: one chunk at hop 25, the hop grows to 50
    _case(1, "vc", 3, source=4, stream=True, keep_hop=True),  # starts at 50 (a fresh start chunks differently)
    _case(1, "zero_shot", 13, text="An offline call in between.", prompt_text=V3 + "Stream.", keep_hop=True),  # leaves the hop
    _case(1, "zero_shot", 14, text="A saved speaker, streamed.", spk="koe_alice", stream=True, keep_hop=True),
    _case(1, "vc", 4, source=4, stream=True, keep_hop=True),
]
CASES = STREAMED_TEXT + NO_SYSTEM_PROMPT + SPEAKER_CASES + HOPS
_S, _N, _P = len(STREAMED_TEXT), len(NO_SYSTEM_PROMPT), len(SPEAKER_CASES)
STREAMED_K, ERROR_K, SPEAKER_K, HOP_K = range(_S), range(_S, _S + _N), range(_S + _N, _S + _N + _P), range(_S + _N + _P, len(CASES))


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("cosyvoice-compat")
    clips = [str(write_clip(d / f"clip{i}.wav", seconds, sr, seed=i)) for i, (seconds, sr) in enumerate(CLIPS)]
    bases = [write_random_model(d / v, v, seed=40 + i) for i, v in enumerate(("CosyVoice2-0.5B", "Fun-CosyVoice3-0.5B-2512"))]
    folders = [*bases, *(streamable_copy(b, d / f"{b.name}-streamable") for b in bases)]
    for f, base in enumerate(bases):
        write_sft_speakers(base, seed=f)
        writer = AutoModel(model_dir=str(base))
        prompt_text, clip = KOE_SPEAKERS[f]
        assert writer.add_zero_shot_spk(prompt_text, clips[clip], "koe_alice") is True
        writer.save_spkinfo()
    job = {"folders": [str(f) for f in folders], "clips": clips, "speakers": SPEAKERS, "cases": CASES, "cap": 1500}
    tensors, info = run_oracle("compat_cases", job, d / "work", family="cosyvoice", keep=("embedding_*", "spk_embedding_*"))
    models = [AutoModel(model_dir=str(f)) for f in folders]
    for speaker in SPEAKERS:  # koe adds the same speakers, given onnxruntime's embedding of the clip
        model = models[speaker["folder"]]
        _embedding(model, tensors[f"spk_embedding_{speaker['folder']}_{speaker['id']}"])
        model.add_zero_shot_spk(speaker["prompt_text"], clips[speaker["prompt"]], speaker["id"])
    return {"tensors": tensors, "info": info, "clips": clips, "models": models, "folders": folders}


def _embedding(model, embedding: torch.Tensor | None) -> None:
    """koe's front end handing out `embedding` for every clip (None: koe's own CAM++)."""
    inputs = model.core.inputs
    inputs.embedding = (lambda samples, rate: embedding) if embedding is not None else type(inputs).embedding.__get__(inputs)


def _koe(setup, k: int, fresh_hop: bool = False) -> list[torch.Tensor]:
    """Case k through koe's drop-in, as the oracle ran it through upstream's (`fresh_hop`: from
    a freshly loaded model's hop even where the case keeps the previous stream's)."""
    case = CASES[k]
    model = setup["models"][case["folder"]]
    if fresh_hop or not case.get("keep_hop", False):
        model._hop = 25
    _embedding(model, setup["tensors"].get(f"embedding_{k}"))
    text = case.get("text", "")
    if isinstance(text, list):
        text = (piece for piece in list(text))
    spk = case.get("spk", "")
    prompt = "" if spk else setup["clips"][case["prompt"]]
    kw = {"stream": case.get("stream", False), "speed": case.get("speed", 1.0), "text_frontend": case.get("text_frontend", True)}
    torch.manual_seed(case["seed"])
    mode = case["mode"]
    if mode == "zero_shot":
        made = model.inference_zero_shot(text, case.get("prompt_text", ""), prompt, zero_shot_spk_id=spk, **kw)
    elif mode == "cross_lingual":
        made = model.inference_cross_lingual(text, prompt, zero_shot_spk_id=spk, **kw)
    elif mode == "instruct2":
        made = model.inference_instruct2(text, case.get("instruct_text", ""), prompt, zero_shot_spk_id=spk, **kw)
    elif mode == "sft":
        made = model.inference_sft(text, spk, **kw)
    else:
        del kw["text_frontend"]
        made = model.inference_vc(setup["clips"][case["source"]], prompt, **kw)
    return [out["tts_speech"] for out in made]


def _compare(setup, k: int) -> None:
    info = setup["info"]
    assert str(k) not in info["errors"] and str(k) not in info["failures"], (info["errors"].get(str(k)), info["failures"].get(str(k)))
    made = _koe(setup, k)
    assert len(made) == info["chunks"][k] > 0, f"koe {len(made)} chunks, upstream {info['chunks'][k]}"
    for j, speech in enumerate(made):
        want = setup["tensors"][f"speech_{k}_{j}"]
        assert speech.dtype == want.dtype and speech.shape == want.shape, f"chunk {j}: {tuple(speech.shape)} vs {tuple(want.shape)}"
        assert same(speech, want), f"chunk {j}: samples differ"


def _id(k: int) -> str:
    c = CASES[k]
    return f"{k}-v{2 + c['folder'] % 2}-{c['mode']}{'-stream' if c.get('stream') else ''}{'-' + c['spk'] if c.get('spk') else ''}"


@pytest.mark.parametrize("k", STREAMED_K, ids=_id)
def test_streamed_text_equals_upstreams(setup, k):
    _compare(setup, k)


def test_streamed_text_cases_stream_long_enough(setup):
    """The streamed-text cases exercise upstream's whole bistream: several v3 chunks, real lengths."""
    info = setup["info"]
    assert max(info["chunks"][k] for k in STREAMED_K if CASES[k].get("stream")) >= 2
    lengths = [setup["tensors"][f"speech_{k}_0"].shape[1] for k in STREAMED_K if not CASES[k].get("stream")]
    assert min(lengths) > 0.2 * setup["models"][0].sample_rate, lengths


@pytest.mark.parametrize("k", ERROR_K, ids=_id)
def test_v3_streamed_text_without_a_system_prompt_is_refused(setup, k):
    """Upstream's LM thread fails on it (its stream would then wait forever); koe says why, before any audio."""
    assert any("endofprompt" in failure for failure in setup["info"]["failures"][str(k)])
    with pytest.raises(ValueError, match="endofprompt"):
        _koe(setup, k)


@pytest.mark.parametrize("f", range(4), ids=["v2", "v3", "v2-streamable", "v3-streamable"])
def test_added_speaker_equals_upstreams(setup, f):
    """`add_zero_shot_spk`: the entry upstream's `save_spkinfo` wrote (every key, dtype and value)."""
    tables, tensors = setup["info"]["tables"][str(f)], setup["tensors"]
    entry = setup["models"][f].spk2info["alice"]
    assert sorted(entry) == tables["alice"]
    for key, value in entry.items():
        want = tensors[f"table_{f}_alice_{key}"]
        assert same(value, want), key  # the dtype too


@pytest.mark.parametrize("f", [0, 1], ids=["v2", "v3"])
def test_saved_speakers_load_in_upstream(setup, f):
    """koe's `save_spkinfo` file: `torch.load(weights_only=True)` reads it, and upstream's
    `AutoModel` read the same speakers from it (its own `save_spkinfo` wrote them back unchanged)."""
    saved = torch.load(setup["folders"][f] / "spk2info.pt", weights_only=True)
    tables, tensors = setup["info"]["tables"][str(f)], setup["tensors"]
    assert sorted(saved) == ["koe_alice", "sft_0", "sft_1"]
    assert sorted(tables) == ["alice", "koe_alice", "sft_0", "sft_1"]
    for name, entry in saved.items():
        assert sorted(entry) == tables[name]
        for key, value in entry.items():
            assert same(value, tensors[f"table_{f}_{name}_{key}"]), (name, key)
    assert setup["models"][f].list_available_spks()[:3] == list(saved)


@pytest.mark.parametrize("k", SPEAKER_K, ids=_id)
def test_speaker_cases_equal_upstreams(setup, k):
    _compare(setup, k)


def test_a_long_text_is_spoken_in_pieces(setup):
    assert max(setup["info"]["chunks"][k] for k in SPEAKER_K) >= 3


def test_consecutive_streams_carry_the_hop(setup):
    """Streams on one object, in order: each starts at the hop the previous one grew to."""
    hops = setup["info"]["hops"]
    assert hops[HOP_K[0]] == 50 and hops[HOP_K[1]] == 100, hops
    for k in HOP_K:
        _compare(setup, k)
        assert setup["models"][CASES[k]["folder"]]._hop == hops[k], k
    second = HOP_K[1]
    fresh = _koe(setup, second, fresh_hop=True)  # chunked otherwise: the carried hop is what made it equal
    assert [c.shape for c in fresh] != [setup["tensors"][f"speech_{second}_{j}"].shape for j in range(setup["info"]["chunks"][second])]
