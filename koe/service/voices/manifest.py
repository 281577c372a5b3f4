"""A voice's manifest: the files a voice folder or archive holds, and `voice.json`'s fields checked.

Everything a voice carries (name, texts, numbers) is checked here before anything is written, for a
voice being added, a folder koe wrote (every field required) and an archive being imported (only
the fields present): a wrong type, an over-long text or a value out of range is `InvalidRequest`
naming the field, never a half-written voice.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from koe.service.errors import InvalidRequest
from koe.service.names import check_name
from koe.service.storage import VoiceRow
from koe.text.checks import text_problem

REFERENCE = "reference.wav"
TRANSCRIPT = "transcript.txt"
VOICE_JSON = "voice.json"
FORMAT = 1  # voice.json's format version; a newer one is refused, not guessed at
SOURCES = ("clip", "design", "import")
MAX_STORED_SECONDS = 3600.0  # sanity bound on a stored duration_s
SAMPLE_RATES = (1000, 768_000)  # sanity bounds on a stored sample_rate
MAX_LANGUAGE_CHARS = 64
MAX_VERSION_CHARS = 64
MAX_REFERENCE_BYTES = 256 * 1024 * 1024
MAX_MANIFEST_BYTES = 256 * 1024


@dataclass(frozen=True)
class VoiceLimits:
    """The longest texts a voice may carry, in characters (settings.server.max_*_chars)."""

    transcript_chars: int = 2000
    description_chars: int = 1000
    language_chars: int = MAX_LANGUAGE_CHARS


def parse_manifest(data: bytes) -> Any:
    """voice.json's bytes parsed as JSON (UTF-8, at most MAX_MANIFEST_BYTES); `InvalidRequest` if they are not."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise InvalidRequest(f"{VOICE_JSON} is over {MAX_MANIFEST_BYTES // 1024} KiB")
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise InvalidRequest(f"{VOICE_JSON} is not UTF-8 ({e.reason} at byte {e.start})") from e
    except (ValueError, RecursionError) as e:
        raise InvalidRequest(f"{VOICE_JSON} is not valid JSON ({e})") from e


def check_manifest(meta: Any, limits: VoiceLimits, *, complete: bool) -> dict[str, Any]:
    """The fields of a voice.json, each checked for its type, length and allowed values.

    `complete` (a folder koe wrote) requires every field; otherwise (an archive) absent fields are
    fine and only those present are checked. Unknown keys are ignored (newer koe versions may add
    some; `format` says when a change is not compatible). Raises `InvalidRequest` naming the field.
    """
    if not isinstance(meta, dict):
        raise InvalidRequest(f"{VOICE_JSON} must hold a JSON object, not {_kind(meta)}")

    def present(key: str) -> bool:
        if meta.get(key) is not None:
            return True
        if complete and key in ("format", "name", "created_at", "source", "duration_s", "sample_rate"):
            raise InvalidRequest(f"{VOICE_JSON} has no {key!r}", param=key)
        return False

    out: dict[str, Any] = {}
    if present("format"):
        fmt = meta["format"]
        if not _is_int(fmt) or fmt < 1:
            raise InvalidRequest(f"{VOICE_JSON}: 'format' must be a positive whole number, not {_shown(fmt)}", param="format")
        if fmt > FORMAT:
            raise InvalidRequest(f"{VOICE_JSON} has format {fmt}, made by a newer koe (this one reads format {FORMAT})", hint="upgrade koe", param="format")
    if present("koe_version"):
        check_text(meta["koe_version"], f"{VOICE_JSON}: 'koe_version'", "koe_version", MAX_VERSION_CHARS, one_line=True)
    if present("name"):
        if not isinstance(meta["name"], str):
            raise InvalidRequest(f"{VOICE_JSON}: 'name' must be text, not {_kind(meta['name'])}", param="name")
        out["name"] = check_name(meta["name"], "voice")
    if present("source"):
        if meta["source"] not in SOURCES:
            raise InvalidRequest(f"{VOICE_JSON}: 'source' must be one of {', '.join(SOURCES)}, not {_shown(meta['source'])}", param="source")
        out["source"] = meta["source"]
    for key, lo, hi in (("created_at", 0.0, 1e11), ("duration_s", 1e-3, MAX_STORED_SECONDS)):
        if present(key):
            v = meta[key]
            if not _is_number(v) or not lo <= v <= hi:
                raise InvalidRequest(f"{VOICE_JSON}: {key!r} must be a number from {lo:g} to {hi:g}, not {_shown(v)}", param=key)
            out[key] = float(v)
    if present("sample_rate"):
        v = meta["sample_rate"]
        if not _is_int(v) or not SAMPLE_RATES[0] <= v <= SAMPLE_RATES[1]:
            raise InvalidRequest(
                f"{VOICE_JSON}: 'sample_rate' must be a whole number of Hz from {SAMPLE_RATES[0]} to {SAMPLE_RATES[1]}, not {_shown(v)}", param="sample_rate"
            )
        out["sample_rate"] = v
    for key, what, limit, one_line in (
        ("ref_text", "'ref_text' (the transcript)", limits.transcript_chars, False),
        ("description", "'description'", limits.description_chars, False),
        ("language", "'language'", limits.language_chars, True),
    ):
        if key in meta:
            out[key] = check_text(meta[key], f"{VOICE_JSON}: {what}", key, limit, one_line=one_line)
    return out


def check_row(row: VoiceRow, limits: VoiceLimits) -> None:
    """Raise `InvalidRequest` when a voice's index row has a bad name or a field voice.json could not hold."""
    check_name(row.name, "voice")
    check_manifest({"format": FORMAT, **asdict(row)}, limits, complete=True)


def manifest_json(row: VoiceRow) -> dict[str, Any]:
    """voice.json's content for the voice `row` indexes (with the format and the koe that wrote it)."""
    from koe import __version__

    return {"format": FORMAT, "koe_version": __version__, **asdict(row)}


def check_text(value: Any, what: str, param: str, limit: int, *, one_line: bool = False) -> str | None:
    """`value` stripped (None when empty), if it is text within `limit` characters; else `InvalidRequest`."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest(f"{what} must be text, not {_kind(value)}", param=param)
    value = value.strip()
    if not value:
        return None
    if len(value) > limit:
        raise InvalidRequest(f"{what} is {len(value)} characters long; at most {limit} are allowed", param=param)
    problem = text_problem(value, what, controls=True)  # lone surrogates, control characters: as every entry point checks them
    if problem is not None:
        raise InvalidRequest(problem.message, param=param)
    if one_line and ("\n" in value or "\r" in value):
        raise InvalidRequest(f"{what} must be one line", param=param)
    return value


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _kind(v: Any) -> str:
    """What a JSON value is, in words, for an error message (never the value itself: it may be huge)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true/false"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "text"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, (list, tuple)):
        return "a list"
    return type(v).__name__


def _shown(v: Any) -> str:
    """A short rendering of a bad value (numbers and short text as they are, anything else by kind)."""
    if _is_number(v) and abs(v) < 1e15:
        return repr(v)
    if isinstance(v, str) and len(v) <= 40:
        return repr(v)
    return _kind(v)
