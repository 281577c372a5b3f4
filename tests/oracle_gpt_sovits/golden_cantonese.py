"""Upstream's side of the `cantonese` golden: `text/cantonese.py` (text_normalize, g2p through
ToJyutping) and clean_text for `yue` (v2) on the corpus. Run as `golden_cantonese.py <folder> <out.npz>`."""

import sys
from pathlib import Path

folder, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
sys.path.insert(0, str(Path(__file__).resolve().parent))
from front_end_oracle import record  # noqa: E402
from text_oracle import use_upstream_text  # noqa: E402

use_upstream_text(folder)
record(folder, out, "cantonese", "yue", "v2", {})
