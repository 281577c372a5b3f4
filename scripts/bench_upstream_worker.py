"""The upstream side of the benchmark: qwen-tts 0.1.1 in its own virtualenv and process.

Started by `koe.bench.runner` with upstream's Python (`KOE_ORACLE_PYTHON` or `.oracle/bin/python`)
as a script. It lives outside the `koe` package because it imports qwen-tts, which koe never does;
it imports `koe/bench/wire.py` and the family's `koe/engines/qwen3_tts/bench/cases.py` by path (`bench_side.py`; stdlib, numpy and torch only) and nothing else of koe. It drives upstream's
public wrapper (`Qwen3TTSModel.generate_*`), timing phases by wrapping upstream's own methods:
`model.generate` (decode), the talker's first forward (prefill), `code_predictor.generate`
(code predictor) and `speech_tokenizer.decode` (codec). End of speech is disabled by passing
`eos_token_id` = a suppressed id, so every run decodes exactly `frames` frames.
"""

from __future__ import annotations

import functools
import hashlib
import time
from pathlib import Path

import torch
from bench_side import family_cases, on_path, serve, wire

on_path("tests/oracle/stubs", last=True)  # torchaudio, only if the venv has none (qwen-tts imports it for its 25 Hz tokenizer)
cases = family_cases("qwen3_tts")


class UpstreamWorker:
    def __init__(self) -> None:
        self.tts = None
        self.kind = None

    def load(self, cmd: dict) -> dict:
        import json

        wire.set_threads(cmd["threads"])
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[cmd.get("precision") or "fp32"]
        started = time.perf_counter()
        from qwen_tts import Qwen3TTSModel

        self.tts = Qwen3TTSModel.from_pretrained(cmd["model"], device_map="cpu", dtype=dtype)
        load_s = time.perf_counter() - started
        self.kind = json.loads((Path(cmd["model"]) / "config.json").read_text())["tts_model_type"]
        self.vocab = self.tts.model.config.talker_config.vocab_size
        return {"load_s": load_s, "peak_rss": wire.peak_rss(), "rss": wire.current_rss(), "precision": str(dtype).removeprefix("torch.")}

    def run(self, cmd: dict) -> dict:
        case, frames, seed = cmd["case"], int(cmd["frames"]), int(cmd.get("seed", 0))
        if case == "streaming":
            return {"case": case, "unsupported": "qwen-tts 0.1.1 has no streaming API"}
        return wire.run_case(cmd, lambda: self._run(case, frames, seed))

    def _run(self, case: str, frames: int, seed: int) -> dict:
        tts = self.tts
        model = tts.model
        batch = cases.CASES[case][1]
        result: dict = {"case": case, "batch": batch}
        texts = cases.BATCH_TEXTS[:batch]
        kwargs = dict(max_new_tokens=frames + 1, eos_token_id=self.vocab - 1)  # a suppressed id: never drawn
        ref_frames = 0
        if case.startswith("clone"):
            xvec = case == "clone_xvector"
            t = time.perf_counter()
            prompt = tts.create_voice_clone_prompt(ref_audio=wire.reference_clip(), ref_text=None if xvec else wire.REF_TEXT, x_vector_only_mode=xvec)
            result["prompt_s"] = time.perf_counter() - t
            if prompt[0].ref_code is not None:
                ref_frames = int(prompt[0].ref_code.shape[0])
            call = lambda: tts.generate_voice_clone(text=texts[0] if batch == 1 else texts, language=cases.LANGUAGE, voice_clone_prompt=prompt, **kwargs)  # noqa: E731
        elif case == "voice_design":
            call = lambda: tts.generate_voice_design(text=texts[0], instruct=cases.INSTRUCT, language=cases.LANGUAGE, **kwargs)  # noqa: E731
        else:
            one = batch == 1
            call = lambda: tts.generate_custom_voice(  # noqa: E731
                text=texts[0] if one else texts,
                speaker=cases.SPEAKER if one else [cases.SPEAKER] * batch,
                language=cases.LANGUAGE if one else [cases.LANGUAGE] * batch,
                **kwargs,
            )
        phases = cases.Phases()
        marks: dict = {}
        talker = model.talker
        generate, forward, predictor_generate, decode = model.generate, talker.forward, talker.code_predictor.generate, model.speech_tokenizer.decode

        @functools.wraps(generate)
        def timed_generate(*args, **kwargs):
            phases.decode_start = time.perf_counter()
            out = generate(*args, **kwargs)
            marks["decode_end"] = time.perf_counter()
            marks["codes"] = out[0]
            return out

        @functools.wraps(forward)  # transformers inspects the forward's signature
        def timed_forward(*args, **kwargs):
            out = forward(*args, **kwargs)
            phases.mark_talker_forward()
            return out

        @functools.wraps(decode)
        def timed_decode(*args, **kwargs):
            t = time.perf_counter()
            out = decode(*args, **kwargs)
            marks["codec_s"] = marks.get("codec_s", 0.0) + time.perf_counter() - t
            return out

        model.generate, talker.forward, model.speech_tokenizer.decode = timed_generate, timed_forward, timed_decode
        talker.code_predictor.generate = phases.timed(predictor_generate)
        torch.manual_seed(seed)
        try:
            wavs, _ = call()
        finally:
            del model.generate, talker.forward, talker.code_predictor.generate, model.speech_tokenizer.decode
        codes = marks["codes"]
        made = int(codes[0].shape[0])
        decoded_s = batch * (made + ref_frames) / cases.FRAME_RATE
        result.update(phases.result(marks["decode_end"], made))
        result.update(
            {
                "frames": made,
                "codec_s": marks["codec_s"],
                "codec_s_per_audio_s": marks["codec_s"] / max(decoded_s, 1e-9),
                "audio_samples": int(sum(len(w) for w in wavs)),
                "frames_per_s": batch * made / (marks["decode_end"] - phases.decode_start),
                "codes_sha1": hashlib.sha1(torch.stack([c.cpu() for c in codes]).numpy().tobytes()).hexdigest(),
                "peak_rss": wire.peak_rss(),
            }
        )
        return result


if __name__ == "__main__":
    serve(UpstreamWorker())
