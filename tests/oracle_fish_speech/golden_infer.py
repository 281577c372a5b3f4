"""The `infer` golden, upstream's side: whole requests through upstream's server engine
(`TTSInferenceEngine.inference` with a `ServeTTSRequest`), in float32, as its API server and web
page run them.

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_fish_speech/golden_infer.py <folder> <out.npz>
`folder` holds what tests/engines/fish_speech/golden_infer.py `write_inputs` wrote. The transformer
is what upstream's `launch_thread_safe_queue(model, "cpu", torch.float32)` builds (`init_model` and
`generate_long`; float32, which upstream's command lines do not offer), run in turn (`InTurn`); the codec
is `load_codec_model` in float32 with the tiny sizes (golden_codec.load_codec). Each job is one
`inference(ServeTTSRequest(text, references=[ServeReferenceAudio(wav bytes, transcript)], seed,
settings))`.

Recorded per job: `<job>.batch<i>.codes` (each batch's codes, as the engine decodes them),
`<job>.batches` (their count), `<job>.audio_sha256`, `<job>.audio_shape`, `<job>.audio_head` and
`<job>.audio_tail` (256 samples of the final float32 audio); and `<job>.reference<i>.codes`
for each reference clip. `lm.state_sha256`, `codec.state_sha256`, `tokenizer.state_sha256` from state_sha256.txt.
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
from fish_speech.inference_engine import TTSInferenceEngine  # noqa: E402
from fish_speech.models.text2semantic.inference import WrappedGenerateResponse, generate_long, init_model  # noqa: E402
from fish_speech.utils.schema import ServeReferenceAudio, ServeTTSRequest  # noqa: E402
from golden_codec import load_codec  # noqa: E402

EDGE = 256


def sha(a: np.ndarray) -> np.ndarray:
    return np.array(hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest())


class InTurn:
    """What `launch_thread_safe_queue`'s worker does with a request (`init_model`, its caches, then
    `generate_long` with the request's arguments), run in the caller's thread to the end before
    the engine decodes a batch. Upstream's worker thread generates batch i + 1 while the engine
    decodes batch i, and a request of several batches then gives other codes from one run to the
    next (seen here: the same seed, 23 or 39 frames in its second batch); one at a time, every run
    gives what `generate_long` gives alone, as its command line runs it."""

    def __init__(self, folder: Path) -> None:
        self.model, self.decode_one_token = init_model(str(folder), "cpu", torch.float32, compile=False)
        self.model.setup_caches(max_batch_size=1, max_seq_len=self.model.config.max_seq_len, dtype=torch.float32)

    def put(self, item) -> None:
        for chunk in generate_long(model=self.model, decode_one_token=self.decode_one_token, **item.request):
            item.response_queue.put(WrappedGenerateResponse(status="success", response=chunk))


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    result: dict[str, np.ndarray] = {}
    for line in (folder / "state_sha256.txt").read_text().split("\n"):
        if line.strip():
            name, digest = line.split()
            result[f"{name}.state_sha256"] = np.array(digest)
    model = folder  # the tiny S2 folder, with the clips and jobs beside its files
    codec = load_codec(folder, torch.float32)
    engine = TTSInferenceEngine(llama_queue=InTurn(model), decoder_model=codec, precision=torch.float32, compile=False)
    decoded: list[torch.Tensor] = []
    original = engine.get_audio_segment

    def recorded(response):
        decoded.append(response.codes.clone())
        return original(response)

    engine.get_audio_segment = recorded
    encoded: list[torch.Tensor] = []
    encode = engine.encode_reference

    def encode_recorded(**kwargs):
        codes = encode(**kwargs)
        encoded.append(codes.clone())
        return codes

    engine.encode_reference = encode_recorded
    for job in json.loads((folder / "jobs.json").read_text(encoding="utf-8")):
        name = job["name"]
        references = [
            ServeReferenceAudio(audio=(folder / f"{ref}.wav").read_bytes(), text=(folder / f"{ref}.lab").read_text(encoding="utf-8"))
            for ref in job["references"]
        ]
        request = ServeTTSRequest(text=job["text"], references=references, seed=job["seed"], **job["options"])
        decoded.clear()
        encoded.clear()
        results = list(engine.inference(request))
        final = [r for r in results if r.code == "final"]
        if len(final) != 1:
            raise SystemExit(f"{name}: upstream gave no audio: {[(r.code, r.error) for r in results]}")
        audio = np.asarray(final[0].audio[1], dtype=np.float32)
        for i, codes in enumerate(decoded):
            result[f"{name}.batch{i}.codes"] = codes.numpy()
        result[f"{name}.batches"] = np.array(len(decoded))
        for i, codes in enumerate(encoded):
            result[f"{name}.reference{i}.codes"] = codes.numpy()
        result[f"{name}.audio_sha256"] = sha(audio)
        result[f"{name}.audio_shape"] = np.array(audio.shape)
        result[f"{name}.audio_head"] = audio[:EDGE]
        result[f"{name}.audio_tail"] = audio[-EDGE:]
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
