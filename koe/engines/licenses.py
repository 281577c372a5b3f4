"""The licence a model is released under, as its family declares it (torch-free).

A family's spec names a `License` for each release it can pull (`ReleasedModel.license`) and for
each model folder it describes (`ModelDescription.license`). koe shows it (`koe models info`,
`GET /v1/models`, the web page) and, for a licence with `needs_acceptance`, asks the user to
accept it once before the first pull of a model under it (`koe.service.store.licenses`).

`id` is the licence's SPDX identifier where it has one ("Apache-2.0", "CC-BY-NC-4.0"), else a
`LicenseRef-...` of the family's making ("LicenseRef-bilibili-Model-Use-License"); a new version of
a licence is a new id, so an acceptance of the old one does not carry over to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+-]{0,99}")  # SPDX's idstring (letters, digits, '.', '-'), '+' for "or later"


@dataclass(frozen=True)
class License:
    """A model licence: `id` (SPDX, or `LicenseRef-...`), `name` for people, `url` where it can be
    read and/or `file`, the licence's file in the model folder ("LICENSE"); `needs_acceptance`: the
    user must accept it before koe pulls a model under it; `summary`: its key terms in a sentence or
    two, shown with the question."""

    id: str
    name: str = ""
    url: str = ""
    file: str = ""
    needs_acceptance: bool = False
    summary: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not _ID.fullmatch(self.id):
            raise ValueError(f"licence id {self.id!r} is no SPDX identifier or LicenseRef-... (letters, digits, '.', '-', '+')")
        if self.needs_acceptance and not (self.url or self.file):
            raise ValueError(f"licence {self.id} needs acceptance: say where it can be read (url or file)")

    @property
    def title(self) -> str:
        """Its name and id, as `Apache License 2.0 (Apache-2.0)`; the id alone where it has no other name."""
        return f"{self.name} ({self.id})" if self.name and self.name != self.id else self.id

    def where(self) -> str:
        """Where to read it: its URL, and/or its file in the model folder ("" when neither is known)."""
        parts = [self.url] if self.url else []
        if self.file:
            parts.append(f"{self.file} in the model folder")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """As JSON: id, name, url, file, needs_acceptance, summary."""
        return {"id": self.id, "name": self.name, "url": self.url, "file": self.file, "needs_acceptance": self.needs_acceptance, "summary": self.summary}


# -- the licences of the built-in families' releases ------------------------------------------------------
APACHE_2_0 = License("Apache-2.0", "Apache License 2.0", "https://www.apache.org/licenses/LICENSE-2.0")
MIT = License("MIT", "MIT License", "https://opensource.org/license/mit")
CC_BY_NC_4_0 = License(
    "CC-BY-NC-4.0",
    "Creative Commons Attribution-NonCommercial 4.0 International",
    "https://creativecommons.org/licenses/by-nc/4.0/",
    summary="non-commercial use only, with credit to the authors",
)
