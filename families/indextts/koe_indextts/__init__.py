"""IndexTTS (bilibili) for koe: the family's native port, in a package of its own under the
bilibili Model Use License (see this package's LICENSE), registered through `koe.families`."""
