"""Names of voices and models: safe as one folder name under KOE_HOME, never a path."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from koe.service.errors import InvalidRequest

MAX_NAME_LENGTH = 64
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_RESERVED = {"con", "prn", "aux", "nul"}  # names Windows cannot hold as folders


def check_name(name: str, what: str = "voice") -> str:
    """Return `name` if it is a valid voice/model name, else raise `InvalidRequest` saying why.

    Valid: 1-64 characters of letters, digits, `.`, `_` and `-`, starting with a letter or digit,
    not ending with `.`. So `../x`, `a/b`, `.hidden` and the empty name are refused.
    """
    if not isinstance(name, str) or not name.strip():
        raise InvalidRequest(f"{what} name is empty", param="name")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidRequest(f"{what} name is too long ({len(name)} characters; at most {MAX_NAME_LENGTH})", param="name")
    if "/" in name or "\\" in name or ".." in name:
        raise InvalidRequest(f"invalid {what} name {name!r}: it must not contain '/', '\\' or '..'", param="name")
    if not _NAME.fullmatch(name) or name.endswith("."):
        raise InvalidRequest(
            f"invalid {what} name {name!r}: use letters, digits, '.', '_' and '-', starting with a letter or digit",
            param="name",
        )
    if name.split(".")[0].lower() in _RESERVED:
        raise InvalidRequest(f"invalid {what} name {name!r}: reserved on some systems", param="name")
    return name


def slug(text: str, fallback: str = "model") -> str:
    """A valid name made from arbitrary text (a folder name, a hub id's last part)."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    s = re.sub(r"\.{2,}", ".", s)[:MAX_NAME_LENGTH].rstrip(".")
    try:
        return check_name(s)
    except InvalidRequest:
        return fallback


def close_matches(word: str, known: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The entries of `known` that `word` is likely a typo of, best first (case ignored; `word` itself never)."""
    by_lower: dict[str, str] = {}
    for k in known:
        if k != word:
            by_lower.setdefault(k.lower(), k)
    return [by_lower[m] for m in difflib.get_close_matches(word.lower(), list(by_lower), n=n, cutoff=cutoff)]


def did_you_mean(close: list[str]) -> str | None:
    """The hint for a name not found: "did you mean A, B?" (None when nothing is close)."""
    return f"did you mean {', '.join(close)}?" if close else None
