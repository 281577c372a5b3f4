"""A model's options as flags (`koe.cli.model_options`): `--NAME VALUE` exists where the model asked for
has option NAME, whatever its family; one it lacks is one clear line naming the flags it has.

Requests are caught at `Synthesizer.plan` (nothing is spoken), so every family's fixture runs fast.
"""

from __future__ import annotations

import pytest
from shared_folders import fixture as shared_fixture

from koe.cli.model_options import flag_name
from koe.engines import registry
from koe.service.errors import KoeError

pytest_plugins = ["cli_fixtures"]  # home, koe

FIXTURES = [(family, registry.spec(family).fixture_variants[0]) for family in registry.FAMILIES]


class Planned(KoeError):
    """Raised by the patched `Synthesizer.plan` once it has the request."""

    status = 418


@pytest.fixture(scope="module")
def folders():
    return {family: shared_fixture(family, variant) for family, variant in FIXTURES}


@pytest.fixture
def requests(monkeypatch):
    """The requests `koe speak` / `koe voices design` plan, caught before anything is spoken."""
    from koe.service.synthesis.synthesizer import Synthesizer

    seen = []

    def plan(self, request):
        seen.append(request)
        raise Planned("planned")

    monkeypatch.setattr(Synthesizer, "plan", plan)
    return seen


def options_of(family: str, folder):
    return registry.describe(folder).capabilities.options


def sample_value(option):
    """A value of `option` its schema accepts, as a flag's text."""
    if option.choices:
        return option.choices[0]
    if option.type == "int":
        return str(int(option.low if option.low is not None else 1) + (1 if option.low_open else 0))
    if option.type == "float":
        low = option.low if option.low is not None else 0.5
        return repr(float(low) + (0.25 if option.low_open or low == 0 else 0.0))
    return "text"


@pytest.mark.parametrize("family", list(registry.FAMILIES))
def test_every_option_of_every_family_is_a_flag(koe, home, folders, requests, family):
    """Each option the model declares is `--NAME VALUE` (a switch: `--NAME` / `--no-NAME`), except where the command has that flag itself."""
    own = {"--speed"}  # koe speak's own tempo flag: that option is reached with --opt
    args, want = [], {}
    for option in options_of(family, folders[family]).options:
        flag = flag_name(option.name)
        if flag in own:
            continue
        if option.type == "bool":
            args.append(f"--no-{option.name.replace('_', '-')}" if option.default else flag)
            want[option.name] = not option.default
        else:
            text = sample_value(option)
            args += [flag, text]
            want[option.name] = option.check(text if option.type == "str" else float(text))
    r = koe("speak", "Hello there.", "-m", folders[family], *args, ok=False)
    assert "planned" in r.stderr, r.output
    assert requests[-1].options == want and requests[-1].text == "Hello there."


def test_flags_are_read_wherever_they_stand(koe, home, folders, requests):
    cv = folders[registry.DEMO_FAMILY]
    koe("speak", "--temperature", "0.7", "Hello", "-m", cv, "--top-k=5", "--no-do-sample", "--seed", "3", ok=False)
    assert requests[-1].text == "Hello" and requests[-1].seed == 3
    assert requests[-1].options == {"temperature": 0.7, "top_k": 5, "do_sample": False}
    koe("speak", "-m", cv, "--do-sample", "Hello", ok=False)  # a switch takes no value: TEXT follows it
    assert requests[-1].text == "Hello" and requests[-1].options == {"do_sample": True}
    koe("speak", "-m", cv, "--temperature", "0.5", "--opt", "temperature=0.9", "--", "--dash", ok=False)  # --opt wins; after --, TEXT
    assert requests[-1].text == "--dash" and requests[-1].options == {"temperature": 0.9}
    koe("speak", "Hi", f"-m{cv}", "--repetition-penalty", "1.5", "--max-new-tokens", "1e2", ok=False)
    assert requests[-1].options == {"repetition_penalty": 1.5, "max_new_tokens": 100.0}
    koe("speak", "Hi", "-m", cv, "--temperature", "-1", ok=False)  # a negative number is a value (the plan's schema judges it)
    assert requests[-1].options == {"temperature": -1.0}


def test_the_universal_flags_keep_their_meaning(koe, home, folders, requests):
    for family, folder in folders.items():
        koe("speak", "Hi", "-m", folder, "--speed", "1.25", ok=False)
        assert requests[-1].speed == 1.25 and requests[-1].options == {}, family


@pytest.mark.parametrize("family", list(registry.FAMILIES))
def test_a_flag_the_model_lacks_is_one_line_naming_its_flags(koe, home, folders, requests, family):
    names = options_of(family, folders[family]).names
    other = next(n for f in registry.FAMILIES if f != family for n in options_of(f, folders[f]).names if n not in names)
    r = koe("speak", "Hi", "-m", folders[family], flag_name(other), "1", ok=False)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and not requests, r.output
    assert lines[0].startswith(f"error: no such option: {flag_name(other)} (the model ") and f"has no option {other!r}" in lines[0]
    for n in names:
        assert (f"--opt {n}=" if n == "speed" else flag_name(n)) in lines[0]
    assert "koe models info" in lines[0]


@pytest.mark.parametrize(
    "args, match",
    [
        (["--max-new-tokens", "abc"], "--max-new-tokens 'abc': must be a whole number"),
        (["--top-k"], "--top-k needs a value (int): --top-k VALUE"),
        (["--do-sample=maybe"], "--do-sample is a switch: give --do-sample or --no-do-sample"),
    ],
)
def test_bad_flag_values_are_one_clear_line(koe, home, folders, requests, args, match):
    r = koe("speak", "Hi", "-m", folders[registry.DEMO_FAMILY], *args, ok=False)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and match in lines[0], r.output


def test_voices_design_takes_the_model_flags_too(koe, home, folders, requests):
    koe("voices", "design", "deep", "-m", folders[registry.DEMO_FAMILY], "--description", "a deep voice", "--max-new-tokens", "16", ok=False)
    assert requests[-1].design == "a deep voice" and requests[-1].options == {"max_new_tokens": 16}


def test_help_says_model_options_are_flags(koe):
    for command in (["speak"], ["voices", "design"], ["voices", "prepare"]):
        page = " ".join(koe(*command, "--help").output.split())  # the help's lines joined, as wrapped at any width
        assert "--NAME VALUE" in page and "koe models info" in page, command
