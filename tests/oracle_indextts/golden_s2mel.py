"""The `s2mel` golden, upstream's side: IndexTTS 2's semantic-to-mel stage (length regulator, DiT, CFM).

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_indextts/golden_s2mel.py <folder> <out.npz>
`folder` holds what tests/engines/indextts/golden_s2mel.py `write_inputs` wrote. Each config is
loaded as `IndexTTS2.__init__` loads it (indextts/infer_v2.py): `MyModel(cfg.s2mel,
use_gpt_latent=True)`, `load_checkpoint2(...)` of its `s2mel.pth`, the estimator's
`setup_caches(max_batch_size=1, max_seq_length=8192)`, `eval()`; each group of the checkpoint is
then loaded again with `load_state_dict(strict=True)` (load_checkpoint2 itself skips what does not
match). Cases run as `infer` runs them: the length regulator with `n_quantizers=3, f0=None`,
`cfm.inference(mu, x_lens, ref_mel, style, None, steps, inference_cfg_rate=...)` right after
`torch.manual_seed(seed)`, and the whole per-segment chain (gpt_layer, `S_infer + latent`,
`(code_lens * 1.72).long()`, the prompt condition at the reference mel's frames from `mel_fn`,
25 steps at cfg 0.7, the prompt's frames cut).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import mel_fn_args, recorded_hashes, skip_dac_package_inits  # noqa: E402

skip_dac_package_inits()

from indextts.s2mel.modules.audio import mel_spectrogram  # noqa: E402
from indextts.s2mel.modules.commons import MyModel, load_checkpoint2  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402


def load(sub: Path):
    cfg = OmegaConf.load(sub / "config.yaml")
    s2mel = MyModel(cfg.s2mel, use_gpt_latent=True)
    fresh = {k: v.clone() for k, v in s2mel.state_dict().items() if k.endswith(".freqs")}
    with contextlib.redirect_stdout(io.StringIO()):
        s2mel, _, _, _ = load_checkpoint2(s2mel, None, str(sub / "s2mel.pth"), load_only_params=True, ignore_modules=[], is_distributed=False)
    net = torch.load(sub / "s2mel.pth", map_location="cpu")["net"]
    assert sorted(net) == sorted(s2mel.models), sorted(net)
    for key, module in s2mel.models.items():
        module.load_state_dict(net[key], strict=True)
    s2mel.models["cfm"].estimator.setup_caches(max_batch_size=1, max_seq_length=8192)
    s2mel.eval()
    return cfg, s2mel, fresh


def mel_fn(cfg):
    args = mel_fn_args(cfg)
    return lambda x: mel_spectrogram(x, **args)


def read(folder: Path, name: str, keys: tuple[str, ...]) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(np.load(folder / f"{name}.{k}.npy")) for k in keys}


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    cases = json.loads((folder / "cases.json").read_text())
    result = recorded_hashes(folder)
    models = {}
    for name in [line.split()[0] for line in (folder / "state_sha256.txt").read_text().splitlines()]:
        cfg, s2mel, fresh = load(folder / name)
        models[name] = (cfg, s2mel)
        for key, value in fresh.items():
            result[f"{name}.fresh.{key}"] = value.numpy()

    with torch.no_grad():
        for config_name, names in cases["regulator"].items():
            regulator = models[config_name][1].models["length_regulator"]
            for case in names:
                x = read(folder, f"regulator.{config_name}.{case}", ("content", "ylens"))
                cond, olens, *_ = regulator(x["content"], ylens=x["ylens"], n_quantizers=3, f0=None)
                result[f"regulator.{config_name}.{case}.out"] = cond.numpy()
                result[f"regulator.{config_name}.{case}.olens"] = olens.numpy()

        for case, spec in cases["cfm"].items():
            cfm = models[spec["config"]][1].models["cfm"]
            x = read(folder, f"cfm.{case}", ("mu", "ref_mel", "style", "x_lens"))
            torch.manual_seed(spec["seed"])
            mel = cfm.inference(x["mu"], x["x_lens"], x["ref_mel"], x["style"], None, spec["steps"], inference_cfg_rate=spec["cfg_rate"])
            result[f"cfm.{case}.mel"] = mel.numpy()
            result[f"cfm.{case}.after"] = torch.randn(4).numpy()  # the generator's state after: one draw of the noise

        chain = cases["chain"]
        cfg, s2mel = models[chain["config"]]
        x = read(folder, "chain", ("gpt_latent", "s_infer", "code_lens", "s_ref", "ref_audio", "style"))
        torch.manual_seed(chain["seed"])
        ref_mel = mel_fn(cfg)(x["ref_audio"].float())
        ref_target_lengths = torch.LongTensor([ref_mel.size(2)])
        prompt_condition = s2mel.models["length_regulator"](x["s_ref"], ylens=ref_target_lengths, n_quantizers=3, f0=None)[0]
        latent = s2mel.models["gpt_layer"](x["gpt_latent"])
        s_infer = x["s_infer"] + latent
        target_lengths = (x["code_lens"] * 1.72).long()
        cond = s2mel.models["length_regulator"](s_infer, ylens=target_lengths, n_quantizers=3, f0=None)[0]
        cat_condition = torch.cat([prompt_condition, cond], dim=1)
        vc_target = s2mel.models["cfm"].inference(
            cat_condition, torch.LongTensor([cat_condition.size(1)]), ref_mel, x["style"], None, 25, inference_cfg_rate=0.7
        )
        vc_target = vc_target[:, :, ref_mel.size(-1) :]
        result["chain.ref_mel"] = ref_mel.numpy()
        result["chain.prompt_condition"] = prompt_condition.numpy()
        result["chain.latent"] = latent.numpy()
        result["chain.condition"] = cond.numpy()
        result["chain.mel"] = vc_target.numpy()
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
