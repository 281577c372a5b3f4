"""Fish Speech S2 Pro (Fish Audio) for koe: the family's native port, in a package of its own under
the Fish Audio Research License (see this package's LICENSE), registered through `koe.families`."""
