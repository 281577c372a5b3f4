"""koe's settings: `settings` reads them (defaults < koe.toml < environment < flags) and says where
each value came from; `edit` changes koe.toml one dotted key at a time (`koe config set`)."""
