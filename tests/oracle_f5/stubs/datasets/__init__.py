"""Stand-in for `datasets`: f5_tts.model.dataset imports these names; inference never uses them."""


class Dataset:  # noqa: D101
    pass


def load_from_disk(*args, **kwargs):
    raise RuntimeError("datasets is stubbed in the F5-TTS oracle venv (inference only)")
