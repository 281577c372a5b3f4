"""Tokens -> waveform (koe.engines.cosyvoice.token2wav) against upstream's `CosyVoice2Model` /
`CosyVoice3Model.tts` with the LM's tokens fed in (CosyVoice@ace7c47 in its own venv), bit for bit
on the CPU in float32 at one thread, chunk by chunk.

Streamed: upstream's own loop (hop schedule 25 + prompt padding, then 50, 100; flow chunks with
look-ahead; v2's vocoder cache and Hamming cross-fade, v3's whole-mel re-vocoding) against
`HopSchedule` + `Token2WavStream`; offline, with and without `speed`. v2's vocoder draws its source
noise on every call: upstream after `torch.manual_seed(seed)`, koe from a generator seeded alike.
(With a real LM, upstream's v2 stream races the LM thread's draws against the vocoder's: feeding
the tokens in is how its stream is deterministic.)
"""

from __future__ import annotations

import pytest
import torch
from oracle_harness import run_oracle, same
from safetensors.torch import save_file

from koe.engines.cosyvoice.fixtures_flow import flow_config, hift_config, write_flow, write_hift, yaml_sections
from koe.engines.cosyvoice.token2wav import HopSchedule, Token2Wav, load_token2wav

pytestmark = pytest.mark.oracle

SIZES = [(130, 8), (40, 30), (200, 0)]  # (tokens, prompt tokens)
CASES = [
    {"input": 0, "stream": True, "seed": 1},  # 3 chunks: 25 + 17 (prompt padding), 50, the rest
    {"input": 1, "stream": True, "seed": 2},  # too short for a chunk: the final call only
    {"input": 2, "stream": True, "seed": 3},  # 4 chunks: 25, 50, 100, the rest
    {"input": 0, "seed": 4},
    {"input": 1, "seed": 5, "speed": 1.3},
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    g = torch.Generator().manual_seed(3)
    tensors = {}
    for i, (n, p) in enumerate(SIZES):
        tensors[f"token_{i}"] = torch.randint(0, 6561, (1, n), generator=g)
        tensors[f"prompt_token_{i}"] = torch.randint(0, 6561, (1, p), generator=g)
        tensors[f"prompt_feat_{i}"] = torch.randn(1, 2 * p, 80, generator=g) * 2 - 4
        tensors[f"embedding_{i}"] = torch.randn(1, 192, generator=g)
    path = tmp_path_factory.mktemp("cosyvoice-t2w-in") / "inputs.safetensors"
    save_file(tensors, str(path))
    return tensors, path


def _koe(t2w: Token2Wav, tensors: dict, case: dict) -> list[torch.Tensor]:
    i = case["input"]
    tokens, prompt = tensors[f"token_{i}"], (tensors[f"prompt_token_{i}"], tensors[f"prompt_feat_{i}"], tensors[f"embedding_{i}"])
    generator = torch.Generator().manual_seed(case["seed"])
    if not case.get("stream"):
        return [t2w.offline(tokens, *prompt, speed=case.get("speed", 1.0), generator=generator)]
    stream, schedule, chunks = t2w.stream(*prompt, generator=generator), HopSchedule(prompt[0].shape[1]), []
    while schedule.ready(tokens.shape[1]):
        end, offset = schedule.take()
        chunks.append(stream.chunk(tokens[:, :end], offset))
    chunks.append(stream.chunk(tokens, schedule.offset, finalize=True))
    return chunks


@pytest.mark.parametrize("version", [2, 3])
def test_token2wav_matches_upstream(version, inputs, tmp_path):
    tensors, path = inputs
    flow_pt, hift_pt = write_flow(tmp_path / "flow.pt", version), write_hift(tmp_path / "hift.pt", version)
    job = {"yaml": yaml_sections(version), "flow": str(flow_pt), "hift": str(hift_pt), "version": version, "inputs": str(path), "cases": CASES}
    upstream, info = run_oracle("flow_token2wav", job, tmp_path / "oracle", family="cosyvoice")
    t2w = load_token2wav(torch.load(flow_pt, weights_only=True), torch.load(hift_pt, weights_only=True), flow_config(version), hift_config(version))
    assert info["chunks"] == [3, 1, 4, 1, 1]
    for k, case in enumerate(CASES):
        chunks = _koe(t2w, tensors, case)
        assert len(chunks) == info["chunks"][k], f"case {k}: chunk count"
        for j, chunk in enumerate(chunks):
            assert same(chunk, upstream[f"chunk_{k}_{j}"]), f"case {k} ({case}), chunk {j}"
