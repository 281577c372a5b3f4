"""The `infer_v3` golden, upstream's side: `TTS.run` on koe's random folder(s) (infer_run.py).

<oracle python> tests/oracle_gpt_sovits/golden_infer_v3.py <folder> <out.npz>
"""

from __future__ import annotations

import sys
from pathlib import Path

from infer_run import main

if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]))
