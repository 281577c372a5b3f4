"""Settings: defaults < koe.toml < KOE_<SECTION>__<KEY> env < flags, with each value's source."""

from pathlib import Path

import pytest

from koe.service.config.settings import Settings, load_settings, resolve_home
from koe.service.errors import ConfigError


def write_toml(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "koe.toml").write_text(text)


def test_defaults(tmp_path):
    s = load_settings(tmp_path, environ={})
    assert s.server.host == "127.0.0.1" and s.server.port == 8000 and s.server.token is None
    assert s.models.resident_limit == 1 and s.models.device is None
    assert s.synthesis.format == "wav" and s.synthesis.speed == 1.0
    assert s.source_of("server.port") == "default"
    assert s.db_path == tmp_path.resolve() / "koe.db" and s.voices_dir == tmp_path.resolve() / "voices"


def test_precedence_toml_env_flag(tmp_path):
    write_toml(tmp_path, '[server]\nport = 7000\nhost = "0.0.0.0"\nqueue_size = 3\n[synthesis]\nspeed = 1.5\n')
    env = {"KOE_SERVER__PORT": "7100", "KOE_SYNTHESIS__SPEED": "2.0", "KOE_MODELS__DEVICE": "cpu"}
    s = load_settings(tmp_path, flags={"synthesis": {"speed": 3.0, "seed": None}}, environ=env)
    assert s.server.host == "0.0.0.0" and s.source_of("server.host") == "koe.toml"
    assert s.server.queue_size == 3
    assert s.server.port == 7100 and s.source_of("server.port") == "env KOE_SERVER__PORT"
    assert s.models.device == "cpu" and s.source_of("models.device") == "env KOE_MODELS__DEVICE"
    assert s.synthesis.speed == 3.0 and s.source_of("synthesis.speed") == "flag"
    assert s.synthesis.seed is None and s.source_of("synthesis.seed") == "default"  # None flags fall through


def test_items_cover_every_setting_and_mask_the_token(tmp_path):
    s = load_settings(tmp_path, environ={"KOE_SERVER__TOKEN": "sekrit"})
    rows = {r.key: r for r in s.items()}
    assert rows["server.token"].display() == "********" and "sekrit" not in repr(s)
    assert rows["server.port"].env_name == "KOE_SERVER__PORT"
    for section in ("server", "models", "synthesis"):
        for name in type(getattr(s, section)).model_fields:
            assert f"{section}.{name}" in rows
    assert rows["home"].source == "flag --home"


def test_home_from_env_and_default(tmp_path, monkeypatch):
    assert resolve_home(None, {"KOE_HOME": str(tmp_path)}) == (tmp_path.resolve(), "env KOE_HOME")
    monkeypatch.setattr("koe.service.config.settings.default_home", lambda: tmp_path / "platform")
    assert resolve_home(None, {}) == (tmp_path / "platform", "default")
    s = load_settings(environ={"KOE_HOME": str(tmp_path)})
    assert s.home == tmp_path.resolve() and s.source_of("home") == "env KOE_HOME"


def test_process_environment_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("KOE_MODELS__RESIDENT_LIMIT", "3")
    s = load_settings(tmp_path)
    assert s.models.resident_limit == 3 and s.source_of("models.resident_limit") == "env KOE_MODELS__RESIDENT_LIMIT"


@pytest.mark.parametrize(
    ("toml", "env", "match"),
    [
        ("[server]\nport = 99999\n", {}, r"server\.port=99999 \(from koe\.toml\)"),
        ("", {"KOE_SYNTHESIS__SPEED": "9"}, r"synthesis\.speed='9' \(from env KOE_SYNTHESIS__SPEED\)"),
        ("[server]\nprot = 1\n", {}, r"unknown setting 'server\.prot' \(from koe\.toml\)"),
        ("[synthesis]\nformat = 'ogg3'\n", {}, r"synthesis\.format"),
        ("[server\n", {}, "not valid TOML"),
        ("[models]\nprecision = 'int2'\n", {}, r"models\.precision='int2' \(from koe\.toml\)"),
    ],
)
def test_bad_values_name_key_and_source(tmp_path, toml, env, match):
    write_toml(tmp_path, toml)
    with pytest.raises(ConfigError, match=match):
        load_settings(tmp_path, environ=env)


def test_empty_strings_mean_unset(tmp_path):
    s = load_settings(tmp_path, environ={"KOE_MODELS__DEVICE": "", "KOE_MODELS__DTYPE": "auto", "KOE_MODELS__PRECISION": ""})
    assert s.models.device is None and s.models.dtype is None and s.models.precision is None


def test_precision_is_a_setting(tmp_path):
    s = load_settings(tmp_path, environ={"KOE_MODELS__PRECISION": "int8"})
    assert s.models.precision == "int8" and s.source_of("models.precision") == "env KOE_MODELS__PRECISION"


def test_settings_is_pydantic_settings():
    from pydantic_settings import BaseSettings

    assert issubclass(Settings, BaseSettings)


def test_other_koe_variables_are_not_settings(tmp_path):
    s = load_settings(tmp_path, environ={"KOE_ORACLE_PYTHON": "/x/python", "KOE_DEBUG": "1"})  # used by the Makefile / tools
    assert s.server.port == 8000
    with pytest.raises(ConfigError, match="unknown setting 'server.foo' \\(from env KOE_SERVER__FOO\\)"):
        load_settings(tmp_path, environ={"KOE_SERVER__FOO": "1"})


def test_every_number_has_a_range_and_out_of_range_is_refused(tmp_path):
    """No numeric setting is open-ended: a huge timeout, queue or limit is a settings error naming
    the key, not an overflow deep in the server."""
    import annotated_types

    from koe.service.config.settings import ModelsSettings, ServerSettings, SynthesisSettings

    sections = {"server": ServerSettings, "models": ModelsSettings, "synthesis": SynthesisSettings}
    for section, model in sections.items():
        for key, field in model.model_fields.items():
            kinds = {t for t in (int, float) if field.annotation in (t, t | None)}
            if not kinds:
                continue
            bounds = [m for m in field.metadata if isinstance(m, (annotated_types.Gt, annotated_types.Ge, annotated_types.Lt, annotated_types.Le))]
            lower = [m for m in bounds if isinstance(m, (annotated_types.Gt, annotated_types.Ge))]
            upper = [m for m in bounds if isinstance(m, (annotated_types.Lt, annotated_types.Le))]
            assert lower and upper, f"{section}.{key} has no {'upper' if lower else 'lower'} bound"
            limit = upper[0].le if isinstance(upper[0], annotated_types.Le) else upper[0].lt
            too_big = limit * 10 + 1
            with pytest.raises(ConfigError, match=rf"{section}\.{key}="):
                load_settings(tmp_path, environ={f"KOE_{section.upper()}__{key.upper()}": str(too_big)})
