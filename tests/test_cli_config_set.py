"""`koe config set/get/unset` and `koe models default`: validated against the settings model, written to
koe.toml with its comments and layout kept, atomically, and read back with each value's source."""

import json
import os
import stat
import threading

import pytest

from koe.service.config import edit as config_file
from koe.service.config.settings import load_settings
from koe.service.errors import ConfigError, InvalidRequest, NotFound

pytest_plugins = ["cli_fixtures"]  # cv_model, vd_model, base_model, home, koe

HAND_WRITTEN = """\
# my koe settings
[server]
port = 7000  # the port my proxy expects
host = "127.0.0.1"

# which model
[models]
resident_limit = 2
"""


def toml(home) -> str:
    return (home / "koe.toml").read_text()


def one_line_error(result, match: str, code: int = 2) -> None:
    assert result.exit_code == code, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in result.output, result.output
    assert match in result.stderr, result.stderr


def test_set_keeps_comments_and_layout_and_writes_typed_values(koe, home):
    home.mkdir()
    (home / "koe.toml").write_text(HAND_WRITTEN)
    koe("config", "set", "server.port", "8001")
    koe("config", "set", "synthesis.save_outputs", "yes")
    koe("config", "set", "server.allowed_hosts", "tts.lan, box.local")
    koe("config", "set", "synthesis.format", "mp3")
    text = toml(home)
    assert text.startswith('# my koe settings\n[server]\nport = 8001  # the port my proxy expects\nhost = "127.0.0.1"\n')
    assert "# which model\n[models]\nresident_limit = 2\n" in text
    assert 'allowed_hosts = ["tts.lan", "box.local"]' in text and "save_outputs = true" in text and 'format = "mp3"' in text
    s = load_settings(home, environ={})
    assert s.server.port == 8001 and s.source_of("server.port") == "koe.toml"
    assert s.synthesis.save_outputs is True and s.server.allowed_hosts == ["tts.lan", "box.local"] and s.synthesis.format == "mp3"


def test_set_creates_the_file_and_get_says_where_each_value_came_from(koe, home, monkeypatch):
    assert not (home / "koe.toml").exists()
    r = koe("config", "set", "server.queue_size", "4")
    assert "set server.queue_size = 4" in r.stderr and str(home / "koe.toml") in r.stderr.replace("\n", "")
    assert toml(home) == "[server]\nqueue_size = 4\n"
    r = koe("config", "get", "server.queue_size")
    assert r.stdout == "4\n" and "from koe.toml" in r.stderr
    assert json.loads(koe("config", "get", "server.port", "--json").stdout) == {
        "key": "server.port",
        "value": 8000,
        "source": "default",
        "env": "KOE_SERVER__PORT",
    }
    monkeypatch.setenv("KOE_SERVER__QUEUE_SIZE", "9")
    got = json.loads(koe("config", "get", "server.queue_size", "--json").stdout)
    assert got["value"] == 9 and got["source"] == "env KOE_SERVER__QUEUE_SIZE"
    r = koe("config", "set", "server.queue_size", "5")  # written, but the env var still wins: say so
    assert "KOE_SERVER__QUEUE_SIZE is set in the environment and overrides koe.toml" in r.stderr
    assert "queue_size = 5" in toml(home)


def test_unset_falls_back_to_the_default_and_drops_an_emptied_table(koe, home):
    home.mkdir()
    (home / "koe.toml").write_text(HAND_WRITTEN)
    koe("config", "set", "synthesis.seed", "7")
    assert "[synthesis]\nseed = 7\n" in toml(home)
    koe("config", "unset", "synthesis.seed")
    assert toml(home) == HAND_WRITTEN  # the table the edit made is gone again
    koe("config", "unset", "server.host")
    assert 'host = "127.0.0.1"' not in toml(home) and "port = 7000  # the port my proxy expects" in toml(home)
    assert "was not set" in koe("config", "unset", "synthesis.seed").stderr
    koe("config", "unset", "models.resident_limit")
    assert "# which model\n[models]" in toml(home)  # a table with the user's comment stays
    assert load_settings(home, environ={}).source_of("models.resident_limit") == "default"


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("server.port", "0", "server.port='0': Input should be greater than or equal to 1"),
        ("server.port", "-5", "Input should be greater than or equal to 1"),  # a value, not an option
        ("server.port", "eighty", "unable to parse string as an integer"),
        ("synthesis.format", "ogg", "Input should be 'wav', 'flac', 'mp3', 'opus', 'aac', 'm4a' or 'pcm'"),
        ("synthesis.speed", "9", "less than or equal to 4"),
        ("models.precision", "fp8", "Input should be 'fp32', 'bf16', 'int8' or 'int4'"),
        ("synthesis.save_outputs", "maybe", "valid boolean"),
        ("server.allowed_hosts", "[oops", "not a JSON list"),
        ("synthesis.options", "3", "give a table"),
        ("server.prot", "1", "unknown setting 'server.prot' (did you mean server.port"),
        ("prot", "1", "did you mean server.port"),
        ("home", "/x", "'home' is not a koe.toml setting"),
    ],
)
def test_bad_values_and_keys_are_refused_and_nothing_is_written(koe, home, key, value, match):
    home.mkdir()
    (home / "koe.toml").write_text(HAND_WRITTEN)
    one_line_error(koe("config", "set", key, value, ok=False), match)
    assert toml(home) == HAND_WRITTEN


def test_get_of_an_unknown_key_names_close_matches(koe, home):
    one_line_error(koe("config", "get", "models.defualt", ok=False), "did you mean models.default")


def test_family_options_table_and_one_option(koe, home):
    koe("config", "set", "synthesis.options", "{temperature = 0.8, top_k = 20}")
    assert load_settings(home, environ={}).synthesis.options == {"temperature": 0.8, "top_k": 20}
    koe("config", "set", "synthesis.options.top_k", "30")
    koe("config", "set", "synthesis.options.do_sample", "false")
    assert load_settings(home, environ={}).synthesis.options == {"temperature": 0.8, "top_k": 30, "do_sample": False}
    assert koe("config", "get", "synthesis.options.top_k").stdout == "30\n"
    assert json.loads(koe("config", "get", "synthesis.options").stdout) == {"temperature": 0.8, "top_k": 30, "do_sample": False}
    koe("config", "unset", "synthesis.options.temperature")
    koe("config", "unset", "synthesis.options.top_k")
    koe("config", "unset", "synthesis.options.do_sample")
    assert toml(home) == ""  # options table, then [synthesis], dropped when left empty


def test_auto_clears_an_optional_setting(koe, home):
    koe("config", "set", "models.device", "cpu")
    assert 'device = "cpu"' in toml(home)
    assert "unset models.device" in koe("config", "set", "models.device", "auto").stderr
    assert "device" not in toml(home)


def test_the_token_is_not_echoed_and_the_file_keeps_its_mode(koe, home):
    home.mkdir()
    (home / "koe.toml").write_text(HAND_WRITTEN)
    os.chmod(home / "koe.toml", 0o600)
    r = koe("config", "set", "server.token", "s3cret-value")
    assert "s3cret-value" not in r.output and "********" in r.stderr
    assert stat.S_IMODE((home / "koe.toml").stat().st_mode) == 0o600
    assert 'token = "s3cret-value"' in toml(home)
    assert koe("config", "get", "server.token").stdout == "********\n"
    assert "s3cret" not in koe("config", "get", "server.token", "--json").stdout


def test_a_broken_file_is_reported_not_overwritten(koe, home):
    home.mkdir()
    (home / "koe.toml").write_text("[server\nport = 1\n")
    r = koe("config", "set", "server.port", "8001", ok=False)
    assert r.exit_code == 1 and "not valid TOML" in r.stderr
    assert toml(home) == "[server\nport = 1\n"


def test_concurrent_edits_all_land(home):
    keys = [
        ("server.port", "8100"),
        ("server.queue_size", "3"),
        ("models.resident_limit", "2"),
        ("synthesis.seed", "11"),
        ("synthesis.speed", "1.5"),
        ("server.max_batch_size", "4"),
        ("synthesis.language", "english"),
        ("models.device", "cpu"),
    ]
    errors = []

    def edit(key, value):
        try:
            config_file.set_value(home, key, value, environ={})
        except Exception as e:  # noqa: BLE001 - collected for the assert
            errors.append(e)

    threads = [threading.Thread(target=edit, args=kv) for kv in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    s = load_settings(home, environ={})
    assert (s.server.port, s.server.queue_size, s.models.resident_limit, s.synthesis.seed) == (8100, 3, 2, 11)
    assert (s.synthesis.speed, s.server.max_batch_size, s.synthesis.language, s.models.device) == (1.5, 4, "english", "cpu")
    assert not [p for p in home.iterdir() if p.name.startswith(".")]  # no temp file left


def test_the_service_api(tmp_path):
    assert "server.port" in config_file.setting_keys() and "home" not in config_file.setting_keys()
    with pytest.raises(NotFound):
        config_file.parse_key("server.nope")
    with pytest.raises(InvalidRequest):
        config_file.parse_value(config_file.parse_key("server.port"), "70000")
    assert config_file.parse_value(config_file.parse_key("server.max_reference_seconds"), "12") == 12.0
    change = config_file.set_value(tmp_path, "server.port", "9000", environ={})
    assert change.changed and change.value == 9000 and change.path == tmp_path.resolve() / "koe.toml"
    assert not config_file.set_value(tmp_path, "server.port", "9000", environ={}).changed
    assert config_file.set_value(tmp_path, "server.port", "9001", environ={"KOE_SERVER__PORT": "1"}).overridden_by == "KOE_SERVER__PORT"
    assert config_file.get_value(tmp_path, "server.port", environ={}).source == "koe.toml"
    (tmp_path / "koe.toml").write_text("server = 3\n")
    with pytest.raises(ConfigError, match="must be a"):
        config_file.set_value(tmp_path, "server.port", "9000", environ={})


def test_models_default(koe, home, cv_model, tmp_path, monkeypatch):
    one_line_error(koe("models", "default", ok=False), "no default model set", code=1)
    koe("models", "import", cv_model, "--name", "cv", "--link")
    r = koe("models", "default", "cv")
    assert "set models.default = cv" in r.stderr and 'default = "cv"' in toml(home)
    r = koe("models", "default")
    assert r.stdout == "cv\n" and "from koe.toml" in r.stderr
    one_line_error(koe("models", "default", "nope", ok=False), "no model named 'nope'")
    assert 'default = "cv"' in toml(home)
    monkeypatch.chdir(tmp_path)  # a relative folder is written as an absolute path: koe.toml is read from anywhere
    rel = os.path.relpath(cv_model, tmp_path)
    koe("models", "default", rel if os.sep in rel else f".{os.sep}{rel}")
    assert load_settings(home, environ={}).models.default == str(cv_model.resolve())
    one_line_error(koe("models", "default", tmp_path / "missing", ok=False), "model folder not found")


def test_models_default_takes_a_hub_id_that_is_not_here_yet(koe, home, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))  # empty: nothing cached
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # and nothing is fetched to check it
    r = koe("models", "default", "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice")
    assert "not downloaded yet" in r.stderr and "koe models pull Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice" in r.stderr
    assert load_settings(home, environ={}).models.default == "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
    one_line_error(koe("models", "default", "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice/extra", ok=False), "hub id")
    assert load_settings(home, environ={}).models.default == "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"


# What `koe serve` refuses, `koe config set` refuses: one rule (the settings model), the same words.
SERVE_REFUSES = [
    ("server.token", " spaced ", "starts or ends with whitespace"),
    ("server.token", "tab\tin-the-middle-0123456789", "control character"),
    ("server.max_upload_bytes", "99999999999999999999", "less than or equal to 1073741824"),
    ("server.max_upload_bytes", "1023", "greater than or equal to 1024"),
    ("server.host", "bad host", "not an address or a host name to listen on"),
    ("server.host", "127.0.0.1:8000", "the port is server.port"),
    ("server.allowed_hosts", "tts.lan,evil.example/x", "'evil.example/x' is not a host name"),
    ("server.allowed_origins", "localhost:3000", "'localhost:3000' is not an origin"),
]


@pytest.mark.parametrize(("key", "value", "match"), SERVE_REFUSES)
def test_config_set_refuses_exactly_what_serve_refuses(koe, home, monkeypatch, key, value, match):
    import tomlkit

    started = []
    real_import = __import__("importlib").import_module
    monkeypatch.setattr("importlib.import_module", lambda name: started.append(name) if name == "koe.server.app" else real_import(name))
    refused = koe("config", "set", key, value, ok=False)
    one_line_error(refused, match)
    assert not (home / "koe.toml").exists()
    section, name = key.split(".")
    home.mkdir(exist_ok=True)
    typed = value.split(",") if name.startswith("allowed_") else int(value) if value.isdigit() else value
    (home / "koe.toml").write_text(tomlkit.dumps({section: {name: typed}}))  # as a hand edit would put it there
    served = koe("serve", ok=False)
    one_line_error(served, match, code=1)
    assert "from koe.toml" in served.stderr and not started  # refused before the server (or a model) loads
    problem = refused.stderr.split(": ", 2)[2]  # "error: KEY=VALUE: <the rule's words> (hint)"
    assert problem.split(" (")[0] in served.stderr  # the same validator's words, word for word
    if key == "server.token":
        assert value.strip() not in refused.output + served.output  # never echoed, even when refused


def test_serve_and_config_set_accept_the_same_good_values(koe, home):
    for key, value in [
        ("server.host", "::1"),
        ("server.host", "my-box.lan"),
        ("server.token", "inner spaces are-fine-0123"),
        ("server.max_upload_bytes", str(1024**3)),
        ("server.allowed_hosts", "*,*.lan,.corp,tts.example:8443"),
        ("server.allowed_origins", "*,http://localhost:3000"),
    ]:
        koe("config", "set", key, value)
    assert load_settings(home, environ={}).server.allowed_origins == ["*", "http://localhost:3000"]
