"""Shared by the scripts in this folder, which run inside the CosyVoice oracle virtualenv
(upstream's source at ace7c47 with Matcha-TTS, transformers 4.51.3).

`read_configs(folder)` is what upstream's `CosyVoice2`/`CosyVoice3` constructors do with a released
folder's yaml (HyperPyYAML, `qwen_pretrain_path` overridden to the folder's `CosyVoice-BlankEN`):
every object built in document order, the 1986 seeds applied, the LM's Qwen2 backbone loaded from
`CosyVoice-BlankEN` by transformers. `load_lm(folder)` then loads `llm.pt` into the LM as
`CosyVoiceModel.load` does (`strict=True`, weights only) and puts it in eval mode. `load_model`
is `AutoModel(model_dir=folder)`: the whole folder, every part strict.
"""

from __future__ import annotations

import os
import sys
import warnings

from oracle_io import read_job, write_results  # noqa: F401 - the scripts import them from here

warnings.filterwarnings("ignore")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

VERSIONS = {"cosyvoice2.yaml": 2, "cosyvoice3.yaml": 3}


def version_of(folder: str) -> tuple[int, str]:
    found = [(v, name) for name, v in VERSIONS.items() if os.path.isfile(os.path.join(folder, name))]
    if len(found) != 1:
        print(f"{folder}: expected exactly one of {sorted(VERSIONS)}", file=sys.stderr)
        sys.exit(3)
    return found[0]


def read_configs(folder: str) -> tuple[dict, int]:
    from hyperpyyaml import load_hyperpyyaml

    version, name = version_of(folder)
    with open(os.path.join(folder, name)) as f:
        configs = load_hyperpyyaml(f, overrides={"qwen_pretrain_path": os.path.join(folder, "CosyVoice-BlankEN")})
    return configs, version


def load_lm(folder: str):
    """(upstream's LM with `llm.pt` loaded strictly, the yaml's configs, the version)."""
    configs, version = read_configs(folder)
    llm = configs["llm"]
    llm.load_state_dict(torch.load(os.path.join(folder, "llm.pt"), map_location="cpu", weights_only=True), strict=True)
    return llm.eval(), configs, version


def load_model(folder: str):
    """Upstream's `AutoModel(model_dir=folder)` (CosyVoice2 or CosyVoice3, every part loaded strictly)."""
    from cosyvoice.cli.cosyvoice import AutoModel

    return AutoModel(model_dir=folder)
