"""Drop-in for upstream IndexTTS 2.5's `indextts.infer_v2_5.IndexTTS2`, under upstream's module and class
names: code written for it changes only its import

    from indextts.infer_v2_5 import IndexTTS2      ->      from koe.compat.indextts_v2_5 import IndexTTS2

The class is `koe.compat.indextts.IndexTTS25` (the same object; that module's doc says what it takes).
Upstream 2.5 names its class `IndexTTS2`, as release 2's, in a module of its own: so does koe, so
that neither name shadows the other (`koe.compat.indextts.IndexTTS2` is release 2's drop-in).
"""

from koe.compat.indextts import IndexTTS25 as IndexTTS2

__all__ = ["IndexTTS2"]
