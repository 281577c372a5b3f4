"""koe's settings: one typed object from defaults < `KOE_HOME/koe.toml` < `KOE_<SECTION>__<KEY>` env < flags.

`load_settings()` reads each layer with pydantic-settings' own sources, merges them, validates the
result once, and remembers where every value came from (`Settings.source_of("server.port")`), which
is what `koe config show` prints.
"""

from __future__ import annotations

import ipaddress
import json
import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from koe.runtime.precision import ALIASES
from koe.service.errors import ConfigError

ENV_PREFIX = "KOE_"
ENV_DELIMITER = "__"
TOML_NAME = "koe.toml"
FORMATS = ("wav", "flac", "mp3", "opus", "aac", "m4a", "pcm")
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
SECRET_KEY = "server.token"  # never shown: masked in `config show` and in errors
MAX_UPLOAD_BYTES = 1024**3  # an upload is held in memory while it is checked


def default_home() -> Path:
    """The platform's user data folder for koe (e.g. `~/.local/share/koe` on Linux)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("koe", appauthor=False))


# -- addresses: what the server settings name, and what its guards read from requests ------------------
def split_host(value: str) -> tuple[str, int | None] | None:
    """(lower-case host without brackets or trailing dot, port or None) of a Host header value;
    None when it is malformed (a path, user info, a bad port)."""
    if not value or any(c in value for c in "/\\@?# \t"):
        return None
    try:
        parts = urlsplit("//" + value)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    return (host.rstrip("."), port) if host else None


def origin_of(value: str) -> tuple[str, str, int | None] | None:
    """(scheme, host, port) of an Origin value (`scheme://host[:port]`), the port filled in from the
    scheme's default; None when it is malformed or opaque (`null`)."""
    try:
        parts = urlsplit(value.strip())
        scheme, host, port = parts.scheme.lower(), parts.hostname, parts.port
    except ValueError:
        return None
    if not scheme or not host or parts.path not in ("", "/") or parts.query or parts.username is not None:
        return None
    return scheme, host.rstrip("."), port if port is not None else DEFAULT_PORTS.get(scheme)


def is_ip_literal(host: str) -> bool:
    """True for an IPv4 or IPv6 address (a Host no DNS-rebinding page can send: it needs a name)."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ServerSettings(_Section):
    """The HTTP server: where it listens, who may call it, and the limits on what it accepts."""

    host: str = Field("127.0.0.1", description="address to bind; anything but loopback requires a token")
    port: int = Field(8000, ge=1, le=65535, description="TCP port")
    token: SecretStr | None = Field(None, description="Bearer token clients must send (required off loopback)")
    max_input_chars: int = Field(4096, ge=1, le=1_000_000, description="longest text one request may speak; at most 1,000,000")
    max_upload_bytes: int = Field(
        20 * 1024 * 1024, ge=1024, le=MAX_UPLOAD_BYTES, description="largest uploaded reference clip or voice archive; 1 KiB to 1 GiB"
    )
    max_reference_seconds: float = Field(30.0, gt=0, le=3600, description="longest reference clip a voice may use; at most 3600")
    max_source_seconds: float = Field(120.0, gt=0, le=3600, description="longest speech a voice conversion may take; at most 3600")
    queue_size: int = Field(16, ge=1, le=100_000, description="requests waiting per loaded model before 429; at most 100,000")
    max_batch_size: int = Field(8, ge=1, le=1024, description="most requests batched into one generation; at most 1024")
    batch_window_ms: float = Field(50.0, ge=0, le=10_000, description="how long a one-shot request waits for others to batch with it")
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Host names the server answers besides loopback names and its bound address (DNS-rebinding guard); '*' = any",
    )
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="web origins (scheme://host[:port]) besides the server's own that may make state-changing requests; '*' = any",
    )
    header_timeout_s: float = Field(10.0, gt=0, le=3600, description="seconds a client has to send its request line and headers; at most 3600")
    body_timeout_s: float = Field(30.0, gt=0, le=3600, description="longest pause while a client sends a request body; at most 3600 s")
    max_stream_s: float = Field(
        600.0, gt=0, le=86_400, description="longest a streamed-text WebSocket may last, from its start message to its last audio; at most 86,400 s"
    )
    max_connections: int = Field(128, ge=1, le=100_000, description="open connections at once; more are refused with 503; at most 100,000")
    shutdown_grace_s: float = Field(
        10.0, ge=0, le=3600, description="on SIGTERM, seconds in-flight requests get to finish before they are cancelled; at most 3600"
    )
    max_instructions_chars: int = Field(
        4096, ge=1, le=1_000_000, description="longest instructions (style / voice description) a request may give; at most 1,000,000"
    )
    max_transcript_chars: int = Field(2000, ge=1, le=1_000_000, description="longest transcript of a reference clip; at most 1,000,000")
    max_description_chars: int = Field(1000, ge=1, le=1_000_000, description="longest description of a library voice; at most 1,000,000")
    web_page: bool = Field(True, description="serve the web page at / (speak, clone, design voices and stream from a browser)")
    pull_models: bool = Field(
        False, description="a request may name a release koe lists that is not here yet, and the server downloads it (off: it never downloads)"
    )

    @field_validator("allowed_hosts", "allowed_origins", mode="before")
    @classmethod
    def _comma_list(cls, v: Any) -> Any:
        """A string (an env variable or flag) is a JSON list or a comma-separated list."""
        if not isinstance(v, str):
            return v
        if v.lstrip().startswith("["):
            try:
                return json.loads(v)
            except json.JSONDecodeError as e:
                raise ValueError(f"not a JSON list ({e})") from e
        return [part.strip() for part in v.split(",") if part.strip()]

    # What `koe serve` would refuse is refused here, so `koe config set` refuses it too (one rule for both).
    @field_validator("host")
    @classmethod
    def _bindable(cls, v: str) -> str:
        parsed = None if v.startswith("[") else split_host(v)
        if not is_ip_literal(v) and (parsed is None or parsed[1] is not None):
            raise ValueError("not an address or a host name to listen on (e.g. 127.0.0.1, 0.0.0.0, ::1, localhost; the port is server.port)")
        return v

    @field_validator("token")
    @classmethod
    def _sendable(cls, v: SecretStr | None) -> SecretStr | None:
        """A token a client can send in `Authorization: Bearer TOKEN` (HTTP strips what surrounds a
        header value and forbids control characters in it)."""
        token = v.get_secret_value() if v is not None else ""
        if token != token.strip():
            raise ValueError("the token starts or ends with whitespace, which no client can send: remove the spaces or newlines around it")
        if any(ord(c) < 32 or ord(c) == 127 for c in token):
            raise ValueError("the token holds a control character (a tab, a newline...), which no client can send")
        return v

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, v: list[str]) -> list[str]:
        for entry in v:
            name = entry.strip()
            if name and name != "*" and not name.startswith(("*.", ".")) and split_host(name) is None:
                raise ValueError(f"{entry!r} is not a host name")
        return v

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, v: list[str]) -> list[str]:
        for entry in v:
            if entry.strip() != "*" and origin_of(entry) is None:
                raise ValueError(f"{entry!r} is not an origin (scheme://host[:port])")
        return v


class ModelsSettings(_Section):
    """Which model to use and how many stay loaded."""

    default: str | None = Field(None, description="model used when a request names none (store name, path or hub id)")
    download: bool = Field(True, description="download a hub id on first use when neither the store nor the Hugging Face cache has it (false: stay offline)")
    resident_limit: int = Field(1, ge=1, le=64, description="most models held in memory at once (least recently used is unloaded); at most 64")
    idle_unload_seconds: float = Field(900.0, ge=0, le=31_536_000, description="unload a model unused this long (0 = never); at most a year, 31,536,000")
    device: str | None = Field(None, description="cpu, cuda, cuda:1, mps; empty = best available")
    dtype: str | None = Field(None, description="float32, bfloat16, float16; empty = float32 on CPU, bfloat16 on CUDA")
    precision: Literal["fp32", "bf16", "int8", "int4"] | None = Field(
        None,
        description="opt-in speed mode that changes bits: bf16, int8 or int4 (CPU; each model lists the ones it runs); empty = dtype decides, fp32 = exact",
    )

    @field_validator("device", "dtype", "default", mode="before")
    @classmethod
    def _empty_is_none(cls, v: Any) -> Any:
        return None if isinstance(v, str) and v.strip().lower() in ("", "auto", "none") else v

    @field_validator("precision", mode="before")
    @classmethod
    def _precision_name(cls, v: Any) -> Any:
        """Empty is None; the names torch prints ("float32", "bfloat16") are the modes' (koe.runtime.precision)."""
        if not isinstance(v, str):
            return v
        name = v.strip().lower()
        return None if name in ("", "auto", "none") else ALIASES.get(name, name)


class SynthesisSettings(_Section):
    """Defaults for a request that leaves them out."""

    language: str = Field("auto", description="language of the text (auto, english, chinese, ...)")
    speaker: str | None = Field(None, description="preset speaker for CustomVoice models (empty = the model's first)")
    format: Literal["wav", "flac", "mp3", "opus", "aac", "m4a", "pcm"] = Field("wav", description="output format")
    speed: float = Field(1.0, ge=0.25, le=4.0, description="tempo change that keeps pitch")
    seed: int | None = Field(None, ge=0, lt=2**63, description="random seed (empty = a fresh one per request)")
    save_outputs: bool = Field(False, description="keep every output under KOE_HOME/outputs")
    max_new_tokens: int | None = Field(
        None, ge=1, le=1_000_000, description="default max_new_tokens, for models with that option (their length cap; at most 1,000,000); empty = model's"
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="family options every request starts from, where the model has them (a table {NAME = VALUE, ...}; `koe models info MODEL` lists a model's)",
    )

    @field_validator("speaker", mode="before")
    @classmethod
    def _empty_speaker(cls, v: Any) -> Any:
        return None if isinstance(v, str) and not v.strip() else v


class Settings(BaseSettings):
    """Everything koe can be configured with. Build it with `load_settings()`."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter=ENV_DELIMITER, extra="forbid")

    home: Path = Field(default_factory=default_home, description="KOE_HOME: models, voices, outputs, koe.db, koe.toml")
    server: ServerSettings = Field(default_factory=ServerSettings)
    models: ModelsSettings = Field(default_factory=ModelsSettings)
    synthesis: SynthesisSettings = Field(default_factory=SynthesisSettings)

    _sources: dict[str, str] = PrivateAttr(default_factory=dict)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # load_settings() merges the layers itself (to know each value's source) and passes the result in.
        return (init_settings,)

    # -- paths under KOE_HOME -----------------------------------------------------------------
    @property
    def toml_path(self) -> Path:
        return self.home / TOML_NAME

    @property
    def db_path(self) -> Path:
        return self.home / "koe.db"

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    @property
    def voices_dir(self) -> Path:
        return self.home / "voices"

    @property
    def outputs_dir(self) -> Path:
        return self.home / "outputs"

    # -- provenance ---------------------------------------------------------------------------
    def source_of(self, key: str) -> str:
        """Where the value of dotted `key` (e.g. "server.port") came from: default, koe.toml, env NAME or flag."""
        return self._sources.get(key, "default")

    def items(self) -> Iterator[SettingValue]:
        """Every leaf setting with its effective value and source, in declaration order (token masked)."""
        yield SettingValue("home", self.home, self.source_of("home"))
        for section in ("server", "models", "synthesis"):
            model: BaseModel = getattr(self, section)
            for name in type(model).model_fields:
                key = f"{section}.{name}"
                yield SettingValue(key, getattr(model, name), self.source_of(key))


@dataclass(frozen=True)
class SettingValue:
    """One effective setting for display: dotted key, value and where it came from."""

    key: str
    value: Any
    source: str

    @property
    def env_name(self) -> str:
        return ENV_PREFIX + self.key.upper().replace(".", ENV_DELIMITER)

    def display(self) -> str:
        if isinstance(self.value, SecretStr):
            return "********" if self.value.get_secret_value() else ""
        return "" if self.value is None else str(self.value)


# ---------------------------------------------------------------------------------------------
# loading


def resolve_home(home: str | os.PathLike | None = None, environ: Mapping[str, str] | None = None) -> tuple[Path, str]:
    """KOE_HOME and its source: the `home` flag, else `$KOE_HOME`, else the platform default."""
    env = os.environ if environ is None else environ
    if home:
        return Path(home).expanduser().resolve(), "flag --home"
    if env.get("KOE_HOME"):
        return Path(env["KOE_HOME"]).expanduser().resolve(), "env KOE_HOME"
    return default_home(), "default"


def read_toml(path: Path) -> dict[str, Any]:
    """The settings in a koe.toml (an empty dict when it does not exist)."""
    if not path.is_file():
        return {}
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from e
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e.strerror})") from e


def read_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`KOE_<SECTION>__<KEY>` variables as a nested dict (pydantic-settings' env source, KOE_HOME excluded)."""
    source = EnvSettingsSource(
        Settings,
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_DELIMITER,
        case_sensitive=False,
        env_parse_none_str="",
    )
    if environ is not None:
        source.env_vars = {k.lower(): v for k, v in environ.items()}
    try:
        data = dict(source())
    except SettingsError as e:
        raise ConfigError(f"environment: {e} ({e.__cause__})" if e.__cause__ else f"environment: {e}") from e
    data.pop("home", None)
    return data


def load_settings(
    home: str | os.PathLike | None = None,
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Effective settings: defaults < koe.toml < environment < `flags`.

    `flags` is a nested dict of what the command line set, e.g. `{"server": {"port": 9000}}`
    (None values are ignored, so unset options fall through). Raises `ConfigError` naming the bad
    key and the layer it came from.
    """
    root, home_source = resolve_home(home, environ)
    toml_path = root / TOML_NAME
    layers: list[tuple[str, dict[str, Any]]] = [
        (TOML_NAME, read_toml(toml_path)),
        ("env", read_env(environ)),
        ("flag", _drop_none(dict(flags or {}))),
    ]
    for label, data in layers:
        if "home" in data:
            raise ConfigError(f"{label}: 'home' cannot be set here; use KOE_HOME or --home")
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {"home": home_source}
    for label, data in layers:
        for key, value in _leaves(data):
            sources[key] = f"env {ENV_PREFIX}{key.upper().replace('.', ENV_DELIMITER)}" if label == "env" else label
            _set(merged, key, value)
    try:
        settings = Settings(home=root, **merged)
    except ValidationError as e:
        raise ConfigError(_describe(e, sources)) from e
    settings._sources = sources
    return settings


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            v = _drop_none(v)
            if v:
                out[k] = v
        elif v is not None:
            out[k] = v
    return out


def _leaves(d: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and key.count(".") == 0:
            yield from _leaves(v, key + ".")
        else:
            yield key, v


def _set(d: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    for p in parts[:-1]:
        d = d.setdefault(p, {})
        if not isinstance(d, dict):
            raise ConfigError(f"setting {p!r} must be a section (a [table] in koe.toml)")
    d[parts[-1]] = value


def _describe(e: ValidationError, sources: dict[str, str]) -> str:
    problems = []
    for err in e.errors():
        key = ".".join(str(p) for p in err["loc"])
        where = sources.get(key, "default")
        if err["type"] == "extra_forbidden":
            problems.append(f"unknown setting {key!r} (from {where})")
        else:
            shown = "'********'" if key == SECRET_KEY else repr(err.get("input"))
            problems.append(f"{key}={shown} (from {where}): {err['msg']}")
    return "invalid settings: " + "; ".join(problems)
