"""CosyVoice 2/3's LM on streamed text (text arriving in pieces, as from an LLM) against upstream's
`llm.inference_bistream` (its source at ace7c47 in `.oracle-cosyvoice`), token for token at one
torch thread, upstream after `torch.manual_seed(seed)`: the prompt's text and speech interleaved
5 to 15, the forced and sampled fill ids, waiting for text, the last phase after the text ends.

Pieces arrive one id at a time (as upstream's front end hands them to the LM) and whole. Upstream's
last phase has no length limit and raises on an id past the speech vocabulary other than the one
it expects; both sides read at most `limit` tokens and must end the same way. On the random
folders v3 soon draws such an id (200 of its ids are past the speech vocabulary), so a
"streamable" copy of each folder makes those ids unlikely (every input embedding shifted along one
direction the head's extra rows point away from) and the task id's embedding call the end id, so
streams run to their natural end (`fixtures.streamable_copy`).
"""

from __future__ import annotations

import pytest
import torch
from oracle_harness import run_oracle

from koe.engines.cosyvoice.config import read_config
from koe.engines.cosyvoice.fixtures import VARIANTS, streamable_copy, write_random_model
from koe.engines.cosyvoice.llm import ENDOFPROMPT_ID as E
from koe.engines.cosyvoice.llm import StreamedTextError, generate_tokens_streamed, load_lm

pytestmark = pytest.mark.oracle

CASES = [
    {"pieces": [[1, 2, 3], [4], [5, 6, 7, 8, 9, 10, 11], [12, 13]], "prompt_text": [E, 20, 21], "prompt_speech": list(range(30, 52)), "seed": 1},
    {"pieces": [[i] for i in range(100, 130)], "prompt_text": [7, E], "prompt_speech": [], "seed": 2},
    {"pieces": [[5, 5, 5]] * 6, "prompt_text": [E], "prompt_speech": list(range(1, 16)), "seed": 3},
    {"pieces": [[8, 9]], "prompt_text": [3, 4, 5, 6, E, 1, 2, 3, 4, 5, 6, 7], "prompt_speech": list(range(1, 40)), "seed": 4},
    {
        "pieces": [[40 + i for i in range(12)], [], [60, 61, 62, 63, 64, 65, 66]],
        "prompt_text": [E, 9, 9, 9, 9, 9, 9],
        "prompt_speech": list(range(200, 245)),
        "seed": 5,
    },
]
CASES = [{**c, "split": split, "limit": 120} for c in CASES for split in (True, False)]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("cosyvoice-streamed")
    found = []
    for variant in VARIANTS:
        base = write_random_model(root / variant, variant, parts=("yaml", "blank", "llm.pt", "hift.pt"), seed=7)
        found += [base, streamable_copy(base, root / f"{variant}-streamable")]
    return found


@pytest.fixture(scope="module")
def upstream(folders, tmp_path_factory):
    return run_oracle(
        "lm_streamed", {"folders": [str(f) for f in folders], "cases": CASES}, tmp_path_factory.mktemp("streamed"), family="cosyvoice", keep=("tokens_*",)
    )


def _ids(values: list[int]) -> torch.Tensor:
    return torch.tensor([values], dtype=torch.int32).reshape(1, -1)


def _pieces(case: dict):
    for piece in case["pieces"]:
        if case["split"]:
            yield from (_ids([t]) for t in piece)
        else:
            yield _ids(piece)


def _koe(lm, case: dict) -> tuple[list[int], str]:
    tokens: list[int] = []
    g = torch.Generator().manual_seed(case["seed"])
    try:
        for token in generate_tokens_streamed(lm, _pieces(case), _ids(case["prompt_text"]), _ids(case["prompt_speech"]), generator=g):
            tokens.append(token)
            if len(tokens) == case["limit"]:
                return tokens, "limit"
    except StreamedTextError as e:
        return tokens, f"error: {e}"
    return tokens, "end"


@pytest.mark.parametrize("f", range(4), ids=[f"{v}{s}" for v in VARIANTS for s in ("", "-streamable")])
def test_streamed_text_gives_upstreams_tokens(f, folders, upstream):
    tensors, info = upstream
    config, qwen = read_config(folders[f])
    lm = load_lm(folders[f], config.lm, qwen)
    ends = []
    for i, case in enumerate(CASES):
        tokens, end = _koe(lm, case)
        want, want_end = tensors[f"tokens_{f}_{i}"].tolist(), info["ends"][f][i]
        assert tokens == want, f"case {i}: koe {tokens[:20]}... ({len(tokens)}), upstream {want[:20]}... ({len(want)})"
        assert end.split(":")[0] == want_end.split(":")[0], f"case {i}: koe ended {end!r}, upstream {want_end!r}"
        if end.startswith("error"):
            assert want_end == f"error: should not get token {end.split('id ')[1].split(' ')[0]}", (end, want_end)
        ends.append(end)
    if f % 2:
        assert ends.count("end") == len(CASES), ends  # the streamable copies run to their end ...
        assert any(len(tensors[f"tokens_{f}_{i}"]) > 30 for i in range(len(CASES)))
    assert f % 2 or config.version == 2 or any(e.startswith("error") for e in ends)  # ... v3's random one hits upstream's error


def test_v3_streamed_text_needs_the_end_of_prompt_token(folders):
    config, qwen = read_config(folders[2])
    lm = load_lm(folders[2], config.lm, qwen)
    with pytest.raises(ValueError, match="endofprompt"):
        next(generate_tokens_streamed(lm, iter([_ids([1, 2])]), _ids([3, 4]), _ids([])))
