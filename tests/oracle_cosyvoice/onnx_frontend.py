"""Upstream's ONNX parts through onnxruntime: CAM++ and the S3 speech tokenizer, as CosyVoice's
frontend runs them.

Job: {"campplus": campplus.onnx, "tokenizers": {"v2": speech_tokenizer_v2.onnx, ...},
"clips": [wav paths], "feats": safetensors of fbank_<i> (1, frames, 80) and mel_<i> (1, 128, T)
inputs fed to the graphs as they are (optional)}.

Each session is built as `CosyVoiceFrontEnd.__init__` builds it (all graph optimisations, one
intra-op thread, the CPU provider). For each clip, upstream's own `_extract_spk_embedding` and
`_extract_speech_token` run (unbound, on a stand-in holding the two sessions) and write
embedding_<i> and tokens_<name>_<i>, or the assertion upstream raises, in info (load_<i> when
`load_wav` refuses the clip, <name>_<i> when the tokenizer does); the features they
feed are written as upstream computes them (fbank_up_<i>: kaldi.fbank less its mean, mel_up_<i>:
whisper's log-mel). Each given feature is run through the graphs directly: emb_feat_<i>,
ids_feat_<name>_<i>. Info: the graphs' input and output names, shapes and dtypes.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import torch
import torchaudio.compliance.kaldi as kaldi
import whisper
from cosyvoice.cli.frontend import CosyVoiceFrontEnd
from cosyvoice.utils.file_utils import load_wav
from oracle_io import read_job, write_results
from safetensors.torch import load_file


def session(path: str) -> onnxruntime.InferenceSession:
    option = onnxruntime.SessionOptions()
    option.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    option.intra_op_num_threads = 1
    return onnxruntime.InferenceSession(path, sess_options=option, providers=["CPUExecutionProvider"])


class _Frontend:
    """What `_extract_spk_embedding` / `_extract_speech_token` read from `self`."""

    def __init__(self, campplus, tokenizer) -> None:
        self.campplus_session = campplus
        self.speech_tokenizer_session = tokenizer
        self.device = torch.device("cpu")


def describe(s: onnxruntime.InferenceSession) -> dict:
    return {
        "inputs": [[v.name, v.type, v.shape] for v in s.get_inputs()],
        "outputs": [[v.name, v.type, v.shape] for v in s.get_outputs()],
    }


def main() -> None:
    job, out = read_job()
    campplus = session(job["campplus"]) if job.get("campplus") else None
    tokenizers = {name: session(path) for name, path in job.get("tokenizers", {}).items()}
    tensors: dict[str, torch.Tensor] = {}
    info: dict = {"graphs": {}, "errors": {}}
    if campplus is not None:
        info["graphs"]["campplus"] = describe(campplus)
    for name, s in tokenizers.items():
        info["graphs"][name] = describe(s)

    for i, clip in enumerate(job.get("clips", [])):
        try:
            speech = load_wav(clip, 16000)
        except AssertionError as e:  # a rate under 16 kHz: upstream's load_wav refuses it for both parts
            info["errors"][f"load_{i}"] = str(e)
            continue
        if campplus is not None:
            feat = kaldi.fbank(speech, num_mel_bins=80, dither=0, sample_frequency=16000)
            tensors[f"fbank_up_{i}"] = feat - feat.mean(dim=0, keepdim=True)
            tensors[f"embedding_{i}"] = CosyVoiceFrontEnd._extract_spk_embedding(_Frontend(campplus, None), clip)
        if tokenizers and speech.shape[1] / 16000 <= 30:
            tensors[f"mel_up_{i}"] = whisper.log_mel_spectrogram(speech, n_mels=128)
        for name, s in tokenizers.items():
            try:
                tokens, length = CosyVoiceFrontEnd._extract_speech_token(_Frontend(None, s), clip)
            except AssertionError as e:
                info["errors"][f"{name}_{i}"] = str(e)
                continue
            tensors[f"tokens_{name}_{i}"] = tokens
            assert int(length[0]) == tokens.shape[1]

    feats = load_file(job["feats"]) if job.get("feats") else {}
    for key, feat in feats.items():
        kind, i = key.rsplit("_", 1)
        if kind == "fbank" and campplus is not None:
            result = campplus.run(None, {campplus.get_inputs()[0].name: feat.numpy()})[0]
            tensors[f"emb_feat_{i}"] = torch.from_numpy(np.ascontiguousarray(result))
        elif kind == "mel":
            for name, s in tokenizers.items():
                inputs = s.get_inputs()
                ids = s.run(None, {inputs[0].name: feat.numpy(), inputs[1].name: np.array([feat.shape[2]], dtype=np.int32)})[0]
                tensors[f"ids_feat_{name}_{i}"] = torch.from_numpy(np.ascontiguousarray(ids)).to(torch.int64)
    write_results(out, tensors, info)


if __name__ == "__main__":
    main()
