"""Model licences in the family kit: declared by each family's spec, shown by `koe models info`, `GET /v1/models`
and the web page, and, for a licence that needs acceptance, accepted once before a pull.

The built-in families' releases and folders carry their real licences (none needs acceptance). The acceptance flow is
driven against the fake hub (tests/hub_server.py) with a release under a test licence that needs it, listed by the
Qwen3-TTS spec for the test: a pull refuses (nothing looked up, nothing written) without an acceptance, asks on a
terminal, accepts with `--accept-license` / `accept_license=True`, records it in the store and does not ask again for
a model under the same licence; a client's request never accepts one. A damaged or hostile record counts as none.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fixtures_models import model_folder
from product_helpers import folder_files, install_fake_hub, koe_command, run_koe
from shared_folders import fixture as shared_fixture

from koe.engines import registry
from koe.engines.licenses import APACHE_2_0, CC_BY_NC_4_0, License
from koe.engines.spec import ReleasedModel
from koe.service.errors import LicenseNotAccepted
from koe.service.storage import Database
from koe.service.store.hub import pull_model
from koe.service.store.licenses import ACCEPTED_FILE, AcceptedLicenses, license_data
from koe.service.store.models import ModelStore
from koe.service.store.resolve import Downloads

PLUGIN = Path(__file__).resolve().parent / "plugins" / "koe_sine"
TERMS = License(
    "LicenseRef-koe-test-Model-Terms-1.0",
    "koe test model terms",
    "https://example.org/terms",
    needs_acceptance=True,
    summary="tests only; no redistribution",
)
REPO, OTHER = "someone/restricted", "someone/restricted-too"  # two releases under TERMS
WANTED = {
    "qwen3_tts": "Apache-2.0",
    "f5_tts": "CC-BY-NC-4.0",
    "voxcpm": "Apache-2.0",
    "omnivoice": "Apache-2.0",
    "cosyvoice": "Apache-2.0",
    "gpt_sovits": "MIT",
}


# -- declarations ------------------------------------------------------------------------------------
def test_every_built_in_family_is_declared_here():
    assert set(WANTED) == set(registry.FAMILIES), "add the new family's licence to WANTED"


@pytest.mark.parametrize("family", sorted(WANTED))
def test_each_family_declares_the_licence_of_its_releases_and_of_the_folders_it_describes(family, tmp_path):
    spec = registry.spec(family)
    assert spec.released
    for release in spec.released:
        assert release.license is not None and release.license.id == WANTED[family], release.ref
        assert not release.license.needs_acceptance and release.license.url.startswith("https://")
    described = registry.describe(shared_fixture(family)).license
    assert described is not None and described.id == WANTED[family]


def test_f5_tts_says_its_weights_are_non_commercial_and_its_code_mit():
    license = registry.spec("f5_tts").released[0].license
    assert (license.id, license.url) == (CC_BY_NC_4_0.id, CC_BY_NC_4_0.url)
    assert "non-commercial" in license.summary and "MIT" in license.summary


def test_the_toy_plugin_declares_a_licence_that_needs_acceptance(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGIN))
    from koe_sine import spec as sine  # torch-free; not registered in this process

    assert sine.LICENSE.needs_acceptance and sine.LICENSE.id.startswith("LicenseRef-") and sine.LICENSE.file == "TERMS.md"
    assert all(r.license == sine.LICENSE for r in sine.SPEC.released)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"id": ""}, "no SPDX identifier"),
        ({"id": "Apache 2.0"}, "no SPDX identifier"),
        ({"id": "../x"}, "no SPDX identifier"),
        ({"id": "LicenseRef-x", "needs_acceptance": True}, "say where it can be read"),
    ],
)
def test_a_malformed_declaration_is_refused_at_once(kwargs, words):
    with pytest.raises(ValueError, match=words):
        License(**kwargs)


def test_a_licence_as_json():
    assert APACHE_2_0.title == "Apache License 2.0 (Apache-2.0)" and License("MIT").title == "MIT"
    assert license_data(None) is None and "accepted_at" not in license_data(APACHE_2_0, object())
    assert license_data(TERMS)["needs_acceptance"] is True and "accepted_at" not in license_data(TERMS)  # no store given


# -- shown -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def custom_voice(tmp_path_factory):
    return model_folder(tmp_path_factory.getbasetemp(), "custom_voice")


@pytest.fixture
def koe(tmp_path, monkeypatch):
    return koe_command(tmp_path, monkeypatch)


def test_koe_models_info_shows_the_licence(koe, custom_voice):
    out = koe("models", "info", custom_voice).stdout
    assert "license: Apache License 2.0 (Apache-2.0) — https://www.apache.org/licenses/LICENSE-2.0" in out
    assert "license accepted" not in out  # nothing to accept
    data = json.loads(koe("models", "info", custom_voice, "--json").stdout)
    assert data["license"] == APACHE_2_0.to_dict()
    koe("models", "import", custom_voice, "--name", "cv", "--link")
    assert json.loads(koe("models", "list", "--json").stdout)[0]["license"]["id"] == "Apache-2.0"


def test_get_v1_models_carries_the_licence_and_the_openai_client_still_parses_it(tmp_path, custom_voice):
    import openai
    from fastapi.testclient import TestClient

    from koe.server import create_app
    from koe.service import KoeHome, load_settings

    home = KoeHome(load_settings(tmp_path, flags={}, environ={}))  # no default: nothing loads
    home.models.import_model(custom_voice, "cv", link=True)
    with TestClient(create_app(home)) as client:
        card = client.get("/v1/models").json()["data"][0]
        assert card["license"] == APACHE_2_0.to_dict() and client.get("/v1/models/cv").json()["license"]["id"] == "Apache-2.0"
        listed = openai.OpenAI(base_url=f"{client.base_url}/v1", api_key="unused", http_client=client, max_retries=0).models.list()
        assert [m.id for m in listed] == ["cv"]


# -- the record of acceptances -------------------------------------------------------------------------------
def test_an_acceptance_is_recorded_and_kept_beside_others(tmp_path):
    book = AcceptedLicenses(tmp_path)
    assert book.all() == {} and book.get(TERMS) is None and book.get(None) is None
    book.accept(TERMS, "pull of someone/restricted")
    other = License("LicenseRef-other", url="https://example.org/other", needs_acceptance=True)
    book.accept(other)
    found = AcceptedLicenses(tmp_path).get(TERMS)
    assert found.license == TERMS.id and found.by == "pull of someone/restricted" and found.accepted_at > 0
    assert set(book.all()) == {TERMS.id, other.id}
    assert json.loads((tmp_path / ACCEPTED_FILE).read_text())["accepted"][TERMS.id]["url"] == TERMS.url


HOSTILE = {
    "not json": b"{not json",
    "a list": b"[1, 2, 3]",
    "no entries": b'{"accepted": 7}',
    "bad entries": json.dumps(
        {"accepted": {TERMS.id: "yes", "a": {"accepted_at": "now"}, "b": {"accepted_at": True}, "c": {"accepted_at": None}, "": {"accepted_at": 1}}}
    ).encode(),
    "not a number": b'{"accepted": {"LicenseRef-koe-test-Model-Terms-1.0": {"accepted_at": NaN}}}',
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "huge": b'{"accepted": {}, "pad": "' + b"x" * (2 << 20) + b'"}',
    "binary": bytes(range(256)) * 8,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_damaged_or_hostile_record_counts_as_no_acceptance_and_is_replaced_by_the_next(tmp_path, name):
    (tmp_path / ACCEPTED_FILE).write_bytes(HOSTILE[name])
    book = AcceptedLicenses(tmp_path)
    assert book.get(TERMS) is None
    book.accept(TERMS)
    assert set(book.all()) == {TERMS.id}


def test_a_record_that_is_no_regular_file_counts_as_none(tmp_path):
    book = AcceptedLicenses(tmp_path)
    (tmp_path / ACCEPTED_FILE).mkdir()
    assert book.all() == {}
    os.rmdir(tmp_path / ACCEPTED_FILE)
    os.symlink("/dev/zero", tmp_path / ACCEPTED_FILE)  # never read through: it would not end
    assert book.all() == {}
    book.accept(TERMS)  # the link is replaced, /dev/zero untouched
    assert not (tmp_path / ACCEPTED_FILE).is_symlink() and set(book.all()) == {TERMS.id}
    if hasattr(os, "mkfifo"):
        os.unlink(tmp_path / ACCEPTED_FILE)
        os.mkfifo(tmp_path / ACCEPTED_FILE)  # opening it for reading would block
        assert book.all() == {}


# -- accepted once, before a pull ------------------------------------------------------------------------
@pytest.fixture
def hub(monkeypatch, custom_voice):
    qwen = registry.spec("qwen3_tts")
    extra = tuple(ReleasedModel(r, "custom_voice", "0b6", license=TERMS) for r in (REPO, OTHER))
    monkeypatch.setattr(qwen, "released", (*qwen.released, *extra))
    files = folder_files(custom_voice)
    hub = install_fake_hub(monkeypatch, {REPO: files, OTHER: files})
    yield hub
    hub.close()
    assert hub.internet == []


@pytest.fixture
def store(tmp_path):
    return ModelStore(tmp_path / "models", Database(tmp_path / "koe.db"))


def nothing_fetched(hub, store) -> bool:
    """The hub was not asked for anything, and the store holds no model and no partial download."""
    return hub.hits == [] and store.list() == [] and [p.name for p in store.root.iterdir() if p.name != ACCEPTED_FILE] == []


def test_a_pull_refuses_before_looking_anything_up_until_the_licence_is_accepted(hub, store):
    with pytest.raises(LicenseNotAccepted) as e:
        pull_model(store, REPO)
    assert e.value.status == 403 and TERMS.title in e.value.message and TERMS.url in e.value.message
    assert "--accept-license" in e.value.hint and "accept_license=True" in e.value.hint
    assert nothing_fetched(hub, store) and store.licenses.all() == {}
    asked = []
    with pytest.raises(LicenseNotAccepted):
        pull_model(store, REPO, ask_license=lambda license, release: asked.append((license, release.ref)) or False)  # "no"
    assert asked == [(TERMS, REPO)] and nothing_fetched(hub, store)


def test_an_accepted_licence_is_recorded_and_not_asked_again(hub, store):
    d = pull_model(store, REPO, accept_license=True)
    assert d.ok and d.license == TERMS and store.get("restricted").license == TERMS
    assert store.licenses.get(TERMS).by == f"pull of {REPO}"
    asked = []
    d = pull_model(store, OTHER, ask_license=lambda *a: asked.append(a) or False)  # another model under the same licence
    assert d.ok and asked == []


def test_a_yes_on_the_question_records_it(hub, store):
    assert pull_model(store, REPO, ask_license=lambda license, release: True).ok
    assert store.licenses.get(TERMS) is not None


def test_a_release_that_needs_no_acceptance_is_never_asked_about(hub, store, monkeypatch):
    qwen = registry.spec("qwen3_tts")
    others = tuple(r for r in qwen.released if r.repo_id != REPO)
    monkeypatch.setattr(qwen, "released", (*others, ReleasedModel(REPO, "custom_voice", "0b6", license=APACHE_2_0)))
    assert pull_model(store, REPO, ask_license=lambda *a: pytest.fail("asked")).ok and store.licenses.all() == {}


def test_koe_models_pull_refuses_off_a_terminal_without_the_flag(hub, koe):
    r = koe("models", "pull", REPO, ok=False)
    assert r.exit_code != 0 and "--accept-license" in r.stderr and "must be accepted" in r.stderr and "Traceback" not in r.output
    assert hub.hits == [] and not (koe.home / "models" / "restricted").exists()
    koe("models", "pull", REPO, "--accept-license")
    out = koe("models", "info", "restricted").stdout
    assert f"license: {TERMS.title} — {TERMS.url}" in out and "license terms: tests only; no redistribution" in out
    assert "license accepted: yes, " in out and f"(pull of {REPO})" in out
    assert json.loads(koe("models", "info", "restricted", "--json").stdout)["license"]["accepted_at"] > 0
    koe("models", "pull", OTHER)  # the same licence: accepted already, no flag needed


def test_koe_models_pull_asks_on_a_terminal(hub, koe, monkeypatch):
    monkeypatch.setattr("koe.cli.models.can_ask", lambda: True)
    r = run_koe("models", "pull", REPO, ok=False, input="n\n")
    assert r.exit_code != 0 and hub.hits == []
    assert TERMS.title in r.stderr and TERMS.url in r.stderr and "Key terms: tests only; no redistribution" in r.stderr and "Accept this licence?" in r.stderr
    r = run_koe("models", "pull", REPO, input="y\n")
    assert "accepted" in r.stderr
    assert "license accepted: yes" in koe("models", "info", "restricted").stdout


def test_koe_models_pull_help_names_the_flag(koe):
    assert "--accept-license" in koe("models", "pull", "--help").stdout


def test_koe_models_info_says_when_a_licence_is_not_accepted_yet(tmp_path):
    from koe.cli.models import license_rows

    rows = dict(license_rows(TERMS, AcceptedLicenses(tmp_path)))
    assert rows["license"] == f"{TERMS.title} — {TERMS.url}" and rows["license terms"] == TERMS.summary
    assert rows["license accepted"].startswith("not yet") and "--accept-license" in rows["license accepted"]
    assert dict(license_rows(None))["license"].startswith("not declared")


def test_a_first_use_download_needs_the_acceptance_too(hub, store):
    with pytest.raises(LicenseNotAccepted, match="must be accepted") as e:
        store.resolve(REPO)
    assert "accept_license=True" in e.value.hint and nothing_fetched(hub, store)
    ref = store.resolve(REPO, download=Downloads(True, accept_license=True))
    assert ref.installed and store.licenses.get(TERMS) is not None


def test_a_clients_request_never_accepts_a_licence(hub, store):
    client = Downloads(True, listed_only=True, accept_license=True)  # even if a caller set it
    with pytest.raises(LicenseNotAccepted) as e:
        store.resolve(REPO, allow_paths=False, download=client)
    assert "a request cannot accept a licence" in e.value.hint and f"koe models pull {REPO}" in e.value.hint
    assert nothing_fetched(hub, store)


def test_the_python_api_takes_accept_license(hub, tmp_path, monkeypatch):
    from koe.service.store.resolve import model_folder

    monkeypatch.setenv("KOE_HOME", str(tmp_path / "home"))
    with pytest.raises(LicenseNotAccepted):
        model_folder(REPO)
    assert hub.hits == []
    folder = model_folder(REPO, accept_license=True)
    assert (folder / "config.json").is_file() and folder.parent == tmp_path / "home" / "models"


def test_koe_load_passes_accept_license_on():
    import inspect

    import koe

    assert inspect.signature(koe.load).parameters["accept_license"].default is False
