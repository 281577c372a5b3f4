"""The upstream side of `koe bench --family indextts` for release 2.5: `infer_v2_5.IndexTTS2` from
upstream's source (index-tts@ee40fa7) in the oracle's virtualenv and its own process. `bench_worker.py`
(the script the benchmark starts) hands a release 2.5 folder (its `codec.pth`) to
`IndexTTS25UpstreamWorker`, with its `wire`, `cases` and `Parts`.

It drives upstream's public inference path: `IndexTTS2(cfg_path, model_dir, use_bf16=False,
device="cpu", use_qwen_emo=False)` once (float32; the auxiliary models from the folder's `hf_cache/`,
where 2.5 looks first: nothing is downloaded), then per request its per-clip caches emptied (every
request reads its clip, as upstream's first call with it does and as koe's does),
`torch.manual_seed(seed)` and `infer(clip, text, None, lang, max_mel_tokens=codes)`: the clip's own
emotion, upstream's other defaults.

Parts, each part's seconds without the wrapped calls inside it (`Parts`): the text (the normaliser's
`normalize`, `split_text_by_tokens`, the tokenizer's `encode`); the reference: everything from the
call to the text's first step (the clip read and resampled, w2v-BERT twice, the mel, CAM++'s style,
the prompt condition, the emotion clip's features), then `gpt.merge_emovec` (upstream runs it per
segment); `gpt.inference_speech` (the search, with the GPT's conditioning row inside it); s2mel: the
codec's `decode`, the length regulator (after the text) and `cfm.inference`; `bigvgan.forward` (the
vocoder, whose float output the hashes read). Within the reference, timed apart: w2v-BERT
(`extract_features` and `get_emb`), the mel (`mel_fn`) and CAM++ (kaldi's `fbank` and
`campplus_model.forward`).

2.5 imports openai-whisper's tokenizer and tiktoken (the oracle's venv has them) and modelscope at
the top (unused here: an empty module stands in where it is missing, as for release 2).
"""

from __future__ import annotations

import time
from pathlib import Path

from bench_worker2 import CACHES, Apart, stand_in_unused


class IndexTTS25UpstreamWorker:
    def __init__(self, wire, cases, parts) -> None:
        self.wire, self.cases, self.parts = wire, cases, parts
        self.tts = None

    def load(self, cmd: dict) -> dict:
        wire = self.wire
        started = time.perf_counter()
        stand_in_unused()
        from indextts.infer_v2_5 import IndexTTS2

        imported = time.perf_counter()
        folder = Path(cmd["model"])
        self.tts = IndexTTS2(cfg_path=str(folder / "config.yaml"), model_dir=str(folder), use_bf16=False, device="cpu", use_qwen_emo=False)
        load_s = time.perf_counter() - imported
        dtype = str(next(self.tts.gpt.parameters()).dtype).removeprefix("torch.")
        return {"load_s": load_s, "import_s": imported - started, "peak_rss": wire.peak_rss(), "rss": wire.current_rss(), "precision": dtype}

    def run(self, cmd: dict) -> dict:
        text, reference, codes, seed = self.cases.request(cmd)
        return self.wire.run_case(cmd, lambda: self._run(text, reference, codes, seed, self.cases.language(cmd)))

    def _run(self, text: str, reference: str, codes_cap: int, seed: int, lang: str) -> dict:
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

        parts.wrap(tts.text_process, "normalize", "text_s", before=text_begins)
        parts.wrap(tts, "split_text_by_tokens", "text_s", before=text_begins)
        lr = tts.s2mel.models["length_regulator"]
        for owner, name, part, after in (
            (tts.tokenizer, "encode", "text_s", None),
            (tts.gpt, "merge_emovec", "reference_s", None),
            (tts.gpt, "inference_speech", "search_s", lambda out: made.append(out[0][0].tolist())),
            (tts.semantic_codec, "decode", "s2mel_s", None),
            (lr, "forward", after_text("s2mel_s"), None),
            (tts.s2mel.models["cfm"], "inference", "s2mel_s", None),
            (tts.bigvgan, "forward", "vocoder_s", lambda out: waves.append(out.detach().clone())),
        ):
            parts.wrap(owner, name, part, after)
        for owner, name, part in (
            (tts, "extract_features", "w2v_s"),
            (tts, "get_emb", "w2v_s"),
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
            rate, _pcm = tts.infer(reference, text, None, lang, max_mel_tokens=codes_cap)
            total_s = time.perf_counter() - t
        finally:
            parts.unwrap()
            apart.unwrap()
        assert rate == cases.SAMPLE_RATES["IndexTTS-2.5"]
        seconds = {part: parts.seconds.get(part, 0.0) for part in cases.PARTS_25}
        seconds["reference_s"] += first_text[0] - t  # both clips, before the text
        seconds.update({part: apart.seconds.get(part, 0.0) for part in cases.REFERENCE_PARTS_25})
        wave = torch.cat([w.reshape(-1) for w in waves]).numpy()
        codes = sum(len(c) for c in made)
        return cases.result(
            self.wire, total_s, wave, seconds, codes, len(made), cases.codes_sha1(made), variant="IndexTTS-2.5", threads=torch.get_num_threads()
        )
