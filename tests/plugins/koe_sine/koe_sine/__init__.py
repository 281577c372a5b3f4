"""koe-sine: a toy model family for koe (a sine tone per word), registered through `koe.families`."""
