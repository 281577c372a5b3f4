"""Upstream F5-TTS generation on a model folder, for parity tests.

Job: {"model": folder, "cases": [...]}; each case has a "kind":
- "sample": `CFM.sample` on a given reference mel (`ref_mel` tensor name in job["tensors"]) and
  token list, after `torch.manual_seed(seed)`; writes `<id>.mel` (the whole sampled mel) and
  `<id>.wav` (Vocos on the generated part);
- "vocos": `vocoder.decode` of a given mel; writes `<id>.wav`;
- "infer": the whole of upstream's path for a WAV reference and a text:
  `preprocess_ref_audio_text` then `infer_process` with the case's settings, right after
  `seed_everything(seed)` (what `F5TTS.infer(seed=N)` does); writes `<id>.wav` and `<id>.spec` (and
  `<id>.wav_float32` where the waveform is float64, from cross-faded batches);
- "api": `f5_tts.api.F5TTS(model=arch, ckpt_file, vocab_file, vocoder_local_path).infer(...)`; the
  class reads the arch from the package's `configs/<arch>.yaml` (the released size), so the
  folder's own config.yaml (a tiny arch in the same schema) is served in its place.
Upstream's text batches run on a one-worker pool (see common.py).
"""

from __future__ import annotations

import numpy as np
import torch
from common import one_worker_pool, read_job, use_soundfile_loader, write_results
from safetensors.torch import load_file


def _load(folder: str):
    from pathlib import Path

    import yaml
    from f5_tts.infer.utils_infer import load_model, load_vocoder
    from f5_tts.model import DiT

    folder = Path(folder)
    model_cfg = yaml.safe_load((folder / "config.yaml").read_text())["model"]
    ckpt = next(p for p in sorted(folder.iterdir()) if p.name.startswith("model_"))
    model = load_model(DiT, model_cfg["arch"], str(ckpt), "vocos", str(folder / "vocab.txt"), "euler", True, "cpu")
    vocoder = load_vocoder("vocos", True, str(folder / "vocos"), "cpu")
    return model, vocoder, ckpt, model_cfg


def main() -> None:
    job, out = read_job()
    use_soundfile_loader()
    one_worker_pool()
    from f5_tts.infer import utils_infer
    from f5_tts.model.utils import seed_everything

    model, vocoder, ckpt, model_cfg = _load(job["model"])
    given = load_file(job["tensors"]) if job.get("tensors") else {}
    tensors, info = {}, {}
    quiet = dict(show_info=lambda *a, **k: None, progress=None)
    for case in job["cases"]:
        cid, kind = case["id"], case["kind"]
        if kind == "sample":
            torch.manual_seed(case["seed"])
            with torch.inference_mode():
                mel, _ = model.sample(
                    cond=given[case["ref_mel"]],
                    text=[case["tokens"]],
                    duration=case["frames"],
                    steps=case["nfe_step"],
                    cfg_strength=case["cfg_strength"],
                    sway_sampling_coef=case["sway_sampling_coef"],
                )
                mel = mel.to(torch.float32)
                ref = given[case["ref_mel"]].shape[1]
                wav = vocoder.decode(mel[:, ref:, :].permute(0, 2, 1))
            tensors[f"{cid}.mel"], tensors[f"{cid}.wav"] = mel, wav
        elif kind == "vocos":
            with torch.inference_mode():
                tensors[f"{cid}.wav"] = vocoder.decode(given[case["mel"]])
        elif kind == "infer":
            settings = case.get("settings", {})
            seed_everything(case["seed"])
            ref_file, ref_text = utils_infer.preprocess_ref_audio_text(case["ref_audio"], case["ref_text"], show_info=lambda *a, **k: None)
            wav, sr, spec = utils_infer.infer_process(ref_file, ref_text, case["text"], model, vocoder, **quiet, **settings)
            tensors[f"{cid}.wav"] = torch.from_numpy(np.ascontiguousarray(wav))
            if wav.dtype == np.float64:  # cross-faded batches: also as float32, what koe's engine returns
                tensors[f"{cid}.wav_float32"] = torch.from_numpy(np.ascontiguousarray(wav.astype(np.float32)))
            tensors[f"{cid}.spec"] = torch.from_numpy(np.ascontiguousarray(spec))
            info[cid] = {"dtype": str(wav.dtype), "ref_text": ref_text, "sample_rate": sr}
        elif kind == "api":
            from f5_tts import api
            from omegaconf import OmegaConf

            folder = job["model"]
            api.OmegaConf = type("TinyArch", (), {"load": staticmethod(lambda path, folder=folder: OmegaConf.load(f"{folder}/config.yaml"))})
            F5TTS = api.F5TTS
            tts = F5TTS(model=model_cfg["name"], ckpt_file=str(ckpt), vocab_file=f"{folder}/vocab.txt", vocoder_local_path=f"{folder}/vocos", device="cpu")
            wav, sr, spec = tts.infer(case["ref_audio"], case["ref_text"], case["text"], seed=case["seed"], **quiet, **case.get("settings", {}))
            tensors[f"{cid}.wav"] = torch.from_numpy(np.ascontiguousarray(wav))
            info[cid] = {"dtype": str(wav.dtype), "sample_rate": sr}
        else:
            raise ValueError(f"unknown case kind {kind!r}")
    write_results(out, tensors, info)


if __name__ == "__main__":
    main()
