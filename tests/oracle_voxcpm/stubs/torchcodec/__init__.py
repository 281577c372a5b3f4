"""A soundfile-backed stand-in for torchcodec, for the VoxCPM oracle only.

torchaudio 2.11's `torchaudio.load` is `load_with_torchcodec`: it imports
`torchcodec.decoders.AudioDecoder`, builds `AudioDecoder(uri)`, reads
`decoder.metadata.sample_rate` and `decoder.get_all_samples().data` (float32, shape
(channels, frames)), then slices frame_offset/num_frames and transposes for
channels_first=False itself. torchcodec's PyPI wheel needs FFmpeg's shared libraries and a
matching CUDA torch, neither of which the oracle has, so this package provides just that
surface, decoding with libsndfile (`soundfile.read(dtype="float32")`).

For WAV and FLAC this gives what FFmpeg's decoders give: integer PCM scaled by 1 / 2**(bits-1)
(16-bit: int / 32768), float PCM as stored, at the file's own sample rate (no resampling, no
down-mix). Upstream voxcpm reads its prompt audio through this path (VoxCPM 1.x's
`build_prompt_cache` / `_encode_wav`).
"""
