"""`koe history`: list, show, replay and delete the outputs recorded in koe.db (real synthesis on a
random-weight model: replay gives back the same bytes)."""

import json
import os

import pytest

from koe.service.errors import InvalidRequest, NotFound
from koe.service.history import History
from koe.service.home import KoeHome

pytest_plugins = ["cli_fixtures"]  # cv_model, vd_model, base_model, home, koe

pytestmark = pytest.mark.filterwarnings("ignore:.*cut off:UserWarning")
FAST = ["--max-new-tokens", "8"]


def one_line_error(result, match: str, code: int = 2) -> None:
    assert result.exit_code == code, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in result.output, result.output
    assert match in result.stderr, result.stderr


@pytest.fixture
def spoken(koe, home, cv_model, tmp_path):
    """Three outputs: #1 kept under KOE_HOME/outputs, #2 written to a file of the user's, #3 kept, with a style."""
    koe("models", "import", cv_model, "--name", "cv", "--link")
    koe("speak", "Hello there.", "-m", "cv", *FAST, "--seed", "2")
    koe("speak", "A second, longer sentence to list.", "-m", "cv", *FAST, "--seed", "5", "--speaker", "ryan", "-o", tmp_path / "mine.mp3")
    koe("speak", "Third.", "-m", "cv", *FAST, "--seed", "9", "--temperature", "0.7", "--speed", "1.25")
    return tmp_path / "mine.mp3"


def test_list_is_newest_first_with_the_kept_files(koe, home, spoken):
    rows = json.loads(koe("history", "list", "--json").stdout)
    assert [r["id"] for r in rows] == [3, 2, 1]
    first, mine, third = rows[2], rows[1], rows[0]
    assert first["text"] == "Hello there." and first["model"] == "cv" and first["format"] == "wav" and first["seconds"] > 0.3
    assert first["path"] and first["path"].startswith(str(home.resolve() / "outputs")) and os.path.isfile(first["path"])
    assert mine["path"] is None and mine["voice"] == "ryan" and mine["format"] == "mp3"  # not kept: the user's file is theirs
    assert third["when"] and set(third) == {"id", "created_at", "when", "model", "voice", "format", "seconds", "text", "path"}
    assert [r["id"] for r in json.loads(koe("history", "list", "--limit", "1", "--json").stdout)] == [3]
    table = koe("history", "list", "--limit", "2")
    assert "Third." in table.stdout and "Hello there." not in table.stdout and "2 of 3" in table.stderr
    bad = koe("history", "list", "--limit", "0", ok=False)  # typer's own usage error, as for speak --seed -1
    assert bad.exit_code == 2 and "greater than or equal to" in bad.output


def test_show_prints_every_recorded_field(koe, home, spoken):
    d = json.loads(koe("history", "show", "3", "--json").stdout)
    assert d["id"] == 3 and d["text"] == "Third." and d["file_exists"] is True
    m = d["metadata"]
    assert m["seed"] == 9 and m["mode"] == "speaker" and m["options"]["temperature"] == 0.7 and m["speed"] == 1.25
    assert m["model_name"] == "cv" and m["precision"] == "float32"
    text = koe("history", "show", "2").stdout
    assert "ryan" in text and "A second, longer sentence to list." in text and "seed" in text
    one_line_error(koe("history", "show", "99", ok=False), "no output 99 in the history")


def test_replay_speaks_the_same_bytes_again(koe, home, spoken, tmp_path):
    kept = json.loads(koe("history", "show", "1", "--json").stdout)["path"]
    again = tmp_path / "again.wav"
    r = koe("history", "replay", "1", "-o", again)
    assert "seed 2" in r.stderr and again.read_bytes() == open(kept, "rb").read()
    koe("history", "replay", "2", "-o", tmp_path / "again.mp3")  # speaker, seed and format as recorded
    assert (tmp_path / "again.mp3").read_bytes() == spoken.read_bytes()
    r = koe("history", "replay", "3")  # no -o: kept under KOE_HOME/outputs as a new row, like koe speak
    newest = json.loads(koe("history", "list", "--limit", "1", "--json").stdout)[0]
    assert newest["id"] == 6 and newest["path"] and newest["path"] in r.stderr.replace("\n", "")
    assert open(newest["path"], "rb").read() == open(json.loads(koe("history", "show", "3", "--json").stdout)["path"], "rb").read()
    shown = json.loads(koe("history", "show", "6", "--json").stdout)["metadata"]
    assert (shown["seed"], shown["speed"], shown["options"]) == (9, 1.25, {"max_new_tokens": 8, "temperature": 0.7})
    one_line_error(koe("history", "replay", "99", ok=False), "no output 99")


def test_replay_of_a_folder_model_finds_the_folder_or_names_the_way_out(koe, home, cv_model, tmp_path):
    import shutil

    folder = tmp_path / "cv-folder"
    shutil.copytree(cv_model, folder)
    koe("speak", "Hello.", "-m", folder, *FAST, "--seed", "4", "-o", tmp_path / "a.wav")  # a folder, never installed
    koe("history", "replay", "1", "-o", tmp_path / "b.wav")  # the folder's path is in the history
    assert (tmp_path / "b.wav").read_bytes() == (tmp_path / "a.wav").read_bytes()
    folder.rename(tmp_path / "moved")
    one_line_error(koe("history", "replay", "1", "-o", tmp_path / "c.wav", ok=False), "give --model NAME|FOLDER")
    koe("history", "replay", "1", "-m", tmp_path / "moved", "-o", tmp_path / "c.wav")
    assert (tmp_path / "c.wav").read_bytes() == (tmp_path / "a.wav").read_bytes()


def test_replay_of_a_cloned_clip_needs_the_clip(home, base_model, tmp_path):
    h = KoeHome.open(home)
    history = History(h)
    output_id = h.db.add_output(
        text="Hi.",
        model="base",
        voice="clip",
        format="wav",
        duration_s=1.0,
        path=None,
        metadata={"mode": "clone_clip", "seed": 3, "language": "auto", "options": {}, "speed": 1.0, "format": "wav"},
    )
    with pytest.raises(InvalidRequest, match="does not keep"):
        history.replay_request(output_id)
    request = history.replay_request(output_id, ref_audio="clip.wav", ref_text="hello")
    assert (request.ref_audio, request.ref_text, request.seed, request.text) == ("clip.wav", "hello", 3, "Hi.")
    gone = h.db.add_output(
        text="Hi.",
        model="base",
        voice="anna",
        format="wav",
        duration_s=1.0,
        path=None,
        metadata={"mode": "clone_voice", "voice": "anna", "seed": 3, "language": "auto"},
    )
    with pytest.raises(NotFound, match="no longer in the library"):
        history.replay_request(gone)
    design = h.db.add_output(
        text="Hi.",
        model="vd",
        voice="design",
        format="wav",
        duration_s=1.0,
        path=None,
        metadata={"mode": "design", "instruct": "a calm voice", "seed": 1, "language": "english"},
    )
    r = history.replay_request(design)
    assert (r.design, r.instruct, r.language) == ("a calm voice", None, "english")


def test_delete_removes_rows_and_only_files_under_outputs(koe, home, spoken, tmp_path):
    kept = json.loads(koe("history", "show", "1", "--json").stdout)["path"]
    h = KoeHome.open(home)
    theirs = tmp_path / "theirs.wav"
    theirs.write_bytes(b"not koe's")
    foreign = h.db.add_output(text="x", model="cv", voice=None, format="wav", duration_s=0.1, path=str(theirs), metadata={})
    r = koe("history", "delete", "1", str(foreign))
    assert "deleted 2 outputs, 1 file" in r.stderr and "left" in r.stderr and str(theirs) in r.stderr.replace("\n", "")
    assert not os.path.exists(kept) and theirs.read_bytes() == b"not koe's" and spoken.exists()
    assert [row["id"] for row in json.loads(koe("history", "list", "--json").stdout)] == [3, 2]
    one_line_error(koe("history", "delete", "2", "77", ok=False), "no output 77")
    assert h.db.get_output(2) is not None  # nothing removed when one id is wrong
    one_line_error(koe("history", "delete", ok=False), "give the ids to delete, or --all")
    one_line_error(koe("history", "delete", "--all", ok=False), "add --yes")
    third = json.loads(koe("history", "show", "3", "--json").stdout)["path"]
    assert "deleted 2 outputs, 1 file" in koe("history", "delete", "--all", "--yes").stderr
    assert not os.path.exists(third) and json.loads(koe("history", "list", "--json").stdout) == []
    assert not [p for p in (home / "outputs").iterdir()]  # emptied day folders go too
