"""Upstream's model inputs: `CosyVoiceFrontEnd`'s `frontend_zero_shot`, `frontend_cross_lingual`,
`frontend_instruct2` and `frontend_vc`, as CosyVoice2/CosyVoice3 build and call them.

Job: {"folders": {name: released folder}, "clips": [wav paths], "cases": [{"name", "mode"
("zero_shot", "cross_lingual", "instruct2" or "vc"), "text", "prompt_text" (the instruction for
instruct2), "prompt" (clip index), "source" (clip index, vc)}]}.

For each folder the front end is built as `CosyVoice2.__init__` / `CosyVoice3.__init__` build it
(the yaml read with HyperPyYAML, its `get_tokenizer`, `feat_extractor` and `allowed_special`, the
folder's `campplus.onnx` and `speech_tokenizer_v<version>.onnx`, one onnxruntime thread), and each
case runs with `resample_rate` the yaml's `sample_rate`. Tensors: `<folder>/<case>/<key>` for every
key of the returned dict; info: {"keys": {"<folder>/<case>": [keys]}, "errors": {...: message}}.
"""

from __future__ import annotations

import os

from common import read_configs, read_job, write_results
from cosyvoice.cli.frontend import CosyVoiceFrontEnd


def front_end(folder: str) -> tuple[CosyVoiceFrontEnd, int]:
    configs, version = read_configs(folder)
    fe = CosyVoiceFrontEnd(
        configs["get_tokenizer"],
        configs["feat_extractor"],
        os.path.join(folder, "campplus.onnx"),
        os.path.join(folder, f"speech_tokenizer_v{version}.onnx"),
        os.path.join(folder, "spk2info.pt"),
        configs["allowed_special"],
    )
    return fe, configs["sample_rate"]


def main() -> None:
    job, out = read_job()
    clips = job["clips"]
    tensors, info = {}, {"keys": {}, "errors": {}}
    for name, folder in job["folders"].items():
        fe, rate = front_end(folder)
        for case in job["cases"]:
            where = f"{name}/{case['name']}"
            prompt = clips[case["prompt"]]
            try:
                if case["mode"] == "zero_shot":
                    inputs = fe.frontend_zero_shot(case["text"], case["prompt_text"], prompt, rate, "")
                elif case["mode"] == "cross_lingual":
                    inputs = fe.frontend_cross_lingual(case["text"], prompt, rate, "")
                elif case["mode"] == "instruct2":
                    inputs = fe.frontend_instruct2(case["text"], case["prompt_text"], prompt, rate, "")
                elif case["mode"] == "vc":
                    inputs = fe.frontend_vc(clips[case["source"]], prompt, rate)
                else:
                    raise ValueError(f"unknown mode {case['mode']!r}")
            except AssertionError as e:
                info["errors"][where] = str(e)
                continue
            info["keys"][where] = sorted(inputs)
            for key, value in inputs.items():
                tensors[f"{where}/{key}"] = value.clone()  # the dict shares tensors (llm_/flow_): saved apart
    write_results(out, tensors, info)


if __name__ == "__main__":
    main()
