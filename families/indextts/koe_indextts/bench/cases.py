"""IndexTTS's benchmark cases and their inputs, the same on both sides (koe's engine and upstream's
`IndexTTS.infer` / `IndexTTS2.infer`).

Case -> the text, and the release it runs (`VARIANTS`: en and zh on 1.5, en2 and zh2 on 2, en25 and
zh25 on 2.5, which also take the text's language: `LANGUAGES`, upstream's `lang`). Every
case is one clone request: the text in the voice of a 5 s clip (the same 22.05 kHz WAV on both
sides), upstream's generation defaults (3 beams sampling their candidates, top-k 30, top-p 0.8,
repetition penalty 10; releases 2 and 2.5 at temperature 0.8, with the clip's own emotion) except
`max_mel_tokens`, which is `--codes` on both sides: random weights seldom end a search, so the cap
is what a request makes (the `codes` column says how many each run made, stop code included when
one was drawn; the same on both sides, as the codes' hashes check). Every text fits in one segment
(upstream's default 120 text tokens). Stdlib only: upstream's worker imports this file by path.
"""

from __future__ import annotations

EN = "The weather is lovely today, so we will take a long walk in the park after lunch."
ZH = "今天天气很好，午饭以后我们一起去公园散步吧。"
CASES = {"en": EN, "zh": ZH, "en2": EN, "zh2": ZH, "en25": EN, "zh25": ZH}
VARIANTS = {"en": "IndexTTS-1.5", "zh": "IndexTTS-1.5", "en2": "IndexTTS-2", "zh2": "IndexTTS-2", "en25": "IndexTTS-2.5", "zh25": "IndexTTS-2.5"}
LANGUAGES = {"en25": "en", "zh25": "zh"}  # 2.5's cases: the request's language, upstream's lang
DEFAULT_CASES = ("en", "zh", "en2", "zh2")  # 2.5's cases run when asked for (--case en25): one more 6.5 GB model
REF_SECONDS, REF_RATE = 5.0, 22050
SAMPLE_RATES = {"IndexTTS-1.5": 24000, "IndexTTS-2": 22050, "IndexTTS-2.5": 22050}
SAMPLE_RATE = SAMPLE_RATES["IndexTTS-1.5"]
SEGMENT_TOKENS = 120  # upstream's default max_text_tokens_per_segment
PARTS = ("text_s", "reference_s", "search_s", "latent_s", "vocoder_s")  # 1.5: what adds up to a request (other_s is the rest)
PARTS_2 = ("text_s", "reference_s", "search_s", "latent_s", "s2mel_s", "vocoder_s")  # 2
REFERENCE_PARTS_2 = ("w2v_s", "codec_s", "mel_s", "campplus_s")  # 2: parts of reference_s, shown apart
PARTS_25 = (
    "text_s",
    "reference_s",
    "search_s",
    "s2mel_s",
    "vocoder_s",
)  # 2.5: no latent pass (s2mel_s: the codec's decode, the length regulator, flow matching)
REFERENCE_PARTS_25 = ("w2v_s", "mel_s", "campplus_s")  # 2.5: parts of reference_s (no codec in the reference)


def parts_of(variant: str) -> tuple[str, ...]:
    return {"IndexTTS-2": PARTS_2, "IndexTTS-2.5": PARTS_25}.get(variant, PARTS)


def reference_parts_of(variant: str) -> tuple[str, ...]:
    """The parts of reference_s shown apart (none for 1.5)."""
    return {"IndexTTS-2": REFERENCE_PARTS_2, "IndexTTS-2.5": REFERENCE_PARTS_25}.get(variant, ())


def request(cmd: dict) -> tuple[str, str, int, int]:
    """A `run` command's (text, reference WAV, max_mel_tokens, seed)."""
    return CASES[cmd["case"]], cmd["reference"], int(cmd["codes"]), int(cmd.get("seed", 0))


def language(cmd: dict) -> str:
    """A 2.5 case's language (upstream's `lang`)."""
    return LANGUAGES[cmd["case"]]


def codes_sha1(segments: list[list[int]]) -> str:
    """SHA-1 of every segment's codes as the searches returned them, in order."""
    import hashlib
    import json

    return hashlib.sha1(json.dumps(segments).encode()).hexdigest()


def result(wire, total_s: float, wave, parts: dict, codes: int, segments: int, codes_sha1: str, variant: str = "IndexTTS-1.5", **extra) -> dict:
    """One request's numbers, both sides alike. `wave`: BigVGAN's float output of every segment,
    joined (what the hashes compare; the request's audio is it at 16-bit scale, clamped). `parts`:
    the seconds of text_s (normalising, tokens, segments), reference_s (1.5: the clip's log-mel, the
    GPT's conditioning latents and the vocoder's speaker embedding; 2: the clip read at 22.05 and
    16 kHz, its w2v-BERT features, semantic codes, 22.05 kHz mel, CAM++ style and prompt condition,
    the emotion clip's features, the GPT's conditioning latents and emotion vector), search_s (the
    beam-sampled code search: its prompt and every step), latent_s (the GPT's pass over the kept
    codes), s2mel_s (2: the latent's projection, the codes' semantic embedding, the length regulator
    and flow matching) and vocoder_s (BigVGAN; 1.5's without its speaker encoder); for release 2 also
    w2v_s, codec_s, mel_s and campplus_s, parts of reference_s; `codes`: what the searches returned;
    other_s is the rest."""
    audio_s = len(wave) / SAMPLE_RATES[variant]
    adding = parts_of(variant)
    return {
        "total_s": total_s,
        "audio_s": audio_s,
        "rtf": total_s / max(audio_s, 1e-9),
        **parts,
        "codes": codes,
        "ms_per_code": 1e3 * parts["search_s"] / max(codes, 1),
        "other_s": total_s - sum(parts[k] for k in adding),
        "segments": segments,
        "wave_sha1": wire.wave_sha1(wave),
        "codes_sha1": codes_sha1,
        "audio_samples": len(wave),
        "peak_rss": wire.peak_rss(),
        **extra,
    }
