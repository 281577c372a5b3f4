"""The `w2vbert` golden, upstream's side: IndexTTS 2's semantic features of voice clips.

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_indextts/golden_w2vbert.py <folder> <out.npz>
`folder` holds what tests/engines/indextts/golden_w2vbert.py `write_inputs` wrote: a w2v-BERT folder
(model.safetensors, config.json, preprocessor_config.json), the stats file, a semantic codec
(safetensors + its config section as json) and WAV clips. The feature extractor and model are
transformers' (the model loaded strictly), the codec is built by upstream's `build_semantic_codec`
and loaded as upstream loads it (`safetensors.torch.load_model`, strict), and each clip goes
through `IndexTTS2`'s own methods (`_load_and_cut_audio`, `get_emb`, run on a holder carrying only
what they read) in `infer`'s order:
  speaker  `_load_and_cut_audio(path, 15)` (22.05 kHz), `Resample(sr, 16000)`, the extractor,
           `get_emb`, `semantic_codec.quantize` -> codes and S_ref, `quantizer.vq2emb(codes.unsqueeze(1))`
  emotion  `_load_and_cut_audio(path, 15, sr=16000)`, the extractor, `get_emb`
Each path starts from `torch.manual_seed(SEED)`; torch's draws during it are listed (`op shape`) and
three `torch.rand` after it show the generator's state. Audio and most features are kept as hashes.
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import sha, stand_in_missing  # noqa: E402

SEED = 1234


draws: list[str] = []


def log_draws() -> None:
    for op in ("rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "multinomial", "bernoulli", "normal", "randperm", "poisson"):
        fn = getattr(torch, op)

        def logged(*args, _fn=fn, _op=op, **kwargs):
            result = _fn(*args, **kwargs)
            draws.append(f"{_op} {list(result.shape)}")
            return result

        setattr(torch, op, logged)


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    stand_in_missing()  # infer_v2's unused imports (the semantic path touches none of them)
    import safetensors.torch
    import torchaudio
    from indextts.codec.maskgct_codec import build_semantic_codec
    from indextts.infer_v2 import IndexTTS2
    from omegaconf import OmegaConf
    from transformers import SeamlessM4TFeatureExtractor, Wav2Vec2BertConfig, Wav2Vec2BertModel

    w2v = folder / "w2v-bert-2.0"
    extractor = SeamlessM4TFeatureExtractor.from_pretrained(str(w2v), local_files_only=True)
    model = Wav2Vec2BertModel(Wav2Vec2BertConfig.from_pretrained(str(w2v), local_files_only=True))
    model.load_state_dict(safetensors.torch.load_file(str(w2v / "model.safetensors")), strict=True)
    model.eval()
    stats = torch.load(folder / "wav2vec2bert_stats.pt")
    codec = build_semantic_codec(OmegaConf.create(json.loads((folder / "semantic_codec.json").read_text())))
    safetensors.torch.load_model(codec, str(folder / "semantic_codec.safetensors"))
    codec.eval()
    holder = types.SimpleNamespace(
        extract_features=extractor,
        semantic_model=model,
        semantic_mean=stats["mean"],
        semantic_std=torch.sqrt(stats["var"]),
        semantic_codec=codec,
    )
    spec = json.loads((folder / "clips.json").read_text())
    result: dict[str, np.ndarray] = {"seed": np.array(SEED)}
    for line in (folder / "state_sha256.txt").read_text().splitlines():
        if line.split():
            name, digest = line.split()
            result[f"{name}.state_sha256"] = np.array(digest)
    result["mel_filters_sha256"] = sha(extractor.mel_filters)
    result["window_sha256"] = sha(extractor.window)
    log_draws()

    def features(audio, key):
        inputs = holder.extract_features(audio, sampling_rate=16000, return_tensors="pt")
        feats, mask = inputs["input_features"], inputs["attention_mask"]
        result[f"{key}.features_sha256"] = sha(feats)
        result[f"{key}.features_shape"] = np.array(feats.shape)
        result[f"{key}.mask"] = mask.numpy()
        return feats, mask

    for name in spec["clips"]:
        path = str(folder / f"{name}.wav")
        key = f"{name}.spk"
        torch.manual_seed(SEED)
        draws.clear()
        audio, sr = IndexTTS2._load_and_cut_audio(holder, path, 15)
        audio_16k = torchaudio.transforms.Resample(sr, 16000)(audio)
        feats, mask = features(audio_16k, key)
        emb = IndexTTS2.get_emb(holder, feats, mask)
        codes, s_ref = holder.semantic_codec.quantize(emb)
        with torch.no_grad():
            back = holder.semantic_codec.quantizer.vq2emb(codes.unsqueeze(1))
        result[f"{key}.draws"] = np.array(draws)
        result[f"{key}.after"] = torch.rand(3).numpy()
        result[f"{key}.rate"] = np.array(sr)
        result[f"{key}.audio_sha256"] = sha(audio)
        result[f"{key}.audio_16k_sha256"] = sha(audio_16k)
        if name in spec["full_features"]:
            result[f"{key}.features"] = feats.numpy()
        result[f"{key}.emb"] = emb.numpy()
        result[f"{key}.codes"] = codes.numpy()
        result[f"{key}.s_ref"] = s_ref.detach().numpy()
        result[f"{key}.vq2emb"] = back.numpy()
        if name in spec["emotion"]:
            key = f"{name}.emo"
            torch.manual_seed(SEED)
            draws.clear()
            audio, _ = IndexTTS2._load_and_cut_audio(holder, path, 15, sr=16000)
            feats, mask = features(audio, key)
            emb = IndexTTS2.get_emb(holder, feats, mask)
            result[f"{key}.draws"] = np.array(draws)
            result[f"{key}.after"] = torch.rand(3).numpy()
            result[f"{key}.audio_sha256"] = sha(audio)
            result[f"{key}.emb"] = emb.numpy()
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
