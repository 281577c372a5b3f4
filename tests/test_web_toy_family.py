"""The web page at `/` with the toy family (tests/plugins/koe_sine, installed by `toy_family`): a real `koe serve`
whose only model is the plugin's, driven in headless Chromium (tests/browser.py). The page knows no family: its
model list, voices and option fields come from GET /v1/models, so a family in a package of its own appears there
as the built-ins do, and speaks."""

from __future__ import annotations

import pytest
from toy_family import start_sine_serve

pytest_plugins = ["browser", "toy_family"]


@pytest.fixture(scope="module")
def server(sine_site, sine_model, tmp_path_factory):
    """The page fixtures open the fixture named `server`: here `koe serve` with the sine model (the default)."""
    s = start_sine_serve(sine_site, sine_model, tmp_path_factory.mktemp("sine-web"))
    yield s
    s.stop()


def test_the_page_lists_the_plugin_model_its_voices_and_option_and_speaks_with_it(page, server):
    page.goto("/")
    page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    models = page.eval_on_selector_all("#speak-model option", "(os) => os.map((o) => [o.value, o.textContent])")
    assert [m for m, _ in models] == ["sine"] and dict(models)["sine"].startswith("sine — Sine")
    assert "random weights" in dict(models)["sine"]
    voices = page.eval_on_selector_all("#speak-voice option", "(os) => os.map((o) => o.value)")
    assert {"low", "high", "alloy", "hum"} <= set(voices)  # presets, OpenAI names (openai_voice), the library's clone
    page.locator("#speak-options-box").evaluate("(d) => { d.open = true; }")
    assert page.get_attribute("#speak-opt-pitch_shift", "min") == "-24" and page.get_attribute("#speak-opt-pitch_shift", "max") == "24"
    page.select_option("#speak-voice", "hum")
    page.fill("#speak-opt-pitch_shift", "12")
    page.fill("#speak-input", "Hello there.")
    page.fill("#speak-seed", "5")
    page.click("#speak-go")
    page.wait_for_function("() => document.querySelector('#speak-cancel').disabled", timeout=60_000)
    page.wait_for_function("() => document.querySelector('#speak-audio').readyState >= 1", timeout=15_000)
    assert page.evaluate("() => document.querySelector('#speak-audio').duration") == pytest.approx(0.4, abs=0.02)  # two words
    assert "seed 5" in page.text_content("#speak-metrics")
