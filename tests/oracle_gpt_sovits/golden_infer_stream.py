"""The `infer_stream` golden, upstream's side: `TTS.run(streaming_mode=True)` on koe's tiny v2 folder,
set up as golden_infer.py sets it up (its text stand-ins, its soundfile `torchaudio.load`, a fresh
prompt cache per case).

    <oracle python> tests/oracle_gpt_sovits/golden_infer_stream.py <folder> <out.npz>

Recorded per case: `<case>.sr`, `<case>.count` (the chunks `run` yielded), per chunk k
`<case>.<k>.int16` (sha256 of its int16 samples), `.length`, `.head` / `.tail` (its first and last
32 int16 samples), and for a chunk `audio_postprocess` made (not a fragment's silence, which `run`
yields itself) `.float`: sha256 of the float32 samples it turned into int16.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from golden_infer import record_floats, sha, upstream_tts


def main(folder: Path, out: Path) -> None:
    tts, tts_class = upstream_tts(folder)
    fresh_cache = dict(tts.prompt_cache)
    floats = record_floats(tts_class)
    result: dict[str, np.ndarray] = {"state_sha256": np.array((folder / "state_sha256.txt").read_text().split()[0])}
    cases = json.loads((folder / "cases.json").read_text(encoding="utf-8"))
    for name, case in cases.items():
        tts.prompt_cache = {**fresh_cache, "refer_spec": [], "aux_ref_audio_paths": []}
        lengths: list[int] = []
        run = tts.run({**case, "ref_audio_path": str(folder / "ref.wav"), "aux_ref_audio_paths": []})
        while True:
            before = len(floats)
            try:
                sr, audio = next(run)
            except StopIteration:
                break
            k = len(lengths)
            result[f"{name}.sr"] = np.array(sr)
            result[f"{name}.{k}.int16"] = sha(audio)
            result[f"{name}.{k}.length"] = np.array(len(audio))
            result[f"{name}.{k}.head"] = audio[:32].copy()
            result[f"{name}.{k}.tail"] = audio[-32:].copy()
            if len(floats) > before:  # audio_postprocess made this chunk
                result[f"{name}.{k}.float"] = floats[-1]
            lengths.append(len(audio))
        result[f"{name}.count"] = np.array(len(lengths))
        print(name, lengths, flush=True)
    np.savez(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]))
