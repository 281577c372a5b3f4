"""`koe models pull` for real over HTTP: a fake hub on a loopback port (tests/hub_server.py) serves a tiny
random-weight Qwen3-TTS CustomVoice folder as a hub repo, and the pull's own download code fetches it.

What is shown: the fake hub speaks the hub's API well enough for huggingface_hub's own client; one byte
count for the whole pull reaches the listed total; a connection cut mid-file is resumed with a Range
request in the same pull, and a pull that failed mid-file resumes on the rerun from the bytes on disk
(the hub's counters show no byte sent twice); checksums (LFS SHA-256 and git blob ids) are checked;
`--revision` is honoured and its commit recorded and shown; the token goes to the hub, not to its CDN;
sizes are shown as 0.6B; `koe models import --progress` draws a byte bar; no request leaves loopback.
A hostile hub (or mirror) cannot make a pull touch a file outside the store: a listing with a path that
leaves the download folder, a checksum or commit that is not hex, or a body that is no listing is
refused before any byte is fetched or any file written or removed.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from fixtures_models import model_folder
from product_helpers import folder_files, install_fake_hub, koe_command, tree

from koe.service.errors import AlreadyExists, InvalidRequest, NotFound, Unavailable
from koe.service.storage import Database
from koe.service.store.download import UnsafeListing, check_repo_path, inside
from koe.service.store.hub import pull_model
from koe.service.store.models import ModelStore

REPO = "someone/qwen-copy"
WEIGHTS = "model.safetensors"


@pytest.fixture(scope="module")
def custom_voice(tmp_path_factory):
    return model_folder(tmp_path_factory.getbasetemp(), "custom_voice")


@pytest.fixture
def files(custom_voice) -> dict[str, bytes]:
    return {**folder_files(custom_voice), "README.md": b"# a copy"}


@pytest.fixture
def hub(monkeypatch, files):
    hub = install_fake_hub(monkeypatch, {REPO: files})
    yield hub
    hub.close()
    assert hub.internet == []  # nothing but loopback was looked up


@pytest.fixture
def store(tmp_path):
    return ModelStore(tmp_path / "models", Database(tmp_path / "koe.db"))


@pytest.fixture
def koe(tmp_path, monkeypatch):
    return koe_command(tmp_path, monkeypatch)


def part_files(store) -> list:
    return [p for p in store.root.glob(".*.partial/.parts/*.part")]


# -- the fake hub itself ---------------------------------------------------------------------------
def test_the_fake_hub_serves_huggingface_hubs_own_client(hub, files, tmp_path, monkeypatch):
    """model_info, hf_hub_download (to a cache) and snapshot_download (to a folder) of huggingface_hub work against it."""
    import huggingface_hub.constants
    from huggingface_hub import HfApi, hf_hub_download, snapshot_download

    # huggingface_hub's user agent looks up an "agent" registry at the endpoint it read on import (huggingface.co),
    # whatever endpoint a call is given; koe's pull sends its own headers, this test turns that look-up off
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_TELEMETRY", True)

    info = HfApi(endpoint=hub.url).model_info(REPO, files_metadata=True)
    assert info.sha == hub.refs[REPO]["main"] and sorted(s.rfilename for s in info.siblings) == sorted(files)
    weights = next(s for s in info.siblings if s.rfilename == WEIGHTS)
    assert weights.size == len(files[WEIGHTS]) and weights.lfs.sha256 == hashlib.sha256(files[WEIGHTS]).hexdigest()
    cached = hf_hub_download(REPO, WEIGHTS, cache_dir=tmp_path / "cache", endpoint=hub.url)
    assert open(cached, "rb").read() == files[WEIGHTS]
    snapshot_download(REPO, local_dir=tmp_path / "snap", endpoint=hub.url)
    assert {k: (tmp_path / "snap" / k).read_bytes() for k in files} == files
    heads = [h for h in hub.hits if h.method == "HEAD" and h.path.endswith("/" + WEIGHTS)]
    assert heads and all(h.status == 302 for h in heads)  # an LFS file: redirected to the "CDN", as on the hub


# -- downloads, progress ---------------------------------------------------------------------------
def test_pull_downloads_the_repo_with_one_byte_count_to_its_total(store, hub, files):
    seen, steps = [], []
    d = pull_model(store, REPO, on_progress=lambda done, total: seen.append((done, total)), on_status=steps.append)
    total = sum(len(v) for v in files.values())
    assert seen[0] == (0, total) and seen[-1] == (total, total)  # announced first, reached at the end
    assert all(t == total for _, t in seen) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert any(f"{len(files)} files" in s for s in steps)  # the size is said before any byte comes
    sha = hub.refs[REPO]["main"]
    assert d.ok and d.origin == f"hub:{REPO}@{sha}" and store.get("qwen-copy").origin == f"hub:{REPO}@{sha}"
    assert folder_files(store.root / "qwen-copy") == files
    assert hub.body_bytes() == total  # each byte once
    assert all(f"/resolve/{sha}/" in h.path for h in hub.hits if "/resolve/" in h.path)  # the files of the commit listed


def test_a_connection_cut_mid_file_is_resumed_in_the_same_pull(store, hub, files):
    size = len(files[WEIGHTS])
    hub.cut(REPO, WEIGHTS, after=size // 3)
    d = pull_model(store, REPO)
    assert d.ok and (store.root / "qwen-copy" / WEIGHTS).read_bytes() == files[WEIGHTS]
    assert hub.ranges(REPO, WEIGHTS) == [None, f"bytes={size // 3}-"]
    assert hub.body_bytes(REPO, WEIGHTS) == size  # the cut part was not sent again


def test_an_interrupted_pull_resumes_on_the_rerun_from_the_bytes_on_disk(store, hub, files):
    size = len(files[WEIGHTS])
    hub.cut(REPO, WEIGHTS, after=size // 2, then_down=True)  # the connection drops, and the hub stays down
    with pytest.raises(Unavailable, match="run the same command again to resume"):
        pull_model(store, REPO)
    assert store.list() == [] and not (store.root / "qwen-copy").exists()
    assert sorted(p.stat().st_size for p in part_files(store) if p.stat().st_size == size // 2) == [size // 2]  # kept
    hub.up()
    seen = []
    d = pull_model(store, REPO, on_progress=lambda done, total: seen.append(done))
    assert d.ok and (store.root / "qwen-copy" / WEIGHTS).read_bytes() == files[WEIGHTS]
    assert hub.ranges(REPO, WEIGHTS)[-1] == f"bytes={size // 2}-"  # continued where the bytes on disk end
    assert hub.body_bytes(REPO, WEIGHTS) == size  # no byte of it sent twice
    assert seen[-1] == sum(len(v) for v in files.values())
    assert sorted(p.name for p in store.root.iterdir()) == ["qwen-copy"]  # the partial download is gone


def test_a_pull_stopped_by_ctrl_c_resumes_from_its_bytes(store, hub, files):
    """An interrupt (here raised from the progress callback once a third of the weights came, as a first use's
    pull would be stopped) keeps what came; the next pull, by any caller, continues from there."""
    size = len(files[WEIGHTS])
    hub.throttle = 40e6  # bytes per second: the interrupt lands mid-file

    def stop_at_a_third(done, total):
        if done >= size // 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pull_model(store, REPO, on_progress=stop_at_a_third)
    assert store.list() == []
    [part] = [p for p in part_files(store) if p.name.startswith(hashlib.sha256(files[WEIGHTS]).hexdigest() + "-")]
    kept = part.stat().st_size
    assert 0 < kept < size
    hub.throttle = None
    assert pull_model(store, REPO).ok
    assert hub.ranges(REPO, WEIGHTS)[-1] == f"bytes={kept}-"


def test_the_cli_pull_is_quiet_in_a_pipe_then_resumes_and_says_what_it_did(koe, hub, files):
    size = len(files[WEIGHTS])
    hub.cut(REPO, WEIGHTS, after=size // 2, then_down=True)
    r = koe("models", "pull", REPO, ok=False)
    assert r.exit_code == 1 and [ln for ln in r.stderr.splitlines() if ln.strip()] == [r.stderr.strip()]  # one line
    assert r.stderr.startswith("error: download from someone/qwen-copy failed: the hub answered 503")
    assert "run the same command again to resume" in r.stderr
    hub.up()
    r = koe("models", "pull", REPO)
    sha = hub.refs[REPO]["main"]
    assert "looking up" not in r.stderr  # not a terminal: no steps, no bar ...
    assert "installed qwen-copy" in r.stderr and f"hub:{REPO}@{sha}" in r.stderr  # ... one summary
    assert "downloaded" in r.stderr and "already here" in r.stderr
    assert hub.ranges(REPO, WEIGHTS)[-1] == f"bytes={size // 2}-"


def test_the_cli_pull_draws_a_bar_and_its_steps_when_asked(koe, hub, files):
    r = koe("models", "pull", REPO, "--progress")
    assert "pulling someone/qwen-copy" in r.stderr and f"looking up {REPO}" in r.stderr and f"{len(files)} files" in r.stderr


# -- checksums, errors -----------------------------------------------------------------------------
def test_pull_of_a_whole_repo_builds_the_folder_from_the_snapshot(store, hub, files):
    """A repo no release lists is fetched whole, checked, validated and installed; a bad checksum installs nothing
    (from tests/test_service_models.py, where it ran against a mock of huggingface_hub)."""
    hub.bad_sha.add(f"{REPO}/{WEIGHTS}")
    with pytest.raises(InvalidRequest, match="checksum mismatch for model.safetensors"):
        pull_model(store, REPO)
    assert store.list() == [] and not (store.root / "qwen-copy").exists()
    hub.bad_sha.clear()
    d = pull_model(store, REPO)
    sha = hub.refs[REPO]["main"]
    assert d.ok and d.ref.name == "qwen-copy" and d.ref.variant == "custom_voice"
    assert hub.fetched_files(REPO) == sorted(files)  # the whole repo, at the listed commit
    folder = store.root / "qwen-copy"
    assert tree(folder) == sorted(files)  # no .cache, no parts
    assert store.get("qwen-copy").origin == f"hub:{REPO}@{sha}"
    assert sorted(p.name for p in store.root.iterdir()) == ["qwen-copy"]
    with pytest.raises(AlreadyExists):
        pull_model(store, REPO)
    with pytest.raises(InvalidRequest, match="unknown architecture 'Nope'"):
        pull_model(store, REPO, arch="Nope")


def test_files_with_the_same_bytes_are_each_pulled(store, monkeypatch, files):
    """Two paths of one repo may hold the same bytes (a config in two folders): each is fetched into
    its own partial file and lands at its own path."""
    same = {**files, "copy/" + WEIGHTS: files[WEIGHTS], "notes/a.txt": b"the same", "notes/b.txt": b"the same"}
    hub = install_fake_hub(monkeypatch, {"someone/twins": same})
    try:
        assert pull_model(store, "someone/twins").ok
    finally:
        hub.close()
    folder = store.root / "twins"
    assert tree(folder) == sorted(same)
    assert (folder / "copy" / WEIGHTS).read_bytes() == (folder / WEIGHTS).read_bytes() == files[WEIGHTS]
    assert (folder / "notes/a.txt").read_bytes() == (folder / "notes/b.txt").read_bytes() == b"the same"


def test_a_git_file_is_checked_by_its_blob_id(store, hub):
    hub.bad_sha.add(f"{REPO}/config.json")  # a small file: kept in git, not LFS
    with pytest.raises(InvalidRequest, match="checksum mismatch for config.json"):
        pull_model(store, REPO)
    assert store.list() == []
    hub.bad_sha.clear()
    assert pull_model(store, REPO).ok


def test_a_file_that_changed_on_the_hub_is_not_resumed_from_the_old_bytes(store, hub, files):
    size = len(files[WEIGHTS])
    hub.cut(REPO, WEIGHTS, after=size // 2, then_down=True)
    with pytest.raises(Unavailable):
        pull_model(store, REPO)
    hub.up()
    changed = {**files, WEIGHTS: files[WEIGHTS][::-1]}  # a new commit on main: other bytes, same size
    hub.push(REPO, changed)
    d = pull_model(store, REPO)
    assert (store.root / "qwen-copy" / WEIGHTS).read_bytes() == changed[WEIGHTS]
    assert hub.ranges(REPO, WEIGHTS)[-1] is None and d.origin.endswith(hub.refs[REPO]["main"])


def test_pull_errors_name_what_is_wrong(store, hub):
    with pytest.raises(NotFound, match="no model 'someone/missing'"):
        pull_model(store, "someone/missing")
    with pytest.raises(NotFound, match="has no revision 'v9'"):
        pull_model(store, REPO, revision="v9")
    assert store.list() == []


def test_the_token_goes_to_the_hub_and_not_to_its_cdn(store, hub):
    pull_model(store, REPO, token="hf_secret")
    api = [h for h in hub.hits if h.path.startswith("/api/")]
    cdn = [h for h in hub.hits if h.path.startswith("/_lfs/")]
    assert api and all(h.headers["authorization"] == "Bearer hf_secret" for h in api)
    assert cdn and all(h.headers["authorization"] is None for h in cdn)
    assert all(h.headers["user-agent"].startswith("koe/") for h in hub.hits)


# -- revisions, sizes ------------------------------------------------------------------------------
def test_revision_is_honoured_recorded_and_shown(koe, hub, files):
    first = hub.refs[REPO]["main"]
    hub.refs[REPO]["v1"] = first
    second = hub.push(REPO, {**files, "README.md": b"# a newer copy"})
    koe("models", "pull", REPO, "--revision", "v1", "--name", "old")
    koe("models", "pull", REPO, "--name", "new")
    listed = {m["name"]: m for m in json.loads(koe("models", "list", "--json").stdout)}
    assert listed["old"]["origin"] == f"hub:{REPO}@{first}" and listed["new"]["origin"] == f"hub:{REPO}@{second}"
    assert listed["old"]["revisions"] == [{"repo": REPO, "subfolder": "", "sha": first}]
    assert (koe.home / "models" / "old" / "README.md").read_bytes() == b"# a copy"
    assert (koe.home / "models" / "new" / "README.md").read_bytes() == b"# a newer copy"
    table = koe("models", "list").stdout
    assert f"hub:{REPO}@{first[:12]}" in table and first not in table  # short SHAs in the table
    info = koe("models", "info", "old").stdout
    assert f"origin: hub:{REPO}@{first}" in info and f"revision: {REPO} at commit {first}" in info


def test_sizes_come_from_the_parameter_count_and_random_weights_are_said(koe, custom_voice):
    """The tiny fixture keeps the 0.6B release's tag ("0b6") in its config: its size is its own parameter count."""
    r = koe("models", "import", custom_voice, "--name", "cv")
    assert "custom_voice 11M, random weights" in r.stderr
    assert " 11M, random weights " in koe("models", "list").stdout
    assert "(11M, random weights)" in koe("models", "info", "cv").stdout
    listed = json.loads(koe("models", "list", "--json").stdout)[0]
    assert listed["size"] == "0" + "b6" and listed["random_weights"] is True  # the data keeps the spec's tag


def test_import_draws_a_byte_bar_when_asked(koe, custom_voice):
    r = koe("models", "import", custom_voice, "--name", "cv", "--progress")
    assert "copying" in r.stderr and "installed cv" in r.stderr
    r = koe("models", "import", custom_voice, "--name", "cv2")
    assert "copying" not in r.stderr  # not a terminal, small: no bar


# -- a hostile hub ---------------------------------------------------------------------------------
VICTIM = b"a file of the user's, outside the store"


def outside_files(tmp_path, store) -> dict:
    """Every file under the test's folder that is not the store's or its database's: (path, bytes)."""
    return {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and store.root not in p.parents and not p.name.startswith("koe.db")}


HOSTILE_NAMES = [
    "../../../victim.txt",  # from models/.qwen-copy.partial/someone--qwen-copy to the test's folder
    "weights/../../../../victim.txt",
    "ABSOLUTE",  # the victim's absolute path
    "..\\..\\..\\victim.txt",
    "victim.txt\x00.safetensors",
    "ansi\x1b[2J.txt",
    "bell\x07.txt",
    "line\nbreak.txt",
    "./config.json",
    "a//b.txt",
    "C:/victim.txt",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_listing_entry_that_leaves_the_store_is_refused_before_any_file_is_touched(store, hub, files, tmp_path, name):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(VICTIM)
    name = str(victim) if name == "ABSOLUTE" else name
    hub.repos[REPO] = {**files, name: b"the hub's bytes"}
    before = outside_files(tmp_path, store)
    with pytest.raises(Unavailable, match="refused the listing of someone/qwen-copy") as info:
        pull_model(store, REPO)
    assert "no file was written or removed" in str(info.value) and info.value.hint
    assert outside_files(tmp_path, store) == before and victim.read_bytes() == VICTIM
    assert hub.body_hits() == [] and store.list() == []  # not one file was fetched


@pytest.mark.parametrize(
    "damage, why",
    [
        (lambda e: e.get("lfs") and e["lfs"].update(sha256="../../../../victim"), "LFS sha256 that is not 64 hex digits"),
        (lambda e: e.get("lfs") and e["lfs"].update(sha256="A" * 64), "LFS sha256 that is not 64 hex digits"),
        (lambda e: not e.get("lfs") and e.update(blobId="../x"), "blob id that is not 40 hex digits"),
        (lambda e: not e.get("lfs") and e.update(size=-5), "size that is not one"),
    ],
)
def test_a_checksum_or_size_that_is_not_one_is_refused(store, hub, tmp_path, damage, why):
    def hostile(body):
        for entry in body["siblings"]:
            damage(entry)
        return body

    hub.listing = hostile
    before = outside_files(tmp_path, store)
    with pytest.raises(Unavailable, match=why):
        pull_model(store, REPO)
    assert hub.body_hits() == [] and outside_files(tmp_path, store) == before and not list(store.root.glob(".*.partial/.parts/*"))


@pytest.mark.parametrize(
    "hostile, why",
    [
        (lambda body: {**body, "sha": "../../main"}, "commit '../../main' is not 40 hex digits"),
        (lambda body: [body], "not a JSON object"),
        (lambda body: {**body, "siblings": [{"size": 3}]}, "not one the hub writes"),
        (lambda body: {**body, "siblings": [{"rfilename": 7}]}, "not a name"),
    ],
)
def test_a_listing_that_is_no_listing_is_refused(store, hub, hostile, why):
    hub.listing = hostile
    with pytest.raises(Unavailable, match=why):
        pull_model(store, REPO)
    assert hub.body_hits() == [] and store.list() == []


def test_the_cli_says_the_listing_was_refused_in_one_line(koe, hub, files):
    hub.repos[REPO] = {**files, "../../../../../evil.txt": b"x"}
    r = koe("models", "pull", REPO, ok=False)
    assert r.exit_code != 0 and "refused the listing" in r.stderr and "Traceback" not in r.stderr
    assert not (koe.home.parent / "evil.txt").exists()


def test_repo_paths_are_checked_once_more_where_they_are_joined(tmp_path):
    """`inside` (used where a repo path meets a folder) refuses a path that a symbolic link inside the
    folder leads out of, beside everything `check_repo_path` refuses."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "sub").symlink_to(tmp_path)
    with pytest.raises(UnsafeListing, match="resolves outside"):
        inside(tmp_path / "folder", "sub/victim.txt")
    assert inside(tmp_path / "folder", "a/b.bin") == tmp_path / "folder" / "a" / "b.bin"
    assert check_repo_path("speech_tokenizer/model.safetensors") == "speech_tokenizer/model.safetensors"
    for bad in ("", "/etc/passwd", "..", "a/..", "a\\b", "a\x7fb", "a\u0085b", "C:x"):
        with pytest.raises(UnsafeListing):
            check_repo_path(bad)
