"""Issue 34, items 5 (history), 6 and 13: a damaged history row is skipped with a warning, errors are one
line without -v (a failed model load logs no traceback to a terminal), tables fit 80 columns with names
whole, `koe bench`'s tables show each value once, and typos of store names and hub ids say "did you mean"."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from test_faults import damage, mirror

from koe.bench.cli import format_table
from koe.cli import common
from koe.service.config.settings import load_settings
from koe.service.errors import NotFound, StorageError
from koe.service.home import KoeHome
from koe.service.names import close_matches, did_you_mean
from koe.service.storage import Database
from koe.service.store.resolve import Downloads, resolve_model

pytest_plugins = ["cli_fixtures"]  # cv_model, home, koe

QWEN_TYPO, QWEN = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoce", "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
BENCH = Path(__file__).parent.parent / "docs" / "bench"


@pytest.fixture
def narrow(monkeypatch):
    """The CLI's result console 80 columns wide, as a terminal of that size makes it."""
    monkeypatch.setattr(common.out, "_width", 80)


def record(home: Path, n: int, model: str = "cv", kept: bool = True) -> KoeHome:
    """`n` history rows made as the synthesizer makes them, each with its kept file under KOE_HOME/outputs."""
    h = KoeHome(load_settings(str(home)))
    for i in range(1, n + 1):
        path = None
        if kept:
            path = h.settings.outputs_dir / "2026-12-03" / f"{i:06d}.wav"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"RIFF")
        meta = {"mode": "speaker", "seed": i, "model_name": model, "speaker": "ryan"}
        h.db.add_output(
            text=f"Sentence number {i}, long enough to be cut in a narrow table.",
            model=model,
            voice="ryan",
            format="wav",
            duration_s=1.5,
            path=str(path) if path else None,
            metadata=meta,
        )
    return h


def spoil(home: Path, output_id: int, **columns) -> None:
    with sqlite3.connect(home / "koe.db") as db:
        for column, value in columns.items():
            db.execute(f"UPDATE outputs SET {column} = ? WHERE id = ?", (value, output_id))


# -- 5: a damaged history row ----------------------------------------------------------------------
@pytest.mark.parametrize("damage_", [{"metadata": "not json{"}, {"metadata": "[1, 2]"}, {"created_at": "yesterday"}, {"duration_s": "long"}])
def test_a_damaged_history_row_is_skipped_with_a_warning(koe, home, caplog, damage_):
    record(home, 3).close()
    spoil(home, 2, **damage_)
    with caplog.at_level(logging.WARNING, logger="koe.service.history"):
        rows = json.loads(koe("history", "list", "--json").stdout)
    assert [r["id"] for r in rows] == [3, 1]
    assert any("output 2 in koe.db is damaged" in r.getMessage() and "skipped" in r.getMessage() for r in caplog.records), caplog.text
    assert [line.split()[0] for line in koe("history", "list").stdout.splitlines()[1:3]] == ["3", "1"]
    shown = koe("history", "show", "2", ok=False)  # one line saying what to do, no traceback
    assert shown.exit_code == 1 and "Traceback" not in shown.output
    assert shown.stderr.strip().splitlines() == ["error: output 2 in koe.db is damaged: " + shown.stderr.split("damaged: ")[1].strip()]
    assert "koe history delete 2" in shown.stderr
    koe("history", "delete", "2")  # a damaged row can be removed, its kept file with it
    assert [r["id"] for r in json.loads(koe("history", "list", "--json").stdout)] == [3, 1]
    assert not (home / "outputs" / "2026-12-03" / "000002.wav").exists()


def test_the_database_says_which_row_is_damaged(tmp_path):
    db = Database(tmp_path / "koe.db")
    for i in range(3):
        db.add_output(text=f"t{i}", model="m", voice=None, format="wav", duration_s=1.0, path=None, metadata={"seed": i})
    spoil(tmp_path, 2, metadata="{")
    with pytest.raises(StorageError, match="output 2 in koe.db is damaged: its metadata is not JSON"):
        db.list_outputs(10)
    skipped: list[StorageError] = []
    assert [r.id for r in db.list_outputs(10, on_damaged=skipped.append)] == [3, 1] and len(skipped) == 1
    with pytest.raises(StorageError, match="output 2"):
        db.get_output(2)
    assert db.has_output(2) and not db.has_output(9)
    assert [r.id for r in db.delete_outputs([2])] == [2]


# -- 6: one line without -v ------------------------------------------------------------------------
def _log_through(handler: logging.Handler, **extra) -> str:
    stream = io.StringIO()
    handler.setStream(stream)
    log = logging.getLogger("koe.test")
    log.propagate, log.handlers = False, [handler]
    try:
        raise RuntimeError("deep down")
    except RuntimeError as e:
        log.error("model m failed to load: %s", e, exc_info=e, extra=extra)
    finally:
        log.handlers = []
    return stream.getvalue()


def test_log_records_on_a_terminal_are_one_line_without_v():
    assert _log_through(common.log_handler(False)) == "ERROR koe.test: model m failed to load: deep down\n"
    assert _log_through(common.log_handler(False), raised=True) == ""  # the command prints that error itself
    assert "Traceback" in _log_through(common.log_handler(True), raised=True)  # -v: the whole story
    assert "Traceback" in _log_through(common.log_handler(False, server=True), raised=True)  # a server's log is its operator's


def test_speak_with_a_broken_model_prints_one_line_without_v(cv_model, tmp_path):
    folder = mirror(cv_model, tmp_path / "broken")
    damage(folder, "model.safetensors", lambda b: b[: len(b) // 2])
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOE_")} | {"KOE_HOME": str(tmp_path / "home"), "COLUMNS": "80"}
    run = [sys.executable, "-m", "koe.cli.main", "speak", "Hello.", "-m", str(folder), "-o", str(tmp_path / "x.wav")]
    r = subprocess.run(run, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    errors = [line for line in r.stderr.strip().splitlines() if not line.startswith("warning:")]  # (a random-weight model is said so)
    assert len(errors) == 1 and errors[0].startswith("error: model 'broken' failed to load: ") and "SafetensorError" in errors[0], r.stderr
    assert "koe doctor" in errors[0] and "ERROR" not in r.stderr


# -- 13: tables at 80 columns ----------------------------------------------------------------------
def test_history_list_at_80_columns_keeps_names_whole_and_rows_on_one_line(koe, home, narrow):
    record(home, 3).close()
    table = koe("history", "list").stdout.splitlines()
    assert len(table) == 5 and all(len(line) <= 80 for line in table[:4]), table  # header, 3 rows, where the files are
    assert re.search(r"^ 1  \d\d-\d\d \d\d:\d\d  cv     ryan\s+1\.50  Sentence number.*…  2026-12-03/000001\.wav$", table[3]), table
    assert table[4] == f"files under {home / 'outputs'}"
    long = "Qwen3-TTS-12Hz-0.6B-CustomVoice"  # a store name as long as a release's: no room for the paths
    spoil(home, 1, model=long)
    table = koe("history", "list").stdout.splitlines()
    assert all(len(line) <= 80 for line in table) and any(f"  {long}  " in line for line in table), table
    assert table[-1] == "the kept files: `koe history show ID`" and "000001.wav" not in "\n".join(table)


def test_config_show_at_80_columns_keeps_setting_names_whole(koe, home, narrow, monkeypatch):
    monkeypatch.setenv("KOE_SERVER__MAX_INSTRUCTIONS_CHARS", "100")
    table = koe("config", "show").stdout.splitlines()
    keys = json.loads(koe("config", "show", "--json").stdout)
    assert all(len(line) <= 80 for line in table[1:]), table
    for key in keys:
        assert any(line.startswith(key + " ") for line in table), key  # whole, never "server.max_reference_sec…"
    assert re.search(r"^server\.max_instructions_chars\s+100\s+env\s*$", "\n".join(table), re.MULTILINE)
    assert table[-1].startswith("env var: KOE_<SECTION>__<NAME>")


@pytest.mark.parametrize("saved", ["2026-11-30-all06.json", "2026-12-02-peer_06.json", "2026-12-01-f5_real.json", "2026-12-01-voxcpm2_real_bf16.json"])
def test_bench_tables_fit_80_columns_with_each_value_once(saved):
    results = json.loads((BENCH / saved).read_text())
    table = format_table(results, width=80)
    lines = table.splitlines()
    notes = sum(1 for line in lines if re.match(r"^(0\.6b|real|1\.7b) ", line))
    assert all(len(line) <= 80 for line in lines[: len(lines) - notes]), table
    assert not re.search(r"\d \(\d", table)  # no "median (min)" pairs
    first = next(iter(results["sizes"].values()))["cases"]
    case, entry = next(iter(first.items()))
    for key, stat in entry["koe"]["summary"].items():
        if isinstance(stat, dict) and key in ("ms_per_frame", "total_s", "ms_per_patch"):
            row = next(line for line in lines if line.split()[:2] == [case, "koe"] and f"{stat['median']:.3g}" in line.split())
            assert f"{stat['min']:.3g}" == f"{stat['median']:.3g}" or f"{stat['min']:.3g}" not in row.split()  # the median, not the min beside it
    assert table.count("case ") >= 2  # split into tables that each keep the row names


# -- 13: did you mean ------------------------------------------------------------------------------
def test_close_matches():
    assert close_matches("qwen-vc", ["qwen-cv", "f5", "QWEN-CV2"]) == ["qwen-cv", "QWEN-CV2"]
    assert close_matches("f5", ["f5"]) == [] and did_you_mean([]) is None
    assert did_you_mean(["a", "b"]) == "did you mean a, b?"


def test_a_store_name_typo_says_did_you_mean(koe, home, cv_model):
    koe("models", "import", cv_model, "--name", "qwen-custom", "--link")
    r = koe("speak", "Hello.", "-m", "qwen-custon", ok=False)
    assert r.exit_code == 2 and r.stderr.strip().splitlines() == [
        "error: no model named 'qwen-custon' in the store; installed: qwen-custom (did you mean qwen-custom?)"
    ]


def test_a_hub_id_typo_names_the_release_and_not_the_hub(koe, home, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = koe("speak", "Hello.", "-m", QWEN_TYPO, ok=False)
    assert r.stderr.strip().splitlines() == [f"error: no model '{QWEN_TYPO}' here, and it is no release koe knows (did you mean {QWEN}?)"]
    assert f"pull {QWEN_TYPO}" not in r.stderr and "hub" not in r.stderr
    far = koe("speak", "Hello.", "-m", "someone/their-own-tts", ok=False)  # nothing close: the usual answer, with the pull
    assert "koe models pull someone/their-own-tts" in far.stderr and "did you mean" not in far.stderr


def test_a_hub_id_typo_when_the_hub_is_down_or_lacks_it(monkeypatch, tmp_path):
    from koe.service.store import hub, models

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    store = models.ModelStore(tmp_path / "models", Database(tmp_path / "koe.db"))

    def down(*a, **k):
        return (_ for _ in ()).throw(hub.Unavailable("cannot reach the Hugging Face hub"))

    monkeypatch.setattr(hub, "check_hub_reachable", down)
    with pytest.raises(NotFound, match=re.escape(f"did you mean {QWEN}?")) as e:
        resolve_model(store, QWEN_TYPO)
    assert "reach" not in str(e.value)
    monkeypatch.setattr(hub, "check_hub_reachable", lambda *a, **k: None)
    monkeypatch.setattr(hub, "pull_model", lambda *a, **k: (_ for _ in ()).throw(NotFound(f"no model {QWEN_TYPO!r} on the hub")))
    with pytest.raises(NotFound, match=re.escape(f"did you mean {QWEN}?")):
        resolve_model(store, QWEN_TYPO)
    with pytest.raises(NotFound, match=re.escape(f"did you mean {QWEN}?")):  # a client's request, on a server that does not download
        resolve_model(store, QWEN_TYPO, allow_paths=False, downloads=Downloads(False, "this server does not download models", True))


def test_a_store_name_typo_says_did_you_mean_for_info_and_remove_too(tmp_path, monkeypatch):
    from fixtures_models import model_folder
    from product_helpers import koe_command

    koe = koe_command(tmp_path, monkeypatch)
    koe("models", "import", model_folder(tmp_path, "custom_voice"), "--name", "narrator", "--link")
    for args in (("models", "info", "narator"), ("models", "remove", "narator")):
        r = koe(*args, ok=False)
        assert r.exit_code != 0 and "did you mean narrator?" in r.stderr.replace("\n", " "), r.stderr


def test_a_voice_name_typo_says_did_you_mean(tmp_path):
    from product_helpers import speechy, wav_bytes

    from koe.service import KoeHome, load_settings
    from koe.service.errors import NotFound

    home = KoeHome(load_settings(tmp_path / "home", environ={}))
    clip = tmp_path / "clip.wav"
    clip.write_bytes(wav_bytes(speechy(1.5)))
    home.voices.add("narrator", clip, "A short test clip.")
    with pytest.raises(NotFound) as info:
        home.voices.get("narator")
    assert info.value.hint == "did you mean narrator?"
    home.close()
