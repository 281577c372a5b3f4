"""The exponential race draws exactly like `torch.multinomial` (ids and generator state) on the CPU."""

import pytest
import torch

from koe.runtime.sampling import SamplingConfig, draw, exponential_race, process_logits


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch,vocab", [(1, 3072), (2, 2048), (8, 3072), (3, 7)])
def test_race_equals_multinomial(threads: int, batch: int, vocab: int) -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for trial in range(40):
            logits = torch.randn(batch, vocab, generator=torch.Generator().manual_seed(1000 + trial)) * 3
            if trial % 2:
                logits[:, vocab // 2 :] = -float("inf")  # filtered ids, as top-k leaves them
            probs = torch.softmax(logits, dim=-1)
            g1, g2 = torch.Generator().manual_seed(trial), torch.Generator().manual_seed(trial)
            expected = torch.multinomial(probs, 1, generator=g1).squeeze(1)
            got = exponential_race(probs.clone(), g2)
            assert torch.equal(got, expected)
            assert torch.equal(g1.get_state(), g2.get_state())
    finally:
        torch.set_num_threads(before)


def test_race_global_generator_and_draw() -> None:
    cfg = SamplingConfig(temperature=0.9, top_k=50)
    logits = torch.randn(4, 3072, generator=torch.Generator().manual_seed(3))
    scores = process_logits(logits.clone(), torch.zeros((4, 0), dtype=torch.long), cfg)
    torch.manual_seed(7)
    expected = torch.multinomial(torch.softmax(scores, dim=-1), 1).squeeze(1)
    state = torch.get_rng_state()
    torch.manual_seed(7)
    got = draw(scores, cfg)
    assert torch.equal(got, expected)
    assert torch.equal(torch.get_rng_state(), state)
