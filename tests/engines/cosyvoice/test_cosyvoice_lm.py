"""CosyVoice's LM on its own: RAS sampling's order and draws, the prompt layout, strict loading of
`llm.pt`, the fixture's determinism. Parity with upstream is test_cosyvoice_lm_parity.py."""

from __future__ import annotations

import pytest
import torch

from koe.engines.cosyvoice.config import ConfigError, SamplingConfig, read_config
from koe.engines.cosyvoice.fixtures import lm_state, write_random_model
from koe.engines.cosyvoice.llm import ENDOFPROMPT_ID, StreamedTextError, TokenLimits, generate_tokens, generate_tokens_streamed, keep_silences_short, load_lm
from koe.engines.cosyvoice.sampling import nucleus, ras_sample
from koe.engines.cosyvoice.text import FrontEnd, TextTokenizer, spell_out_numbers, split_paragraph
from koe.runtime.weights import WeightsError

RAS = SamplingConfig()


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("cosyvoice-lm")
    return {
        v: write_random_model(root / name, name, parts=("yaml", "blank", "llm.pt")) for v, name in ((2, "CosyVoice2-0.5B"), (3, "Fun-CosyVoice3-0.5B-2512"))
    }


def _ids(values: list[int]) -> torch.Tensor:
    return torch.tensor([values], dtype=torch.int32).reshape(1, -1)


def _spelled_out_nucleus(logp: torch.Tensor, top_p: float, top_k: int) -> int:
    """Upstream's nucleus sampling as its loop reads (a float32 running sum, one draw)."""
    values, ids = logp.softmax(dim=0).sort(descending=True, stable=True)
    probs, taken, total = [], [], 0.0
    for i in range(len(ids)):
        if total < top_p and len(probs) < top_k:
            total += values[i]
            probs.append(values[i])
            taken.append(ids[i])
        else:
            break
    return int(torch.tensor(taken)[torch.tensor(probs).multinomial(1, replacement=True)].item())


@pytest.mark.parametrize("scale", [0.5, 3.0, 12.0])
def test_nucleus_draws_as_upstreams_loop(scale):
    g = torch.Generator().manual_seed(5)
    for seed in range(30):
        logp = (torch.randn(6564, generator=g) * scale).log_softmax(0)
        torch.manual_seed(seed)
        want = _spelled_out_nucleus(logp.clone(), 0.8, 25)
        assert nucleus(logp.clone(), 0.8, 25, torch.Generator().manual_seed(seed)) == want


def test_ras_draws_again_over_everything_when_the_token_repeats():
    logp = torch.full((10,), -30.0)
    logp[3] = 0.0  # token 3 is certain in the nucleus
    g = torch.Generator().manual_seed(0)
    assert ras_sample(logp.clone(), [1, 2], RAS, g) == 3  # no repeat: one draw
    taken = logp.clone()
    token = ras_sample(taken, [3, 7], RAS, torch.Generator().manual_seed(0))  # 3 already in the window: ruled out, drawn again
    assert token != 3 and taken[3] == -float("inf")
    assert ras_sample(logp.clone(), [3] + [1] * 10, RAS, torch.Generator().manual_seed(0)) == 3  # out of the 10-token window
    # the second draw comes from the same generator, after the first, over the whole distribution
    logp = torch.randn(50, generator=torch.Generator().manual_seed(1)).log_softmax(0)
    first = nucleus(logp.clone(), 0.8, 25, torch.Generator().manual_seed(9))
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    got = ras_sample(logp.clone(), [first], RAS, g1)
    assert nucleus(logp.clone(), 0.8, 25, g2) == first
    without = logp.clone()
    without[first] = -float("inf")
    assert got == int(without.softmax(0).multinomial(1, replacement=True, generator=g2)) and torch.equal(g1.get_state(), g2.get_state())


def test_a_seed_gives_the_same_tokens_and_another_seed_others(folders):
    config, qwen = read_config(folders[2])
    lm = load_lm(folders[2], config.lm, qwen)
    run = lambda seed: list(generate_tokens(lm, _ids([1, 2, 3]), _ids([4]), _ids([5, 6]), generator=torch.Generator().manual_seed(seed)))  # noqa: E731
    assert run(1) == run(1) and run(1) != run(2)
    assert len(run(1)) == 60  # v2's random LM rarely ends: 20 tokens per text id at most
    torch.manual_seed(1)
    assert list(generate_tokens(lm, _ids([1, 2, 3]), _ids([4]), _ids([5, 6]))) == run(1)  # None: torch's global generator


def test_the_prompt_is_laid_out_as_upstreams(folders):
    for version in (2, 3):
        config, qwen = read_config(folders[version])
        lm = load_lm(folders[version], config.lm, qwen)
        text, prompt_text, speech = _ids([7, ENDOFPROMPT_ID]), _ids([9]), _ids([4, 5, 6])
        x = lm.prompt(text, prompt_text, speech)
        assert x.shape == (1, 1 + 3 + 1 + 3, 32)
        table = lm.llm_embedding if version == 2 else lm.speech_embedding
        sos, task = (0, 1) if version == 2 else (6561, 6563)
        assert torch.equal(x[0, 0], table.weight[sos]) and torch.equal(x[0, 4], table.weight[task])
        assert torch.equal(x[0, 1], lm.backbone.embed_tokens.weight[9]) and torch.equal(x[0, 2], lm.backbone.embed_tokens.weight[7])
        assert torch.equal(x[0, 5:], lm.speech_embedding.weight[4:7])
        assert lm.prompt(text, prompt_text, _ids([])).shape == (1, 5, 32)


def test_v3_needs_the_end_of_prompt_token(folders):
    config, qwen = read_config(folders[3])
    lm = load_lm(folders[3], config.lm, qwen)
    with pytest.raises(ValueError, match="<\\|endofprompt\\|>"):
        next(generate_tokens(lm, _ids([1, 2]), _ids([3]), _ids([])))


def test_token_limits_count_the_target_text():
    assert TokenLimits().of(7) == (14, 140)
    assert TokenLimits(1.5, 10.25).of(3) == (4, 30)


def test_v3_keeps_silences_short():
    tokens = [5, 1, 2, 28, 29, 55, 248, 494, 7, 1, 1]
    assert list(keep_silences_short(iter(tokens), 3)) == [5, 1, 2, 28, 29, 55, 7, 1, 1]
    assert list(keep_silences_short(iter(tokens), 2)) == tokens


def test_llm_pt_loads_strictly(folders, tmp_path):
    config, qwen = read_config(folders[2])
    state = torch.load(folders[2] / "llm.pt", weights_only=True)
    for change, error, message in (
        (lambda s: s.pop("llm_decoder.bias"), WeightsError, "missing tensors: llm_decoder.bias"),
        (lambda s: s.update({"extra.weight": torch.zeros(1)}), WeightsError, "unexpected tensors: extra.weight"),
        (lambda s: s.update({"speech_embedding.weight": torch.zeros(10, 32)}), WeightsError, "speech_embedding.weight has shape \\(10, 32\\)"),
        (lambda s: s.update({"llm.model.lm_head.weight": torch.zeros(3, 32)}), ConfigError, "lm_head.weight is \\(3, 32\\)"),
        (lambda s: s.pop("llm.model.lm_head.weight"), ConfigError, "lm_head.weight is missing"),
    ):
        broken = dict(state)
        change(broken)
        torch.save(broken, tmp_path / "llm.pt")
        with pytest.raises(error, match=message):
            load_lm(tmp_path, config.lm, qwen)
    with pytest.raises(FileNotFoundError, match="llm.pt"):
        load_lm(tmp_path / "nowhere", config.lm, qwen)


def test_the_fixture_is_deterministic_and_ties_the_head():
    a, b = lm_state("Fun-CosyVoice3-0.5B-2512", seed=4), lm_state("Fun-CosyVoice3-0.5B-2512", seed=4)
    assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)
    assert a["llm.model.lm_head.weight"] is a["llm.model.model.embed_tokens.weight"]
    assert not torch.equal(a["speech_embedding.weight"], lm_state("Fun-CosyVoice3-0.5B-2512", seed=5)["speech_embedding.weight"])
    assert "llm_embedding.weight" not in a and "llm_decoder.bias" not in a
    assert a["speech_embedding.weight"].shape == (6761, 32) and a["llm.model.model.embed_tokens.weight"].shape == (151936, 32)


def test_the_text_tokenizer_gives_cosyvoices_special_ids(folders, tmp_path):
    v2, v3 = TextTokenizer(folders[2], 2), TextTokenizer(folders[3] / "CosyVoice-BlankEN", 3)
    assert [v2.token_id(t) for t in ("<|endoftext|>", "<|endofprompt|>", "[breath]", "[mn]")] == [151643, 151646, 151647, 151662]
    assert v2.token_id("<|endofsystem|>") is None and v3.token_id("<|endofsystem|>") == 151663 and v3.token_id("[ǜ]") == 151923
    assert v3.encode("a[breath]b") == [64, 151647, 65] and v3.decode([64, 151647, 65]) == "ab"
    with pytest.raises(ConfigError, match="no vocab.json"):
        TextTokenizer(tmp_path, 2)
    with pytest.raises(ConfigError, match="covers 2 or 3"):
        TextTokenizer(folders[2], 1)


@pytest.mark.parametrize("mode, bound", [("bf16", 0.03), ("int8", 0.05), ("int4", 0.3)])
def test_opt_in_precisions_stay_near_fp32(folders, mode, bound):
    """The opt-in modes (koe.runtime.precision) teacher-forced on fp32's tokens: each step's
    distribution within `bound` in total variation (measured on the tiny fixture: bf16 0.005,
    int8 0.008, int4 0.08; at the released width with 3 layers: 0.004, 0.015, 0.07)."""
    config, qwen = read_config(folders[3])
    exact = load_lm(folders[3], config.lm, qwen)
    lm = load_lm(folders[3], config.lm, qwen, precision=mode)
    assert lm.precision == {"bf16": "bfloat16"}.get(mode, mode) and exact.precision == "float32"
    text, prompt_text, speech = _ids([9707, 11, ENDOFPROMPT_ID, 5]), _ids([40]), _ids(list(range(10, 30)))
    tokens = list(generate_tokens(exact, text, prompt_text, speech, generator=torch.Generator().manual_seed(1)))[:40]

    def teacher(model) -> torch.Tensor:
        x, cache, out = model.prompt(text, prompt_text, speech), model.backbone.new_cache(), []
        with torch.inference_mode():
            for token in tokens:
                out.append(model.step(x, cache))
                x = model.token_embedding(token)
        return torch.stack(out)

    tv = 0.5 * (teacher(lm).exp() - teacher(exact).exp()).abs().sum(-1).max().item()
    assert tv < bound, tv
    if mode == "int8" and lm.backbone.kernel is not None:  # streamed text appends several positions to koe's C cache
        got = []
        try:
            for token in generate_tokens_streamed(
                lm, iter([_ids([1, 2, 3, 4, 5, 6, 7])] * 3), _ids([ENDOFPROMPT_ID]), _ids(list(range(40))), generator=torch.Generator().manual_seed(2)
            ):
                got.append(token)
        except StreamedTextError:
            pass  # v3's random LM soon gives an id past the speech vocabulary, as upstream's would
        assert got and all(0 <= t < 6561 for t in got)


def test_the_front_end_splits_and_packs_as_upstream_does(folders):
    assert split_paragraph("一。二！三", len, "zh") == ["一。二！三。"]  # short pieces are merged into one
    assert split_paragraph('He said "hi." Then left', len, "en", 10, 5, 2) == ['He said "hi."', " Then left."]
    assert split_paragraph('."', len, "en") == []  # a quote after a mark with no sentence before it
    assert split_paragraph("", len, "en") == []
    assert spell_out_numbers("a12b3", lambda run: f"<{run}>") == "a<12>b<3>"
    front = FrontEnd(TextTokenizer(folders[2], 2))
    assert front.normalize("  Hi there  ") == ["Hi there."] and front.normalize("  Hi there  ", split=False) == "Hi there"
    assert front.normalize("你 好 world 。", split=False) == "你好world。"
    assert front.normalize("<|endofprompt|> x ") == ["<|endofprompt|> x "]
    assert front.normalize("?!") == [] and front.normalize("") == [""]


def test_the_c_step_computes_what_the_modules_do(folders):
    """int8: koe's C decoder step (KernelCache) against the same quantized modules on a concat cache
    with transformers' mask, for prompts, single tokens and several tokens after a cache (streamed
    text), within float rounding."""
    config, qwen = read_config(folders[2])
    lm = load_lm(folders[2], config.lm, qwen, precision="int8")
    assert lm.backbone.kernel is not None, "koe's C decoder step did not take the stack (its kernels build on the test machines)"
    g = torch.Generator().manual_seed(0)
    chunks = [torch.randn(1, n, 32, generator=g) for n in (7, 1, 5, 1, 1, 9, 1)]

    def run(kernel) -> torch.Tensor:
        lm.backbone.kernel, saved = kernel, lm.backbone.kernel
        try:
            cache = lm.backbone.new_cache(4)
            with torch.inference_mode():
                return torch.cat([lm.backbone(x, cache) for x in chunks], dim=1)
        finally:
            lm.backbone.kernel = saved

    stepped, modules = run(lm.backbone.kernel), run(None)
    assert (stepped - modules).abs().max().item() < 1e-4
