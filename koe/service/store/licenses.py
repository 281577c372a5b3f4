"""Model licences the user accepted, recorded once in the model store (torch-free).

A release whose licence `needs_acceptance` (`koe.engines.licenses.License`) is pulled only after
the user accepted that licence: `koe models pull` asks on a terminal (`--accept-license` for
scripts), the Python API takes `accept_license=True`; without either the pull stops before any
byte is downloaded (`LicenseNotAccepted`). The acceptance is recorded in the store's folder
(`models/.accepted-licenses.json`, one entry per licence id: when, and which pull accepted it), so
a later pull of a model under the same licence does not ask again. A file that is missing,
unreadable, malformed or hostile counts as no acceptance: the user is asked again, never crashed on.
"""

from __future__ import annotations

import json
import logging
import math
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from koe.service.errors import LicenseNotAccepted
from koe.service.fsio import atomic_write_bytes

if TYPE_CHECKING:
    from koe.engines.licenses import License
    from koe.engines.spec import ReleasedModel

log = logging.getLogger(__name__)

ACCEPTED_FILE = ".accepted-licenses.json"  # in the store's folder (a hidden name: never a model's, `check_name`)
_MAX_BYTES = 1 << 20  # a record of acceptances is a few hundred bytes each
_MAX_TEXT = 1000  # characters kept of a recorded string


@dataclass(frozen=True)
class Acceptance:
    """A licence the user accepted: its id, when (Unix seconds), what accepted it ("pull of ID") and
    the licence's URL then."""

    license: str
    accepted_at: float
    by: str = ""
    url: str = ""

    def to_dict(self) -> dict:
        return {"accepted_at": self.accepted_at, "by": self.by, "url": self.url}


def _text(value: object) -> str:
    return value[:_MAX_TEXT] if isinstance(value, str) else ""


class AcceptedLicenses:
    """The licences accepted in one model store (`root`: its folder): `get`, `accept`, `all`."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.path = Path(root) / ACCEPTED_FILE

    def all(self) -> dict[str, Acceptance]:
        """Every well-formed acceptance on record, by licence id; {} for a file that is not there or
        cannot be read as one (not a regular file, too big, not JSON, another shape), with a warning."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return {}
        except OSError as e:
            log.warning("cannot read %s (%s): no licence counts as accepted", self.path, e.strerror)
            return {}
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_BYTES:
            log.warning("%s is not a small regular file: no licence counts as accepted", self.path)
            return {}
        try:
            with open(self.path, "rb") as f:
                data = json.loads(f.read(_MAX_BYTES + 1))
        except (OSError, ValueError, RecursionError) as e:
            log.warning("%s is unreadable (%s): no licence counts as accepted", self.path, type(e).__name__)
            return {}
        entries = data.get("accepted") if isinstance(data, dict) else None
        if not isinstance(entries, dict):
            return {}
        out = {}
        for key, entry in entries.items():
            at = entry.get("accepted_at") if isinstance(entry, dict) else None
            if not isinstance(key, str) or not key or isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at):
                continue  # a malformed entry is no acceptance
            out[key] = Acceptance(key[:_MAX_TEXT], float(at), _text(entry.get("by")), _text(entry.get("url")))
        return out

    def get(self, license: License | None) -> Acceptance | None:
        """The acceptance on record of `license` (by its id), or None."""
        return self.all().get(license.id) if license is not None else None

    def accept(self, license: License, by: str = "") -> Acceptance:
        """Record that the user accepted `license` (an atomic rewrite of the file; the other entries kept)."""
        entries = self.all()
        entries[license.id] = Acceptance(license.id, time.time(), by[:_MAX_TEXT], license.url)
        body = {"accepted": {k: a.to_dict() for k, a in entries.items()}}
        atomic_write_bytes(self.path, (json.dumps(body, indent=2, sort_keys=True) + "\n").encode())
        return entries[license.id]


def license_data(license: License | None, book: AcceptedLicenses | None = None) -> dict | None:
    """A model's licence as JSON (`License.to_dict`), plus `accepted_at` (Unix seconds, or None) where
    it needs acceptance and the store's acceptances (`book`) are given; None when none is declared."""
    if license is None:
        return None
    data = license.to_dict()
    if license.needs_acceptance and book is not None:
        found = book.get(license)
        data["accepted_at"] = found.accepted_at if found else None
    return data


def license_question(license: License, release: ReleasedModel) -> str:
    """What a pull shows before asking: the release, its licence, where to read it, its key terms."""
    lines = [f"{release.ref} is released under {license.title}, which you must accept to use it."]
    if license.where():
        lines.append(f"Read it: {license.where()}")
    if license.summary:
        lines.append(f"Key terms: {license.summary}")
    return "\n".join(lines)


def accept_release_license(
    book: AcceptedLicenses,
    release: ReleasedModel,
    *,
    accept: bool = False,
    ask: Callable[[License, ReleasedModel], bool] | None = None,
    hint: str | None = None,
) -> Acceptance | None:
    """Before a pull of `release`: None when its licence needs no acceptance; the acceptance on record,
    or the one `accept=True` or a yes from `ask(license, release)` records now. Else
    `LicenseNotAccepted` (nothing downloaded yet), with `hint` (default: the CLI flag and the
    Python argument) saying how to accept it."""
    license = release.license
    if license is None or not license.needs_acceptance:
        return None
    found = book.get(license)
    if found is not None:
        return found
    if accept or (ask is not None and ask(license, release)):
        return book.accept(license, f"pull of {release.ref}")
    where = license.where()
    raise LicenseNotAccepted(
        f"{release.ref} is released under {license.title}, which must be accepted before koe downloads it"
        + (f" (read it: {where})" if where else "")
        + "; nothing was downloaded",
        hint=hint or f"`koe models pull {release.ref} --accept-license` accepts it (once for this store); Python: accept_license=True",
    )


def origin_license(origin: str | None) -> License | None:
    """The licence of the release a store model was pulled from (its origin's first source matches
    a release a family lists); None when it was imported, or its release declares none."""
    from koe.engines import registry

    first = (origin or "").split(" + ")[0]
    if not first.startswith("hub:"):
        return None
    key = first[4:].rpartition("@")[0].lower()
    for s in registry.specs():
        for r in s.released:
            if r.license is not None and r.sources[0].key.lower() == key:
                return r.license
    return None
