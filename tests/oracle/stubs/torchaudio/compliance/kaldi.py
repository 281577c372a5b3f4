def fbank(*args, **kwargs):
    raise NotImplementedError("torchaudio is stubbed in the oracle venv")
