"""Fish Speech's benchmark cases and their inputs, the same on both sides (koe's engine and upstream's
server engine, `TTSInferenceEngine.inference(ServeTTSRequest(...))`).

Case -> the text and its reference clips. "clone": an English sentence in the voice of a 5 s
44.1 kHz clip with its transcript; "own": the same sentence in the model's own voice (no
reference); "dialogue" (run when named): two speakers' turns, each with a clip of its own (the
44.1 kHz one and a 3 s 24 kHz one, resampled on both sides), long enough for several batches of
upstream's default chunk length (200 bytes, 5 turns), each batch's codes fed back into the next
prompt. Every request: upstream's server defaults (temperature 0.8, top-p 0.8, top-k 30) but
`max_new_tokens`, which is `--frames` on both sides: random weights seldom draw <|im_end|>, so the
cap is what a batch makes (its last frame dropped, as upstream's `y[1:, prompt_length:-1]`).
Stdlib only: upstream's worker imports this file by path.
"""

from __future__ import annotations

TEXT = "The weather is lovely today, so we will take a long walk in the park after lunch."
DIALOGUE = "".join(
    f"<|speaker:{i % 2}|>{line}"
    for i, line in enumerate(
        (
            "Good morning, did you sleep well?",
            "Not really, the neighbours were loud again.",
            "That is a shame. Shall we get some coffee first?",
            "Yes please, a large one, with a little milk.",
            "I will order two, then we can talk about the plan.",
            "Sounds good to me.",
            "And after that, a walk in the park by the river?",
        )
    )
)
CLIPS = {  # name -> (seconds, sample rate, transcript)
    "voice44k": (5.0, 44100, "This is the transcript of the reference clip used for cloning."),
    "voice24k": (3.0, 24000, "Another voice, for the second speaker."),
}
CASES = {"clone": (TEXT, ("voice44k",)), "own": (TEXT, ()), "dialogue": (DIALOGUE, ("voice44k", "voice24k"))}
DEFAULT_CASES = ("clone", "own")
SAMPLE_RATE = 44100
FRAME_RATE = SAMPLE_RATE / 2048  # codec frames a second
PARTS = ("reference_s", "prefill_s", "steps_s", "codec_s")  # what adds up to a request (other_s is the rest: prompts, tokenizing, sampling's glue)


def request(cmd: dict) -> tuple[str, list[tuple[str, str]], int, int]:
    """A `run` command's (text, [(clip path, transcript), ...], max_new_tokens, seed)."""
    text, _ = CASES[cmd["case"]]
    return text, [(path, transcript) for path, transcript in cmd["references"]], int(cmd["frames"]), int(cmd.get("seed", 0))


def codes_sha1(references: list[list[list[int]]], batches: list[list[list[int]]]) -> str:
    """SHA-1 of the reference clips' codes and every batch's codes (codebooks x frames), in order."""
    import hashlib
    import json

    return hashlib.sha1(json.dumps({"references": references, "batches": batches}).encode()).hexdigest()


def result(wire, total_s: float, wave, parts: dict, steps: int, batches: list[list[list[int]]], references: list[list[list[int]]], **extra) -> dict:
    """One request's numbers, both sides alike. `wave`: the request's float32 audio (every batch
    decoded on its own, joined: what the hashes compare). `parts`: the seconds of reference_s (each
    clip read, mono, resampled to 44.1 kHz and encoded by the codec), prefill_s (each batch's first
    step: its prompt through the slow stack, the first frame sampled), steps_s (every later step: one
    frame through the slow stack, the draws, the fast stack's codebooks) and codec_s (each batch's
    codes decoded); `steps`: the decode steps after the prefills (ms_per_frame is steps_s per step);
    `batches`: each batch's codes (codebooks x frames); other_s is the rest."""
    audio_s = len(wave) / SAMPLE_RATE
    return {
        "total_s": total_s,
        "audio_s": audio_s,
        "rtf": total_s / max(audio_s, 1e-9),
        **parts,
        "lm_s": parts["prefill_s"] + parts["steps_s"],
        "frames": sum(len(b[0]) if b else 0 for b in batches),
        "steps": steps,
        "ms_per_frame": 1e3 * parts["steps_s"] / max(steps, 1),
        "other_s": total_s - sum(parts[k] for k in PARTS),
        "batches": len(batches),
        "wave_sha1": wire.wave_sha1(wave),
        "codes_sha1": codes_sha1(references, batches),
        "audio_samples": len(wave),
        "peak_rss": wire.peak_rss(),
        **extra,
    }
