"""CosyVoice's benchmark models: random weights in the released layout, "tiny" or "real" (the released
sizes: Qwen2.5-0.5B's widths for the LM, the released flow and vocoder; float32 as released;
`koe.engines.cosyvoice.fixtures`), one folder per variant (the cases pick it), and their parameter
counts."""

from __future__ import annotations

from pathlib import Path

from koe.engines.benchmark import RandomModels

VARIANTS = ("CosyVoice2-0.5B", "Fun-CosyVoice3-0.5B-2512")
SIZES = ("tiny", "real")
FIXTURE_VERSION = 1
MODELS = RandomModels("CosyVoice", "cosyvoice", VARIANTS, SIZES, "koe.engines.cosyvoice.fixtures:write_random_model")
model_name, write_model = MODELS.model_name, MODELS.write_model
WEIGHTS = ("*.pt", "*.onnx")  # what a request reads (CosyVoice-BlankEN's safetensors only shape the LM: llm.pt replaces them)


def _elements(path: Path) -> int:
    import torch

    from koe.engines.cosyvoice.llm import TIED_HEAD

    state = torch.load(path, map_location="meta", weights_only=True, mmap=True)
    return sum(t.numel() for name, t in state.items() if hasattr(t, "numel") and name != TIED_HEAD)  # the tied head is the token embedding again


def parameter_counts(folder: Path) -> dict[str, int]:
    """Parameters of a CosyVoice folder's torch parts (the LM, the flow, the vocoder), from the files'
    shapes; the ONNX front end (CAM++, the S3 tokenizer) is counted by its bytes in `weights_bytes`."""
    folder = Path(folder)
    counts = {part: _elements(folder / f"{part}.pt") for part in ("llm", "flow", "hift")}
    counts["total"] = sum(counts.values())
    return counts
