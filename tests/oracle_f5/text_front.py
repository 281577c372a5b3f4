"""Oracle: upstream F5-TTS's text front end, case by case, in one launch.

Job (every key optional):
  "texts": [str, ...]                      -> info["tokens"]: convert_char_to_pinyin(texts)
  "chunks": [[text, max_chars], ...]       -> info["chunks"]: chunk_text(text, max_chars) each
  "ref_endings": [str, ...]                -> info["ref_endings"]: the ref_text preprocess_ref_audio_text returns
  "vocabs": [{"path": p, "tokens": [[str, ...], ...]}, ...]
                                           -> info["vocabs"]: [{"size", "map", "ids"}] via get_tokenizer(p, "custom")
                                              and list_str_to_idx per token list
  "processes": [{"samples", "sr", "ref_text", "gen_text", "speed", "fix_duration", "cross_fade"}, ...]
      -> info["processes"]: [{"max_chars", "batches", "calls": [{"cond_samples", "duration", "tokens", "ids"}]}]
         through the real infer_process -> chunk_text -> infer_batch_process, with a stand-in model whose
         `sample` records what it is asked (the reference's samples, the token lists, the duration) and a
         stand-in vocoder; ids are list_str_to_idx over the packaged vocab (infer/examples/vocab.txt).
  "batch_processes": [{"samples", "ref_text", "batches", "speed", "fix_duration", "cross_fade"}, ...]
      -> info["batch_processes"]: [{"calls": [...]}], infer_batch_process on given batches (24 kHz reference).
info["packaged_vocab"]: the packaged vocab.txt's path.
"""

from __future__ import annotations

import tempfile
from importlib.resources import files

import numpy as np
import soundfile as sf
import torch
from common import one_worker_pool, read_job, use_soundfile_loader, write_results


class RecordingModel:
    """Stands in for CFM: records `sample`'s arguments, returns zeros of the asked length."""

    def __init__(self, vocab_map):
        self.vocab_map = vocab_map
        self.calls = []

    def sample(self, cond, text, duration, **kwargs):
        from f5_tts.model.utils import list_str_to_idx

        self.calls.append(
            {
                "cond_samples": int(cond.shape[-1]),
                "duration": duration,
                "type": type(duration).__name__,
                "tokens": text[0],
                "ids": list_str_to_idx(text, self.vocab_map)[0].tolist(),
            }
        )
        return torch.zeros(1, max(int(duration), 0), 100), None


class ZeroVocoder:
    def decode(self, mel):
        return torch.zeros(1, mel.shape[-1] * 256)


def tone(samples: int, sr: int) -> np.ndarray:
    t = np.arange(samples) / sr
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def main() -> None:
    job, out = read_job()
    tempfile.tempdir = str(out)
    use_soundfile_loader()
    one_worker_pool()
    from f5_tts.infer import utils_infer
    from f5_tts.model.utils import convert_char_to_pinyin, get_tokenizer, list_str_to_idx

    packaged = str(files("f5_tts").joinpath("infer/examples/vocab.txt"))
    packaged_map, _ = get_tokenizer(packaged, "custom")
    info: dict = {"packaged_vocab": packaged}

    info["tokens"] = convert_char_to_pinyin(job.get("texts", []))
    info["chunks"] = [utils_infer.chunk_text(text, max_chars=limit) for text, limit in job.get("chunks", [])]

    if job.get("ref_endings"):
        wav = out / "ref.wav"
        sf.write(str(wav), tone(24000, 24000), 24000, subtype="PCM_16")
        quiet = lambda *a, **k: None  # noqa: E731
        info["ref_endings"] = [utils_infer.preprocess_ref_audio_text(str(wav), t, show_info=quiet)[1] for t in job["ref_endings"]]

    info["vocabs"] = []
    for case in job.get("vocabs", []):
        vocab_map, size = get_tokenizer(case["path"], "custom")
        ids = [list_str_to_idx([tokens], vocab_map)[0].tolist() if tokens else [] for tokens in case["tokens"]]
        info["vocabs"].append({"size": size, "map": vocab_map, "ids": ids})

    original_chunk_text = utils_infer.chunk_text
    budgets = []

    def recording_chunk_text(text, max_chars=135):
        budgets.append(max_chars)
        return original_chunk_text(text, max_chars=max_chars)

    utils_infer.chunk_text = recording_chunk_text
    info["processes"] = []
    for i, case in enumerate(job.get("processes", [])):
        wav = out / f"process-{i}.wav"
        sf.write(str(wav), tone(case["samples"], case["sr"]), case["sr"], subtype="PCM_16")
        model = RecordingModel(packaged_map)
        batches = []
        original_batch_process = utils_infer.infer_batch_process

        def recording_batch_process(ref_audio, ref_text, gen_text_batches, *args, **kwargs):
            batches.extend(gen_text_batches)  # noqa: B023 (called within this case, as the next line)
            return original_batch_process(ref_audio, ref_text, gen_text_batches, *args, **kwargs)  # noqa: B023

        utils_infer.infer_batch_process = recording_batch_process
        try:
            utils_infer.infer_process(
                str(wav),
                case["ref_text"],
                case["gen_text"],
                model,
                ZeroVocoder(),
                mel_spec_type="vocos",
                show_info=lambda *a: None,
                progress=None,
                cross_fade_duration=case.get("cross_fade", 0.15),
                speed=case.get("speed", 1.0),
                fix_duration=case.get("fix_duration"),
                device="cpu",
            )
        finally:
            utils_infer.infer_batch_process = original_batch_process
        info["processes"].append({"max_chars": budgets[-1], "batches": batches, "calls": model.calls})
    utils_infer.chunk_text = original_chunk_text

    info["batch_processes"] = []
    for case in job.get("batch_processes", []):
        model = RecordingModel(packaged_map)
        audio = torch.from_numpy(tone(case["samples"], 24000))[None]
        next(
            utils_infer.infer_batch_process(
                (audio, 24000),
                case["ref_text"],
                case["batches"],
                model,
                ZeroVocoder(),
                mel_spec_type="vocos",
                progress=None,
                cross_fade_duration=case.get("cross_fade", 0.15),
                speed=case.get("speed", 1.0),
                fix_duration=case.get("fix_duration"),
                device="cpu",
            )
        )
        info["batch_processes"].append({"calls": model.calls})

    write_results(out, {}, info)


if __name__ == "__main__":
    main()
