"""3D-Speaker's CAM++ in PyTorch (as the modelscope package ships it: `modelscope.models.audio.sv.DTDNN.
CAMPPlus(feat_dim=80, embedding_size=192)`, the model CosyVoice's campplus.onnx was exported from) on
given weights and filterbanks.

Job: {"weights": safetensors in 3D-Speaker's names, "feats": safetensors of fbank_<i> (1, frames, 80)}.
Loads the weights strictly, eval mode; writes embedding_<i>.

modelscope's package imports pull its whole framework (and packages this venv lacks) before the
model file; the two files that hold CAM++ (`DTDNN_layers.py`, `DTDNN.py`) import only torch and
four registry names, so they are loaded from the installed package alone, with those names given
as inert stand-ins (a registry whose decorator returns the class, a TorchModel that is nn.Module).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import torch
from oracle_io import read_job, write_results
from safetensors.torch import load_file


def _load_campplus_class():
    root = Path(importlib.util.find_spec("modelscope").origin).parent / "models" / "audio" / "sv"

    class _Registry:
        def register_module(self, *args, **kwargs):
            return lambda cls: cls

    class _Names:
        def __getattr__(self, name):
            return name

    stand_ins = {
        "modelscope": types.ModuleType("modelscope"),
        "modelscope.metainfo": types.SimpleNamespace(Models=_Names()),
        "modelscope.models": types.SimpleNamespace(MODELS=_Registry(), TorchModel=torch.nn.Module),
        "modelscope.utils": types.ModuleType("modelscope.utils"),
        "modelscope.utils.constant": types.SimpleNamespace(Tasks=_Names()),
        "modelscope.utils.device": types.SimpleNamespace(create_device=torch.device),
    }
    sys.modules.update(stand_ins)
    for name in ("DTDNN_layers", "DTDNN"):
        spec = importlib.util.spec_from_file_location(f"modelscope.models.audio.sv.{name}", root / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules["modelscope.models.audio.sv.DTDNN"].CAMPPlus


def main() -> None:
    job, out = read_job()
    model = _load_campplus_class()(feat_dim=80, embedding_size=192)
    model.load_state_dict(load_file(job["weights"]), strict=True)
    model.eval()
    tensors = {}
    with torch.inference_mode():
        for key, feat in load_file(job["feats"]).items():
            tensors[f"embedding_{key.rsplit('_', 1)[1]}"] = model(feat)
    write_results(out, tensors, {"parameters": sum(p.numel() for p in model.parameters())})


if __name__ == "__main__":
    main()
