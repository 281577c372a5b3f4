"""The `sovits_v3` golden, upstream's side: `TTS.init_vits_weights` on koe's full-size v3 file and
on its v4 LoRA (the LoRA route: the pretrained model read from `default_configs["v4"]`, peft's
`get_peft_model` and `merge_and_unload`), then `TTS.using_vocoder_synthesis` with small vocoders
set as `TTS.init_vocoder` would set them (its `vocoder_configs` values; the vocoders' own files are
koe's small ones, loaded as init_vocoder loads them).

    <oracle python> tests/oracle_gpt_sovits/golden_sovits_v3.py <folder> <out.npz>

Each case: `torch.manual_seed(seed)` right before the call. Recorded: `state_sha256`, per case the
version upstream built, `<case>.fea` (decode_encp's features of the target), `<case>.audio`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from BigVGAN.bigvgan import BigVGAN  # noqa: E402
from sovits_oracle import TTS, _Configs  # noqa: E402
from vocoder_oracle import v4_vocoder  # noqa: E402

VOCODER_CONFIGS = {
    "v3": {"sr": 24000, "T_ref": 468, "T_chunk": 934, "upsample_rate": 256, "overlapped_len": 12},
    "v4": {"sr": 48000, "T_ref": 500, "T_chunk": 1000, "upsample_rate": 480, "overlapped_len": 12},
}


def vocoder(folder: Path, version: str) -> torch.nn.Module:
    if version == "v3":
        v = BigVGAN.from_pretrained(str(folder / "bigvgan"))
        v.remove_weight_norm()
        return v.eval()
    return v4_vocoder(folder)


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    a = {k: torch.from_numpy(v) for k, v in np.load(folder / "inputs.npz").items()}
    spec = json.loads((folder / "cases.json").read_text())
    result: dict[str, np.ndarray] = {"state_sha256": np.array((folder / "state_sha256.txt").read_text().split()[0])}
    for name, case in spec["cases"].items():
        tts = TTS.__new__(TTS)
        tts.configs = _Configs()
        tts.configs.default_configs["v4"]["vits_weights_path"] = str(folder / "s2Gv3.pth")  # the LoRA's pretrained model
        tts.init_vocoder = lambda version: None  # set below, from koe's small vocoders
        TTS.init_vits_weights(tts, str(folder / case["model"]))
        version = tts.configs.version
        tts.vocoder, tts.vocoder_configs = vocoder(folder, version), dict(VOCODER_CONFIGS[version])
        tts.precision = torch.float32
        tts.prompt_cache = {
            "prompt_semantic": a["prompt_codes"][0, 0],
            "phones": a["prompt_phones"][0].tolist(),
            "refer_spec": [a["spec"]],
            "raw_audio": a["ref_audio"],
            "raw_sr": spec["ref_rate"],
        }
        result[f"{name}.version"] = np.array(version)
        fea, _ = tts.vits_model.decode_encp(a["codes"], a["phones"], a["spec"], None, case["speed"])
        result[f"{name}.fea"] = fea.numpy()
        torch.manual_seed(case["seed"])
        audio = TTS.using_vocoder_synthesis(tts, a["codes"], a["phones"], speed=case["speed"], sample_steps=case["sample_steps"])
        result[f"{name}.audio"] = audio.numpy()
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
