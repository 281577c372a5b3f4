"""GPT-SoVITS (RVC-Boss/GPT-SoVITS, MIT): an AR transformer turns phonemes and BERT features into
semantic tokens, SoVITS turns them into a waveform conditioned on a reference clip (v3/v4: a CFM DiT
makes mel and a vocoder the waveform; v2Pro/ProPlus add a speaker-verification embedding). Under
construction: its modules and their parity tests land before its engine."""
