"""Upstream's side of the `chinese_v1` golden: v1's `text/chinese.py` (text_normalize, g2p with pypinyin,
no G2PW) and clean_text for `zh` with version v1 on the corpus. Run as `golden_chinese_v1.py <folder> <out.npz>`."""

import sys
from pathlib import Path

folder, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
sys.path.insert(0, str(Path(__file__).resolve().parent))
from front_end_oracle import record  # noqa: E402
from text_oracle import use_upstream_text  # noqa: E402

use_upstream_text(folder)
record(folder, out, "chinese", "zh", "v1", {})
