"""The family table: plugins through the `koe.families` entry point, and each fixture claimed by one spec.

A plugin here is a real installed package as importlib.metadata sees one: a module and a
`*.dist-info` folder (METADATA + entry_points.txt) in a folder put on sys.path.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from koe.engines import registry

TOY_SPEC = """
from pathlib import Path

from koe.engines.base import Capabilities, OptionsSchema
from koe.engines.spec import ModelDescription, ModelInfo


class ToySpec:
    family = "{family}"
    title = "Toy"
    engine = "{module}.spec:ToySpec"
    released = ()
    fixture = "{module}.spec:write"
    fixture_variants = ("toy",)

    def probe(self, folder):
        return ModelInfo(self.family, "toy", "tiny") if (Path(folder) / "toy.json").is_file() else None

    def describe(self, folder):
        caps = Capabilities(self.family, "toy", frozenset({{"none"}}), ("auto",), 8000, options=OptionsSchema())
        return ModelDescription(self.probe(folder), caps, ("toy.json",), (), (), "float32", "tests")

    def openai_voice(self, name, capabilities):
        return None


def write(folder, variant, size="tiny"):
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / "toy.json").write_text("{{}}")
    return Path(folder)


SPEC = ToySpec()
"""


def install(root: Path, dist: str, entries: dict[str, str], module: str | None = None, family: str | None = None) -> None:
    """A package `dist` in `root`: its module (a toy spec of `family`) and its entry points in group koe.families."""
    if module is not None:
        (root / module).mkdir(parents=True)
        (root / module / "__init__.py").write_text("")
        (root / module / "spec.py").write_text(TOY_SPEC.format(family=family, module=module))
    info = root / f"{dist.replace('-', '_')}-0.1.dist-info"  # the normalised name, as pip writes it
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[koe.families]\n{lines}")


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path to install packages into; the registry reads the plugins again after the test."""
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    registry.refresh()
    yield root
    monkeypatch.undo()
    for name in [m for m in sys.modules if m.startswith("koe_toy")]:
        del sys.modules[name]
    registry.refresh()


def test_a_plugin_family_is_found_through_its_entry_point(site, tmp_path):
    install(site, "koe-toy", {"toy": "koe_toy.spec:SPEC"}, module="koe_toy", family="toy")
    registry.refresh()
    assert list(registry.families())[: len(registry.FAMILIES)] == list(registry.FAMILIES)  # built-ins first
    assert registry.families()["toy"] == "koe_toy.spec:SPEC"
    assert registry.spec("toy").title == "Toy" and registry.spec("toy") in registry.specs()
    folder = registry.write_fixture(tmp_path / "m", "toy")
    assert registry.detect(folder) == registry.spec("toy").probe(folder)
    assert registry.describe(folder).capabilities.family == "toy"


def test_without_the_package_the_family_is_gone(site):
    with pytest.raises(registry.UnknownModelError, match="unknown model family 'toy'"):
        registry.spec("toy")
    assert "toy" not in registry.families()


@pytest.mark.parametrize(
    "entries, module, family, reason",
    [
        ({"toy": "koe_toy_missing.spec:SPEC"}, None, None, r"does not import: ModuleNotFoundError"),
        ({"toy": "koe_toy_a.spec"}, "koe_toy_a", "toy", r"give 'package.module:SPEC'"),
        ({"toy": "koe_toy_b.spec:write"}, "koe_toy_b", "toy", r"is not a family spec: it has no family, title"),
        ({"toy": "koe_toy_c.spec:SPEC"}, "koe_toy_c", "other", r"is a spec of family 'other': name the entry point 'other'"),
    ],
)
def test_a_broken_plugin_is_a_clear_error_when_asked_for_and_skipped_otherwise(site, tmp_path, caplog, entries, module, family, reason):
    install(site, "koe-toy", entries, module=module, family=family)
    registry.refresh()
    with pytest.raises(registry.FamilyPluginError, match=reason):
        registry.spec("toy")
    with caplog.at_level(logging.WARNING, logger="koe.engines.registry"):
        assert [s.family for s in registry.specs()] == [f for f in registry.families() if f != "toy"]  # the others, plugins installed here too
        registry.specs()
    skipped = [r.getMessage() for r in caplog.records if "family plugin skipped" in r.getMessage()]
    assert len(skipped) == 1, skipped  # once, not at every look-up
    qwen = registry.write_fixture(tmp_path / "q")  # the built-ins work on
    assert registry.detect(qwen).family == registry.DEMO_FAMILY


def test_a_plugin_cannot_take_a_built_in_family_name(site, caplog):
    install(site, "koe-toy", {registry.DEMO_FAMILY: "koe_toy_d.spec:SPEC"}, module="koe_toy_d", family=registry.DEMO_FAMILY)
    registry.refresh()
    with caplog.at_level(logging.WARNING, logger="koe.engines.registry"):
        assert registry.families()[registry.DEMO_FAMILY] == registry.FAMILIES[registry.DEMO_FAMILY]
    assert "names the built-in family" in caplog.text and "koe-toy 0.1" in caplog.text
    assert "koe_toy_d" not in sys.modules


def test_two_plugins_with_one_name_are_both_refused(site):
    install(site, "koe-toy-one", {"toy": "koe_toy_e.spec:SPEC"}, module="koe_toy_e", family="toy")
    install(site, "koe-toy-two", {"toy": "koe_toy_f.spec:SPEC"}, module="koe_toy_f", family="toy")
    registry.refresh()
    assert "toy" not in registry.families()
    with pytest.raises(registry.FamilyPluginError, match=r"registered twice: by .*koe-toy-(one|two) 0.1.* and by .*koe-toy-(one|two) 0.1"):
        registry.spec("toy")


FIXTURES = [(family, variant) for family in registry.FAMILIES for variant in registry.spec(family).fixture_variants]


@pytest.mark.parametrize("family, variant", FIXTURES, ids=[f"{f}-{v}" for f, v in FIXTURES])
def test_each_fixture_is_claimed_by_exactly_one_spec(tmp_path, family, variant):
    """`detect` takes the first spec that claims a folder: a fixture two probes claim would make the order of the table matter."""
    folder = registry.write_fixture(tmp_path / "m", family, variant)
    claims = [s.family for s in registry.specs() if s.probe(folder) is not None]
    assert claims == [family]
    assert registry.detect(folder).family == family


@pytest.mark.parametrize("family, variant", FIXTURES, ids=[f"{f}-{v}" for f, v in FIXTURES])
def test_a_declared_length_option_is_one_of_the_model_s_options(tmp_path, family, variant):
    """`Capabilities.length_option` (what `koe demo` caps a random-weight model with) names an int option the model has."""
    caps = registry.describe(registry.write_fixture(tmp_path / "m", family, variant)).capabilities
    if caps.length_option:
        assert caps.options.get(caps.length_option) is not None and caps.options.get(caps.length_option).type == "int"
