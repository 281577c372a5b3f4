"""The errors koe's service layer raises: a user-facing message plus an HTTP-like status.

The CLI prints `message` (and `hint`) on one line and exits non-zero; the server maps `status` to
the response code and `code` to OpenAI's error `type`/`code` fields.
"""

from __future__ import annotations

import errno


class KoeError(Exception):
    """Base of every error koe reports to a user. `str(err)` is the message (with its hint)."""

    status: int = 400
    code: str = "invalid_request"

    def __init__(self, message: str, *, hint: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.param = param  # the request field at fault, when there is one

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class InvalidRequest(KoeError):
    """A request that cannot be served as asked (empty text, bad format, speed out of range, ...)."""

    status = 400
    code = "invalid_request"


class NotFound(KoeError):
    """A named thing (voice, model, file) that does not exist; the message lists what does."""

    status = 404
    code = "not_found"


class AlreadyExists(KoeError):
    """Creating something whose name is taken (pass overwrite to replace it)."""

    status = 409
    code = "already_exists"


class LicenseNotAccepted(KoeError):
    """A pull of a model whose licence must be accepted first, which was not (`koe.service.store.licenses`):
    nothing was downloaded; the hint says how to accept it."""

    status = 403
    code = "license_not_accepted"


class PayloadTooLarge(KoeError):
    """Input over a configured limit (characters, upload bytes, reference seconds)."""

    status = 413
    code = "too_large"


class Busy(KoeError):
    """The queue for a model is full; retry after `retry_after` seconds."""

    status = 429
    code = "busy"

    def __init__(self, message: str, *, retry_after: float = 1.0, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.retry_after = retry_after


class RequestCancelled(KoeError):
    """The client went away or cancelled; nothing more will be produced."""

    status = 499
    code = "cancelled"


class ConfigError(KoeError):
    """A setting (koe.toml, environment or flag) that is malformed; the message names it and its source."""

    status = 500
    code = "config_error"


class Unavailable(KoeError):
    """Something needed is out of reach: the model hub while offline, a feature this build lacks."""

    status = 503
    code = "unavailable"


class StorageError(KoeError):
    """KOE_HOME cannot be read or written, or holds something damaged."""

    status = 500
    code = "storage_error"


class ModelFailed(Unavailable):
    """An installed model whose files cannot be loaded (corrupt weights or config, out of memory, ...).

    `model` is its name, `reason` what went wrong (paths relative to the model folder). The failure
    is remembered by the model cache; `retry_after` is the number of seconds until it tries again.
    """

    code = "model_failed"

    def __init__(self, model: str, reason: str, *, retry_after: float = 0.0, hint: str | None = None) -> None:
        super().__init__(f"model {model!r} failed to load: {reason}", hint=hint, param="model")
        self.model = model
        self.reason = reason
        self.retry_after = retry_after


class InsufficientStorage(KoeError):
    """The disk (or quota) under KOE_HOME is full: nothing was half-written; free space and retry."""

    status = 507
    code = "insufficient_storage"


_FULL_ERRNOS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_FULL_WORDS = ("no space left on device", "disk quota exceeded", "database or disk is full", "os error 28)", "os error 122)")


def is_disk_full(error: BaseException) -> bool:
    """Whether `error` (or an error it was raised from) means a full disk or quota.

    Recognizes `OSError` ENOSPC / EDQUOT, SQLite's SQLITE_FULL ("database or disk is full") and
    safetensors' `SafetensorError` wrapping an I/O error 28 / 122, without importing either library.
    """
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in _FULL_ERRNOS:
            return True
        if getattr(e, "sqlite_errorname", None) == "SQLITE_FULL":
            return True
        if not isinstance(e, KoeError) and any(w in str(e).lower() for w in _FULL_WORDS):
            return True
        e = e.__cause__ or e.__context__
    return False


def disk_full_error(what: str) -> InsufficientStorage:
    """The 507 error for a write that failed on a full disk: `what` says what could not be written."""
    return InsufficientStorage(f"{what}: the disk is full", hint="free some space under KOE_HOME and try again")
