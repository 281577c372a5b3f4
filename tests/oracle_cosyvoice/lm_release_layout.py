"""The released LM layouts: upstream's `Qwen2LM` / `CosyVoice3LM` built from its own example yamls
(examples/libritts/cosyvoice{2,3}/conf: the released architecture; flow, vocoder and GAN left out)
on a Qwen2 of the released size, on the meta device (no weights: `Qwen2ForCausalLM.from_pretrained`
is replaced by building from the folder's config.json).

Job: {"blank": a folder with the released Qwen2 config.json}. Writes, per version, the LM's
state-dict names (in order) and shapes.
"""

from __future__ import annotations

import os

import cosyvoice
import cosyvoice.llm.llm as upstream_llm
import torch
from hyperpyyaml import load_hyperpyyaml
from oracle_io import read_job, write_results
from transformers import Qwen2Config, Qwen2ForCausalLM


class _FromConfig:
    @staticmethod
    def from_pretrained(path):
        return Qwen2ForCausalLM(Qwen2Config.from_pretrained(path))


def main() -> None:
    job, out = read_job()
    upstream_llm.Qwen2ForCausalLM = _FromConfig
    root = os.path.dirname(os.path.dirname(cosyvoice.__file__))
    info = {}
    for v in (2, 3):
        with open(f"{root}/examples/libritts/cosyvoice{v}/conf/cosyvoice{v}.yaml") as f, torch.device("meta"):
            configs = load_hyperpyyaml(f, overrides={"flow": None, "hift": None, "hifigan": None, "qwen_pretrain_path": job["blank"]})
        info[str(v)] = [[k, list(t.shape)] for k, t in configs["llm"].state_dict().items()]
    write_results(out, {}, info)


if __name__ == "__main__":
    main()
