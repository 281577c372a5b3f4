"""CosyVoice 2/3's speech-token LM against upstream's `llm.inference` (its source at ace7c47 in
`.oracle-cosyvoice`), token for token on the CPU in float32 at one torch thread: random-weight
folders in the released layout (upstream builds the LM from the yaml and loads `llm.pt` with
`strict=True`), zero-shot style inputs (text, prompt text, prompt speech tokens), upstream after
`torch.manual_seed(seed)`, koe from a generator seeded the same.

A "peaked" copy of each folder (the final norm keeps one channel, so the head offers the same few
candidates step after step; v2's end id favoured by its bias) makes RAS redraw often and v2 stop on
its own, so both of upstream's draws and the end rules are compared, not only the first draw of
each step. Upstream's model-level `llm_job` (what the model keeps of the LM's tokens: v3 drops
silent tokens past five in a row) is compared on a v3 copy made to speak long silences.
"""

from __future__ import annotations

import shutil

import pytest
import torch
from oracle_harness import run_oracle

from koe.engines.cosyvoice import sampling
from koe.engines.cosyvoice.config import read_config
from koe.engines.cosyvoice.fixtures import write_random_model
from koe.engines.cosyvoice.llm import ENDOFPROMPT_ID, SILENT_TOKENS, generate_tokens, keep_silences_short, load_lm

pytestmark = pytest.mark.oracle

VARIANTS = ("CosyVoice2-0.5B", "Fun-CosyVoice3-0.5B-2512")
CASES = [
    {"text": [9707, 11, 1879, 0, ENDOFPROMPT_ID], "prompt_text": [40, 1079], "prompt_speech": [11, 5, 6000, 5, 42, 3], "seed": 1},
    {"text": [ENDOFPROMPT_ID, 100, 2000, 30000], "prompt_text": [], "prompt_speech": [], "seed": 2},
    {"text": [151643, 77, 88], "prompt_text": [1, 2, 3, ENDOFPROMPT_ID, 4], "prompt_speech": list(range(100, 140)), "seed": 3},
    {"text": [ENDOFPROMPT_ID], "prompt_text": [5], "prompt_speech": [6560, 0], "seed": 4},
    {"text": [300, 400, 500, 600, 700, 800, ENDOFPROMPT_ID], "prompt_text": [7, 8], "prompt_speech": [1, 2, 3], "seed": 1234},
]


def _peaked(src, dst, version: int):
    shutil.copytree(src, dst)
    state = torch.load(dst / "llm.pt", weights_only=True)
    norm = torch.zeros_like(state["llm.model.model.norm.weight"])
    norm[0] = 1.0  # the head sees one channel: its candidates are one of two sets, step after step
    state["llm.model.model.norm.weight"] = norm
    state["llm_decoder.weight"] = state["llm_decoder.weight"] * 4.0
    if version == 2:
        state["llm_decoder.bias"][6561] += 2.0  # the end of speech: among the candidates, once allowed
    torch.save(state, dst / "llm.pt")
    return dst


FOLDERS = [(v, kind) for v in VARIANTS for kind in ("random", "peaked")] + [(VARIANTS[1], "silent")]
JOB = [0, 4]  # the folders upstream's model-level llm_job also runs on: v2 random, v3 silent


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("cosyvoice")
    found = []
    for variant, kind in FOLDERS:
        base = root / variant
        if not base.exists():
            write_random_model(base, variant, parts=("yaml", "blank", "llm.pt", "hift.pt"), seed=3)
        if kind == "peaked":
            found.append(_peaked(base, root / f"{variant}-peaked", 2 if variant.startswith("CosyVoice2") else 3))
        elif kind == "silent":
            found.append(_silent(base, root / f"{variant}-silent"))
        else:
            found.append(base)
    return found


@pytest.fixture(scope="module")
def upstream(folders, tmp_path_factory):
    """One oracle run for every folder (one process: the loads dominate)."""
    job = {"folders": [str(f) for f in folders], "cases": CASES, "llm_job": JOB}
    return run_oracle("lm_inference", job, tmp_path_factory.mktemp("lm"), family="cosyvoice", keep=("tokens_*", "kept_*"))


def _ids(values: list[int]) -> torch.Tensor:
    return torch.tensor([values], dtype=torch.int32).reshape(1, -1)


@pytest.mark.parametrize("f", range(len(FOLDERS)), ids=[f"{v}-{kind}" for v, kind in FOLDERS])
def test_speech_tokens_equal_upstreams(f, folders, upstream, monkeypatch):
    tensors, info = upstream
    folder, peaked = folders[f], FOLDERS[f][1] == "peaked"
    config, qwen = read_config(folder)
    lm = load_lm(folder, config.lm, qwen)
    assert info["folders"][f]["version"] == config.version
    draws: list[int] = []
    real_draw = sampling._draw
    monkeypatch.setattr(sampling, "_draw", lambda probs, g: draws.append(probs.numel()) or real_draw(probs, g))
    lengths = []
    for i, case in enumerate(CASES):
        g = torch.Generator().manual_seed(case["seed"])
        tokens = list(generate_tokens(lm, _ids(case["text"]), _ids(case["prompt_text"]), _ids(case["prompt_speech"]), generator=g))
        want = tensors[f"tokens_{f}_{i}"].tolist()
        assert tokens == want, f"case {i}: koe {tokens[:20]}... ({len(tokens)}), upstream {want[:20]}... ({len(want)})"
        lengths.append(len(tokens))
    if peaked:
        redraws = sum(1 for n in draws if n == config.lm.vocab_size)
        assert redraws >= 5, f"RAS drew a second time {redraws} times: the comparison hardly covered it"
        maxima = [int(len(c["text"]) * 20) for c in CASES]
        assert any(n < m for n, m in zip(lengths, maxima)), "decoding never stopped before its maximum length"


def _silent(src, dst):
    """A v3 copy whose head favours the silent tokens on one sign of its one channel, which their
    own embeddings push that way: once silent, it stays silent for a while."""
    _peaked(src, dst, 3)
    state = torch.load(dst / "llm.pt", weights_only=True)
    silent = list(SILENT_TOKENS[3])
    state["llm_decoder.weight"][silent, 0] = 3.0
    state["speech_embedding.weight"][silent, 0] = 20.0
    torch.save(state, dst / "llm.pt")
    return dst


def test_the_models_token_job_keeps_what_upstreams_keeps(folders, upstream):
    tensors, _ = upstream
    dropped = 0
    for f in JOB:
        config, qwen = read_config(folders[f])
        lm = load_lm(folders[f], config.lm, qwen)
        for i, case in enumerate(CASES):
            g = torch.Generator().manual_seed(case["seed"])
            kept = list(
                keep_silences_short(
                    generate_tokens(lm, _ids(case["text"]), _ids(case["prompt_text"]), _ids(case["prompt_speech"]), generator=g), config.version
                )
            )
            assert kept == tensors[f"kept_{f}_{i}"].tolist(), f"folder {f} case {i}: kept tokens"
            dropped += len(tensors[f"tokens_{f}_{i}"]) - len(kept)
    assert dropped > 0, "no silent token was dropped: the comparison did not cover it"
