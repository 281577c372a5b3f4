"""The released flow and vocoder layouts: upstream's modules built at the released size.

Job: {"version": 2 | 3, "yaml": koe's flow/hift sections at the released size}. Builds upstream's
own example yaml (examples/libritts/cosyvoice{2,3}/conf: the released architecture; its LM and
GAN training wrapper left out) and koe's sections, and reports each flow's and vocoder's state-dict
names and shapes (upstream's, with weight norm as its parametrization) and whether the modules
built from the two yamls print the same (every argument equal).
"""

from __future__ import annotations

import os

import cosyvoice
from hyperpyyaml import load_hyperpyyaml
from oracle_io import read_job, write_results


def _layout(module) -> dict[str, list[int]]:
    return {k: list(v.shape) for k, v in module.state_dict().items()}


def main() -> None:
    job, out = read_job()
    v = job["version"]
    root = os.path.dirname(os.path.dirname(cosyvoice.__file__))
    with open(f"{root}/examples/libritts/cosyvoice{v}/conf/cosyvoice{v}.yaml") as f:
        released = load_hyperpyyaml(f, overrides={"llm": None, "hifigan": None})
    ours = load_hyperpyyaml(job["yaml"])
    info = {
        "flow": _layout(released["flow"]),
        "hift": _layout(released["hift"]),
        "same_flow": str(released["flow"]) == str(ours["flow"]),
        "same_hift": str(released["hift"]) == str(ours["hift"]),
        "flow_chunk": [released["flow"].decoder.estimator.static_chunk_size, ours["flow"].decoder.estimator.static_chunk_size],
    }
    write_results(out, {}, info)


if __name__ == "__main__":
    main()
