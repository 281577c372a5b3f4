"""A soundfile-backed stand-in for torchcodec, for the CosyVoice oracle only.

torchaudio 2.11's `torchaudio.load` (which upstream's `load_wav` calls for prompt and source clips)
goes through `torchcodec.decoders.AudioDecoder`: it reads `decoder.metadata.sample_rate` and
`decoder.get_all_samples().data` (float32, (channels, frames)). torchcodec's PyPI wheel needs
FFmpeg's shared libraries and a CUDA torch, which the oracle has neither of, so this package gives
that surface alone, decoding with libsndfile: for WAV and FLAC, what FFmpeg gives (integer PCM
scaled by 1 / 2**(bits-1), float PCM as stored, the file's own rate and channels).
"""
