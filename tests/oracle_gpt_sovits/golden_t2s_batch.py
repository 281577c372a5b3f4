"""The `t2s_batch` golden, upstream's side: the AR model's batched decoding
(`infer_panel_batch_infer`, `TTS.run(parallel_infer=True)`, its default); see t2s_oracle.py.

    <oracle python> tests/oracle_gpt_sovits/golden_t2s_batch.py <folder> <out.npz>
"""

import sys
from pathlib import Path

from t2s_oracle import main

if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), "infer_panel_batch_infer")
