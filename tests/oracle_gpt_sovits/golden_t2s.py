"""The `t2s` golden, upstream's side: the AR model decoded serially (`infer_panel_naive_batched`,
`TTS.run(parallel_infer=False)`); see t2s_oracle.py.

    <oracle python> tests/oracle_gpt_sovits/golden_t2s.py <folder> <out.npz>
"""

import sys
from pathlib import Path

from t2s_oracle import main

if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), "infer_panel_naive_batched")
