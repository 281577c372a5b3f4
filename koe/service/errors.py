"""The errors koe's service layer raises: a user-facing message plus an HTTP-like status.

The CLI prints `message` (and `hint`) on one line and exits non-zero; the server maps `status` to
the response code and `code` to OpenAI's error `type`/`code` fields.
"""

from __future__ import annotations


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
