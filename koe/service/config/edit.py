"""Editing `koe.toml`: set, read and unset one dotted setting, checked against the settings model.

`koe config set/get/unset` and `koe models default` are shells over this (the server or a future
settings page could reuse it). A value is validated by the section's own pydantic model (type,
range, choices, the list validators of `server.allowed_hosts`...) before anything is written; the
file is edited with tomlkit, so its comments, order and formatting stay as the user wrote them,
and written atomically under a lock on KOE_HOME (two `koe config set` at once both land).

Keys are `SECTION.NAME` (`server.port`, `models.default`); the family options table takes one more
part (`synthesis.options.temperature`). `home` is not a file setting (KOE_HOME or --home).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from pydantic import BaseModel, SecretStr, ValidationError
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import Comment, Table, Whitespace

from koe.service.config.settings import ENV_DELIMITER, ENV_PREFIX, SECRET_KEY, TOML_NAME, Settings, load_settings, resolve_home
from koe.service.errors import ConfigError, InvalidRequest, NotFound
from koe.service.fsio import atomic_write_text, path_lock
from koe.service.names import close_matches, did_you_mean

SECTIONS = ("server", "models", "synthesis")
OPTIONS_KEY = "synthesis.options"  # a table of family options: its entries are keys of their own


@dataclass(frozen=True)
class Key:
    """A dotted setting split into its parts: `section.name` or `synthesis.options.OPTION`."""

    section: str
    name: str
    option: str | None = None

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.name}" + (f".{self.option}" if self.option else "")

    @property
    def env_name(self) -> str:
        return ENV_PREFIX + f"{self.section}.{self.name}".upper().replace(".", ENV_DELIMITER)


@dataclass(frozen=True)
class Change:
    """What an edit did: the key, the value now in koe.toml (None when removed), and the file.

    `overridden_by` names the environment variable that wins over the file, when one is set, so
    the caller can say that the change has no effect until it is unset."""

    key: str
    value: Any
    path: Path
    changed: bool
    overridden_by: str | None = None


@dataclass(frozen=True)
class Effective:
    """One setting's effective value (for display: a token masked), where it came from, its env var."""

    key: str
    value: Any
    display: str
    source: str
    env_name: str


def setting_keys() -> list[str]:
    """Every dotted key koe.toml may set, in declaration order."""
    return [f"{section}.{name}" for section in SECTIONS for name in _section_model(section).model_fields]


def parse_key(key: str) -> Key:
    """`key` checked against the settings model; an unknown one is `NotFound` naming close matches."""
    raw = (key or "").strip()
    if raw.lower() == "home":
        raise InvalidRequest("'home' is not a koe.toml setting", hint="set KOE_HOME or pass `koe --home DIR`", param="key")
    parts = raw.split(".")
    if len(parts) == 3 and ".".join(parts[:2]) == OPTIONS_KEY and parts[2]:
        return Key("synthesis", "options", parts[2])
    if len(parts) == 2 and parts[0] in SECTIONS and parts[1] in _section_model(parts[0]).model_fields:
        return Key(parts[0], parts[1])
    known = setting_keys()
    close = close_matches(raw, known)
    names = close_matches(parts[-1], [k.split(".")[1] for k in known])  # `prot` -> server.port
    close += [k for k in known if k.split(".")[1] in names and k not in close][: max(0, 4 - len(close))]
    hint = did_you_mean(close) or "`koe config show` lists every setting"
    raise NotFound(f"unknown setting {raw!r}", hint=hint, param="key")


def parse_value(key: Key, text: str) -> Any:
    """`text` (as typed on a command line) as the value koe.toml should hold for `key`, validated.

    Numbers, booleans (true/false, yes/no, on/off, 1/0), choices, ranges and the server's own rules
    (a token a client can send, a host to listen on, well-formed hosts and origins) are checked by
    the section's model, the one `koe serve` validates with; lists take `a,b` or a JSON list;
    `synthesis.options` takes a TOML inline table or a JSON object; one option
    (`synthesis.options.NAME`) takes a JSON value, else the text.
    Returns None for a value that means "not set" (e.g. `models.device auto`).
    """
    if key.option is not None:
        return _option_value(key, text)
    model = _section_model(key.section)
    raw: Any = text
    if key.dotted == OPTIONS_KEY:
        raw = _table_value(key, text)
    probe = model()
    try:
        setattr(probe, key.name, raw)  # the sections validate on assignment: types, ranges, choices, validators
    except ValidationError as e:
        problem = "; ".join(err["msg"] for err in e.errors())
        field = model.model_fields[key.name]
        shown = "'********'" if key.dotted == SECRET_KEY else repr(text)
        raise InvalidRequest(f"{key.dotted}={shown}: {problem}", hint=field.description, param="value") from e
    return _to_toml(getattr(probe, key.name))


def set_value(home: str | os.PathLike | None, key: str, text: str, environ: dict[str, str] | None = None) -> Change:
    """Validate `text` for `key` and write it to KOE_HOME's koe.toml (created if absent).

    A value that means "not set" (`auto`, empty for optional settings) removes the key instead."""
    parsed = parse_key(key)
    value = parse_value(parsed, text)
    if value is None:
        return unset_value(home, key, environ)
    path = _toml_path(home, environ)
    with _editing(path) as edit:
        table = _table_for(edit.doc, parsed, create=True, path=path)
        name = parsed.option or parsed.name
        before = table.get(name)
        changed = before is None or _plain(before) != value
        if changed:
            _put(table, name, value)
    return Change(parsed.dotted, value, path, changed, _env_override(parsed, environ))


def unset_value(home: str | os.PathLike | None, key: str, environ: dict[str, str] | None = None) -> Change:
    """Remove `key` from koe.toml (it falls back to the default); `changed` is False when it was not there.

    A table left empty (no keys, no comments) is removed with it."""
    parsed = parse_key(key)
    path = _toml_path(home, environ)
    if not path.is_file():
        return Change(parsed.dotted, None, path, False, _env_override(parsed, environ))
    with _editing(path) as edit:
        table = _table_for(edit.doc, parsed, create=False, path=path)
        name = parsed.option or parsed.name
        changed = table is not None and name in table
        if changed:
            del table[name]
            if _drop_if_empty(edit.doc, parsed):
                edit.trim_end = True  # the blank line tomlkit put before the removed table goes with it
    return Change(parsed.dotted, None, path, changed, _env_override(parsed, environ))


def get_value(home: str | os.PathLike | None, key: str, flags: dict | None = None, environ: dict[str, str] | None = None) -> Effective:
    """The effective value of `key` (defaults < koe.toml < env < flags) and its source."""
    parsed = parse_key(key)
    settings = load_settings(home, flags, environ)
    if parsed.option is not None:
        options = settings.synthesis.options
        source = settings.source_of(OPTIONS_KEY)
        if parsed.option not in options:
            raise NotFound(f"{parsed.dotted} is not set", hint=f"set it with `koe config set {parsed.dotted} VALUE`", param="key")
        value = options[parsed.option]
        return Effective(parsed.dotted, value, _display(value), source, parsed.env_name)
    for row in settings.items():
        if row.key == parsed.dotted:
            display = _display(row.value) if isinstance(row.value, (list, dict)) else row.display()  # token masked
            return Effective(row.key, row.value, display, row.source, row.env_name)
    raise NotFound(f"unknown setting {parsed.dotted!r}", param="key")  # parse_key already checked; kept for safety


# -- the file ------------------------------------------------------------------------------------


def _toml_path(home: str | os.PathLike | None, environ: dict[str, str] | None) -> Path:
    root, _ = resolve_home(home, environ)
    return root / TOML_NAME


class _editing:
    """Read koe.toml as a tomlkit document (`.doc`), let the block edit it, write it back atomically.

    The KOE_HOME folder is locked for the whole read-modify-write, so concurrent edits serialize.
    The file keeps its permission bits (a koe.toml holding a token is often 0600)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.trim_end = False  # end the file with one newline (after a table at the end was removed)

    def __enter__(self) -> _editing:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"cannot create {self.path.parent}: {e.strerror}") from e
        self._lock = path_lock(self.path.parent)
        self._lock.__enter__()
        try:
            self.text = self.path.read_text(encoding="utf-8") if self.path.is_file() else ""
            self.mode = self.path.stat().st_mode & 0o777 if self.path.is_file() else None
            self.doc: tomlkit.TOMLDocument = tomlkit.parse(self.text)
        except (TOMLKitError, UnicodeDecodeError) as e:
            self._lock.__exit__(None, None, None)
            raise ConfigError(f"{self.path}: not valid TOML ({e})", hint="fix the file by hand, or move it aside") from e
        except OSError as e:
            self._lock.__exit__(None, None, None)
            raise ConfigError(f"{self.path}: cannot be read ({e.strerror})") from e
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                text = tomlkit.dumps(self.doc)
                if self.trim_end and text.strip():
                    text = text.rstrip("\n") + "\n"
                elif self.trim_end:
                    text = ""
                if text != self.text:
                    try:
                        atomic_write_text(self.path, text)
                        if self.mode is not None:
                            os.chmod(self.path, self.mode)
                    except OSError as e:
                        raise ConfigError(f"cannot write {self.path}: {e.strerror}") from e
        finally:
            self._lock.__exit__(None, None, None)


def _table_for(doc: tomlkit.TOMLDocument, key: Key, *, create: bool, path: Path) -> Any:
    """The table in `doc` that holds `key` (the section, or the options table), made when `create`."""
    section = doc.get(key.section)
    if section is None:
        if not create:
            return None
        section = tomlkit.table()
        doc[key.section] = section
        section = doc[key.section]
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: {key.section!r} must be a [table]", hint="fix the file by hand")
    if key.option is None:
        return section
    options = section.get("options")
    if options is None:
        if not create:
            return None
        section["options"] = tomlkit.inline_table()
        options = section["options"]
    if not isinstance(options, dict):
        raise ConfigError(f"{path}: {OPTIONS_KEY!r} must be a table", hint="fix the file by hand")
    return options


def _put(table: Any, name: str, value: Any) -> None:
    """Set `name` in `table`: in place when it is there; a new key goes after the table's last key,
    not after the comments that end the table (those introduce the next table, as people write them)."""
    container = getattr(table, "value", None)
    body = getattr(container, "body", None)
    if name in table or not body or body[-1][0] is not None:
        table[name] = value
        return
    last = next((i for i in range(len(body) - 1, -1, -1) if body[i][0] is not None), None)
    if last is None or not hasattr(container, "_insert_at"):
        table[name] = value
        return
    container._insert_at(last + 1, name, value)  # tomlkit's own insertion at a place (the one `Table.add` lacks; 0.12 to 0.15)


def _drop_if_empty(doc: tomlkit.TOMLDocument, key: Key) -> bool:
    """Remove the options table, then the section, when the edit left it with no keys and no comments."""
    section = doc.get(key.section)
    if key.option is not None and isinstance(section, dict) and isinstance(section.get("options"), dict) and not section["options"]:
        del section["options"]
    if isinstance(section, Table) and not section and not _commented(doc, key.section):
        del doc[key.section]
        return True
    return False


def _commented(doc: tomlkit.TOMLDocument, section: str) -> bool:
    """True when table `section` holds a comment or a comment leads into it (which tomlkit keeps at
    the end of whatever comes before): the user wrote something about it, so it stays."""
    if any(isinstance(item, Comment) for _, item in doc[section].value.body):
        return True
    before = None
    for k, item in doc.body:
        if k is not None and k.key == section:
            break
        before = item
    items = [before] if not isinstance(before, Table) else [i for _, i in before.value.body]
    meaningful = [i for i in items if i is not None and not isinstance(i, Whitespace)]
    return bool(meaningful) and isinstance(meaningful[-1], Comment)


def _env_override(key: Key, environ: dict[str, str] | None) -> str | None:
    env = os.environ if environ is None else environ
    name = key.env_name
    return next((k for k in env if k.upper() == name), None)


# -- values --------------------------------------------------------------------------------------


def _section_model(section: str) -> type[BaseModel]:
    return Settings.model_fields[section].annotation  # type: ignore[return-value]


def _table_value(key: Key, text: str) -> dict[str, Any]:
    """`{a = 1}` (TOML inline table) or `{"a": 1}` (JSON) as a dict."""
    try:
        value = json.loads(text)
    except ValueError:
        try:
            value = tomlkit.parse(f"value = {text}")["value"]
        except TOMLKitError:
            value = None
    if not isinstance(value, dict):
        raise InvalidRequest(f"{key.dotted}={text!r}: give a table, e.g. '{{NAME = VALUE, ...}}' with a model's options", param="value")
    return _plain(value)


def _option_value(key: Key, text: str) -> Any:
    """One family option: JSON where it is one (numbers, true, false), else the text (as `--opt`)."""
    try:
        value = json.loads(text)
    except ValueError:
        value = text
    if value is None:
        return None
    if not isinstance(value, (str, int, float, bool, list, dict)):
        raise InvalidRequest(f"{key.dotted}={text!r}: not a value koe.toml can hold", param="value")
    return value


def _to_toml(value: Any) -> Any:
    """A validated setting as a plain TOML value (a token's text; None stays None: not set)."""
    if isinstance(value, SecretStr):
        return value.get_secret_value() or None
    if isinstance(value, Path):
        return str(value)
    return value


def _plain(value: Any) -> Any:
    """A tomlkit item (or container) as plain Python."""
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if unwrap is not None else value


def _display(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value
