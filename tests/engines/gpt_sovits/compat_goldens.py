"""The per-version `infer_*` goldens through the drop-in (`koe.compat.gpt_sovits`): upstream's
`TTS(TTS_Config(...)).run(inputs)` recorded on koe's random folders (infer_goldens.py,
tests/oracle_gpt_sovits/infer_run.py), here run with the same config dict and inputs dicts through
koe's `TTS`, each case on a fresh prompt cache as the oracle runs it: as many chunks, the same
sample rate, int16 samples (one dimension) whose sha256 and first 32 samples are upstream's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from golden_files import array_sha256
from infer_goldens import read_cases

from koe.compat.gpt_sovits import TTS, TTS_Config

__all__ = ["DropIn", "check_case", "check_equals_golden"]


class DropIn:
    """One drop-in `TTS` per model folder of a golden's inputs, on the config the oracle hands upstream
    (its `version` "v2" as there: the SoVITS file's own version is what counts)."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.spec = folder, read_cases(folder)
        self.tts: dict[str, TTS] = {}

    def config(self, model: str) -> dict:
        files, root = self.spec["models"][model], self.folder / "models" / model
        paths = {"t2s_weights_path": root / files["gpt"], "vits_weights_path": root / files["sovits"]}
        paths |= {"bert_base_path": root / "chinese-roberta-wwm-ext-large", "cnhuhbert_base_path": root / "chinese-hubert-base"}
        return {"custom": {"device": "cpu", "is_half": False, "version": "v2", **{k: str(p) for k, p in paths.items()}}}

    def model(self, model: str) -> TTS:
        if model not in self.tts:
            self.tts[model] = TTS(TTS_Config(self.config(model)))
        return self.tts[model]

    def inputs(self, name: str) -> tuple[TTS, dict]:
        """The case's model and its `run` inputs: the reference (and aux clip) by path."""
        case = self.spec["cases"][name]
        inputs = {k: v for k, v in case.items() if k not in ("aux", "model")}
        inputs["ref_audio_path"] = str(self.folder / "ref.wav")
        inputs["aux_ref_audio_paths"] = [str(self.folder / "aux.wav")] if case.get("aux") else []
        return self.model(case["model"]), inputs

    def run(self, name: str, **extra) -> list[tuple[int, np.ndarray]]:
        """The case as the oracle runs it: a fresh prompt cache, the reference (and aux clip) by path."""
        tts, inputs = self.inputs(name)
        tts.prompt_cache["ref_audio_path"] = None
        return list(tts.run({**inputs, **extra}))


def check_equals_golden(chunks: list[tuple[int, np.ndarray]], golden, name: str) -> None:
    assert len(chunks) == int(golden[f"{name}.count"])
    for k, (sr, audio) in enumerate(chunks):
        assert sr == int(golden[f"{name}.sr"])
        assert isinstance(audio, np.ndarray) and audio.dtype == np.int16 and audio.ndim == 1, k
        assert len(audio) == int(golden[f"{name}.{k}.length"]), k
        np.testing.assert_array_equal(audio[:32], golden[f"{name}.{k}.head"])
        assert array_sha256(audio) == str(golden[f"{name}.{k}.int16"]), k


def check_case(drop_in: DropIn, golden, name: str) -> None:
    """The case through the drop-in yields upstream's chunks, on the version upstream made of the folder."""
    check_equals_golden(drop_in.run(name), golden, name)
    model = drop_in.spec["cases"][name]["model"]
    assert drop_in.model(model).configs.version == str(golden[f"{model}.version"])
