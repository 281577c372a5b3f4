"""The upstream side of `koe bench --family indextts` for release 2: `IndexTTS2` from upstream's
source (index-tts@ee40fa7) in the oracle's virtualenv and its own process. `bench_worker.py` (the
script the benchmark starts) hands a release 2 folder to `IndexTTS2UpstreamWorker`, with its
`wire`, `cases` and `Parts`.

It drives upstream's public inference path: `IndexTTS2(cfg_path, model_dir, use_fp16=False,
device="cpu", use_qwen_emo=False, aux_paths=...)` once (float32; the auxiliary models from the
folder's `hf_cache/`, as upstream's downloader keeps them: nothing is downloaded), then per request
its per-clip caches emptied (every request computes its reference, as upstream's first call with a
clip does and as koe's does), `torch.manual_seed(seed)` and `infer(clip, text, output_path=None,
max_mel_tokens=codes)`: the clip's own emotion, upstream's other defaults.

Parts are timed by wrapping upstream's methods on the instance, each part's seconds without the
wrapped calls inside it (`Parts`): the tokenizer's `tokenize`, `split_segments` and
`convert_tokens_to_ids` (text); the reference: everything from the call to its first `tokenize`
(both clips read and resampled, their w2v-BERT features, the semantic codes, the 22.05 kHz mel,
CAM++'s style, the prompt condition), then `gpt.merge_emovec` and `gpt.get_conditioning` (upstream
runs them per segment); `gpt.inference_speech` (the search), `gpt.forward` (the latent pass);
s2mel: `gpt_layer`, the codec's `vq2emb`, the length regulator (after the text) and `cfm.inference`;
`bigvgan.forward` (the vocoder, whose float output the hashes read). Within the reference, timed
apart: w2v-BERT (`extract_features` and `get_emb`), the codec (`semantic_codec.quantize`), the mel
(`mel_fn`) and CAM++ (kaldi's `fbank` and `campplus_model.forward`).

Release 2's modules import openai-whisper's tokenizer, tiktoken and modelscope at the top (unused
here), and the length regulator imports upstream's vendored DAC package, whose `__init__`s import
descript-audiotools: where the venv lacks them, empty modules stand in (`stand_in_unused`), as the
goldens' scripts do.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import time
import types
from pathlib import Path

UNUSED_IMPORTS = ("whisper", "whisper.tokenizer", "tiktoken", "modelscope")
CACHES = ("cache_spk_cond", "cache_s2mel_style", "cache_s2mel_prompt", "cache_spk_audio_prompt", "cache_emo_cond", "cache_emo_audio_prompt", "cache_mel")
AUX = {
    "w2v_bert": "hf_cache/w2v-bert-2.0",
    "semantic_codec": "hf_cache/semantic_codec_model.safetensors",
    "campplus": "hf_cache/campplus_cn_common.bin",
    "bigvgan": "hf_cache/bigvgan",
}


def stand_in_unused() -> None:
    """Empty modules for the unused imports the venv lacks (transformers first: it looks tiktoken
    up), and bare packages over the DAC folders where descript-audiotools is missing."""
    import transformers  # noqa: F401

    for name in UNUSED_IMPORTS:
        try:
            __import__(name)
        except ModuleNotFoundError:
            stub = types.ModuleType(name)
            stub.__spec__ = importlib.machinery.ModuleSpec(name, None)
            stub.Tokenizer = type("Tokenizer", (), {})
            stub.AutoModelForCausalLM = type("AutoModelForCausalLM", (), {})
            sys.modules[name] = stub
    import indextts.s2mel

    root = Path(list(indextts.s2mel.__path__)[0]) / "dac"
    for name, folder in (("indextts.s2mel.dac", root), ("indextts.s2mel.dac.nn", root / "nn")):
        if name not in sys.modules and importlib.util.find_spec("audiotools") is None:
            package = types.ModuleType(name)
            package.__path__ = [str(folder)]
            package.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
            sys.modules[name] = package


class Apart:
    """Plain timers of calls inside the reference (nothing subtracted): seconds per name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.undo: list = []

    def wrap(self, owner, name: str, part: str) -> None:
        had = name in vars(owner)
        original = getattr(owner, name)
        self.undo.append((owner, name, had, vars(owner).get(name)))

        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[part] = self.seconds.get(part, 0.0) + time.perf_counter() - t

        setattr(owner, name, timed)

    def unwrap(self) -> None:
        for owner, name, had, old in reversed(self.undo):
            if had:
                setattr(owner, name, old)
            else:
                delattr(owner, name)
        self.undo.clear()


class IndexTTS2UpstreamWorker:
    def __init__(self, wire, cases, parts) -> None:
        self.wire, self.cases, self.parts = wire, cases, parts
        self.tts = None

    def load(self, cmd: dict) -> dict:
        wire = self.wire
        started = time.perf_counter()
        stand_in_unused()
        from indextts.infer_v2 import IndexTTS2

        imported = time.perf_counter()
        folder = Path(cmd["model"])
        aux = {key: str(folder / path) for key, path in AUX.items()}
        self.tts = IndexTTS2(cfg_path=str(folder / "config.yaml"), model_dir=str(folder), use_fp16=False, device="cpu", use_qwen_emo=False, aux_paths=aux)
        load_s = time.perf_counter() - imported
        dtype = str(next(self.tts.gpt.parameters()).dtype).removeprefix("torch.")
        return {"load_s": load_s, "import_s": imported - started, "peak_rss": wire.peak_rss(), "rss": wire.current_rss(), "precision": dtype}

    def run(self, cmd: dict) -> dict:
        text, reference, codes, seed = self.cases.request(cmd)
        return self.wire.run_case(cmd, lambda: self._run(text, reference, codes, seed))

    def _run(self, text: str, reference: str, codes_cap: int, seed: int) -> dict:
        import torch
        import torchaudio

        tts, cases = self.tts, self.cases
        parts, apart = self.parts(), Apart()
        waves, made, first_text = [], [], []

        def text_begins() -> None:
            if not first_text:
                first_text.append(time.perf_counter())

        def after_text(part: str):
            return lambda: part if first_text else None  # the prompt's length regulator runs inside the reference

        parts.wrap(tts.tokenizer, "tokenize", "text_s", before=text_begins)
        lr = tts.s2mel.models["length_regulator"]
        for owner, name, part, after in (
            (tts.tokenizer, "split_segments", "text_s", None),
            (tts.tokenizer, "convert_tokens_to_ids", "text_s", None),
            (tts.gpt, "merge_emovec", "reference_s", None),
            (tts.gpt, "get_conditioning", "reference_s", None),
            (tts.gpt, "inference_speech", "search_s", lambda out: made.append(out[0][0].tolist())),
            (tts.gpt, "forward", "latent_s", None),
            (tts.s2mel.models["gpt_layer"], "forward", "s2mel_s", None),
            (tts.semantic_codec.quantizer, "vq2emb", "s2mel_s", None),
            (lr, "forward", after_text("s2mel_s"), None),
            (tts.s2mel.models["cfm"], "inference", "s2mel_s", None),
            (tts.bigvgan, "forward", "vocoder_s", lambda out: waves.append(out.detach().clone())),
        ):
            parts.wrap(owner, name, part, after)
        for owner, name, part in (
            (tts, "extract_features", "w2v_s"),
            (tts, "get_emb", "w2v_s"),
            (tts.semantic_codec, "quantize", "codec_s"),
            (tts, "mel_fn", "mel_s"),
            (torchaudio.compliance.kaldi, "fbank", "campplus_s"),
            (tts.campplus_model, "forward", "campplus_s"),
        ):
            apart.wrap(owner, name, part)
        try:
            for cache in CACHES:
                setattr(tts, cache, None)
            torch.manual_seed(seed)
            t = time.perf_counter()
            rate, _pcm = tts.infer(reference, text, output_path=None, max_mel_tokens=codes_cap)
            total_s = time.perf_counter() - t
        finally:
            parts.unwrap()
            apart.unwrap()
        assert rate == cases.SAMPLE_RATES["IndexTTS-2"]
        seconds = {part: parts.seconds.get(part, 0.0) for part in cases.PARTS_2}
        seconds["reference_s"] += first_text[0] - t  # both clips, before the text
        seconds.update({part: apart.seconds.get(part, 0.0) for part in cases.REFERENCE_PARTS_2})
        wave = torch.cat([w.reshape(-1) for w in waves]).numpy()
        codes = sum(len(c) for c in made)
        return cases.result(self.wire, total_s, wave, seconds, codes, len(made), cases.codes_sha1(made), variant="IndexTTS-2", threads=torch.get_num_threads())
