"""Fixtures the CLI test modules share: a clean KOE_HOME, the in-process `koe` runner and the tiny
random-weight model folders. A module loads them with `pytest_plugins = ["cli_fixtures"]` (as the
browser tests load `browser`)."""

from __future__ import annotations

import pytest
from fixtures_models import model_folder
from product_helpers import clean_koe_home, run_koe


@pytest.fixture(scope="session")
def cv_model(session_tmp):
    return model_folder(session_tmp, "custom_voice")


@pytest.fixture(scope="session")
def vd_model(session_tmp):
    return model_folder(session_tmp, "voice_design")


@pytest.fixture(scope="session")
def base_model(session_tmp):
    return model_folder(session_tmp, "base")


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A KOE_HOME of the test's own, with no user config, no KOE_* settings and no hub."""
    return clean_koe_home(tmp_path, monkeypatch)


@pytest.fixture
def koe():
    """`koe(*args, input=None)`: the CLI run in-process (typer's runner)."""
    return run_koe
