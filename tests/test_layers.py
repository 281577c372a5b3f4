"""The import rules of docs/architecture: layers import only downwards, and nothing imports transformers."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "koe"
# A module in a layer may import koe modules of these layers only.
ALLOWED = {
    "runtime": {"runtime"},
    "nn": {"runtime", "nn"},
    "text": {"runtime", "text"},
    "audio": {"runtime", "audio"},
    "engines": {"runtime", "nn", "text", "audio", "engines"},
    # the drop-ins resolve hub ids and store names as koe.load does (koe.service.resolve)
    "compat": {"runtime", "nn", "text", "audio", "engines", "service", "compat"},
    "service": {"runtime", "nn", "text", "audio", "engines", "service"},
    "server": {"runtime", "nn", "text", "audio", "engines", "service", "server"},
    "cli": {"runtime", "nn", "text", "audio", "engines", "service", "server", "cli", "bench"},
    "bench": {"runtime", "nn", "text", "audio", "engines", "compat", "bench"},
}


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
        if layer and module.startswith("koe.") and layer in ALLOWED:
            target = module.split(".")[1]
            assert target in ALLOWED[layer], f"{rel}:{line}: layer '{layer}' must not import koe.{target}"


def test_service_imports_no_torch_at_module_level():
    for path in sorted((ROOT / "service").rglob("*.py")) + sorted((ROOT / "cli").rglob("*.py")):
        for module, line, top in _imports(path):
            if top:
                assert module.split(".")[0] != "torch", f"{path.relative_to(ROOT)}:{line} imports torch at module level"


def test_importing_koe_loads_neither_torch_nor_transformers():
    code = "import sys, koe; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


# Names of one family's internals; the shells and the service know families only through the contract.
FAMILY_WORDS = ("subtalker", "custom_voice", "voice_design", "0b6", "1b7", "12.5", "spk_id", "codec_language_id", "first_chunk_frames")


@pytest.mark.parametrize("layer", ["service", "server", "cli"])
def test_shells_name_no_family_internals(layer):
    for path in sorted((ROOT / layer).rglob("*.py")):
        text = path.read_text()
        for word in FAMILY_WORDS:
            assert word not in text, f"{path.relative_to(ROOT)} names {word!r}"
        for module, line, _ in _imports(path):
            parts = module.split(".")
            assert not (parts[:2] == ["koe", "engines"] and len(parts) > 2 and parts[2] not in ("base", "spec", "registry", "pipeline")), (
                f"{path.relative_to(ROOT)}:{line} imports {module}: use the engine contract (koe.engines.base/spec/registry)"
            )
