"""The import rules of docs/architecture: layers import only downwards, nothing imports transformers,
and the generic layers name no family.

A family's words are not listed here by hand: they come from the registered specs (every family
koe runs, plugins included): its name, its title, its variant names, and the names of the options
only it declares (`Capabilities.options` and `voice_options` of each of its fixtures), unless the
product itself defines that name (a `SpeechRequest` field or a setting, such as `speed`).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from shared_folders import fixture as shared_fixture

ROOT = Path(__file__).resolve().parent.parent / "koe"
# A module in a layer may import koe modules of these layers only.
ALLOWED = {
    "runtime": {"runtime"},
    "nn": {"runtime", "nn"},
    "text": {"runtime", "text"},
    "audio": {"runtime", "audio"},
    "engines": {"runtime", "nn", "text", "audio", "engines"},
    # the drop-ins resolve hub ids and store names as koe.load does (koe.service.store.resolve)
    "compat": {"runtime", "nn", "text", "audio", "engines", "service", "compat"},
    "service": {"runtime", "nn", "text", "audio", "engines", "service"},
    "server": {"runtime", "nn", "text", "audio", "engines", "service", "server"},
    "cli": {"runtime", "nn", "text", "audio", "engines", "service", "server", "cli", "bench"},
    "bench": {"runtime", "nn", "text", "audio", "engines", "compat", "bench"},
    # the top-level modules (koe/__init__.py, koe/train.py): the Python API over the service
    None: {"runtime", "engines", "service"},
}
GENERIC = ("service", "server", "cli", "bench")  # the layers that know families only through the contract
TOP_LEVEL = sorted(p for p in ROOT.glob("*.py"))

# Generic files that still name a family, and why; each entry leaves this list with its fix (a file
# listed here is not checked).
STILL_NAMING_FAMILIES: dict[str, str] = {}


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(module, line, at module level) for every import in a file."""
    tree = ast.parse(path.read_text(), str(path))
    top = {id(n) for n in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno, id(node) in top))
    return found


FILES = sorted(p for p in ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_layer_rules(path):
    rel = path.relative_to(ROOT)
    layer = rel.parts[0] if len(rel.parts) > 1 else None
    for module, line, _ in _imports(path):
        root = module.split(".")[0]
        assert root not in ("transformers", "accelerate", "qwen_tts"), f"{rel}:{line} imports {module}"
        if module.startswith("koe.") and layer in ALLOWED:
            target = module.split(".")[1]
            assert target in ALLOWED[layer], f"{rel}:{line}: {f'layer {layer!r}' if layer else 'a top-level module'} must not import koe.{target}"


def test_service_imports_no_torch_at_module_level():
    for path in sorted((ROOT / "service").rglob("*.py")) + sorted((ROOT / "cli").rglob("*.py")) + TOP_LEVEL:
        for module, line, top in _imports(path):
            if top:
                assert module.split(".")[0] != "torch", f"{path.relative_to(ROOT)}:{line} imports torch at module level"


def test_importing_koe_loads_neither_torch_nor_transformers():
    code = "import sys, koe; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


# -- a family's words, from the registered specs ---------------------------------------------------


def family_words() -> dict[str, str]:
    """word -> the family it belongs to: each family's name, title and variant names (a variant
    that is one plain word, such as "base", is too common to be one family's), and the options only
    one family declares and the product does not name itself."""
    from koe.engines import registry
    from koe.service.config.settings import Settings
    from koe.service.synthesis.requests import SpeechRequest

    product = {f.name for f in fields(SpeechRequest)} | set(_setting_keys(Settings))
    product |= {"duration"}  # the product's own word too (an encoded file's duration), also OmniVoice's option
    words: dict[str, str] = {}
    owners: dict[str, set[str]] = {}
    for family in registry.families():
        spec = registry.spec(family)
        words[family] = family
        words[spec.title] = family
        for variant in spec.fixture_variants:
            caps = registry.describe(shared_fixture(family, variant)).capabilities
            if not re.fullmatch(r"[a-z]+", caps.variant):
                words[caps.variant] = family
            for option in (*caps.options.options, *caps.voice_options.options):
                owners.setdefault(option.name, set()).add(family)
    for name, families in owners.items():
        if len(families) == 1 and name not in product:
            words[name] = next(iter(families))
    return words


def _setting_keys(model) -> list[str]:
    keys = []
    for name, f in model.model_fields.items():
        keys.append(name)
        if isinstance(f.annotation, type) and hasattr(f.annotation, "model_fields"):
            keys += _setting_keys(f.annotation)
    return keys


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes (they may name a family by way of example; code may not)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def _code_words(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every name and string in the file's code: identifiers, attributes, arguments,
    keywords and string constants; docstrings and comments are prose, not code."""
    tree = ast.parse(path.read_text(), str(path))
    prose = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            found.append((node.lineno, node.attr))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append((node.lineno, node.name))
        elif isinstance(node, ast.arg):
            found.append((node.lineno, node.arg))
        elif isinstance(node, ast.keyword) and node.arg:
            found.append((node.value.lineno, node.arg))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            found.append((node.lineno, node.value))
    return found


def _pattern(word: str) -> re.Pattern:
    """`word` standing alone (not inside a longer identifier), also as a flag (--nfe-step), any case."""
    forms = {re.escape(word), re.escape(word.replace("_", "-"))}
    return re.compile(rf"(?<![A-Za-z0-9_])(?:{'|'.join(sorted(forms))})(?![A-Za-z0-9_])", re.IGNORECASE)


def generic_files() -> list[Path]:
    return [p for layer in GENERIC for p in sorted((ROOT / layer).rglob("*.py"))] + TOP_LEVEL


@pytest.fixture(scope="module")
def words() -> dict[str, str]:
    return family_words()


@pytest.mark.parametrize("path", generic_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_generic_code_names_no_family(path, words):
    """service, server, cli, bench and the top-level modules reach families through the contract
    (koe.engines.base/spec/registry/..., never koe.engines.<family>), and their code says no family's
    name, title, variant or own option."""
    rel = path.relative_to(ROOT)
    from koe.engines import registry

    if str(rel) in STILL_NAMING_FAMILIES:
        pytest.skip(f"{rel} still names a family: {STILL_NAMING_FAMILIES[str(rel)]}")
    problems = []
    for module, line, _ in _imports(path):
        parts = module.split(".")
        if parts[:2] == ["koe", "engines"] and len(parts) > 2 and parts[2] in registry.families():
            problems.append(f"{rel}:{line} imports {module}: use the engine contract (koe.engines.base, spec, registry, ...)")
    patterns = [(word, family, _pattern(word)) for word, family in words.items()]
    for line, text in _code_words(path):
        for word, family, pattern in patterns:
            if pattern.search(text):
                problems.append(f"{rel}:{line} names {family}'s {word!r}: {text[:80]!r}")
    assert not problems, "\n".join(problems)


def test_the_family_words_come_from_the_specs(words):
    from koe.engines import registry

    for family in registry.families():
        assert words[family] == family and words[registry.spec(family).title] == family
    assert "speed" not in words  # a family option the product names itself (SpeechRequest.speed) is everyone's
    assert _pattern("nfe_step").search("--nfe-step 16") and not _pattern("top_k").search("subtalker_top_k_x")
