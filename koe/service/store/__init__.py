"""The model store: models under `KOE_HOME/models/` and how a model argument becomes one.

`models` keeps the store (names, folders, the family each holds, read from files alone);
`resolve` turns a `--model`, `koe.load(...)` or a request's `model` into a model folder (the
store, a folder path, the Hugging Face cache, a download); `hub` is `koe models pull` and
`download` its resumable, checksummed transfers.
"""
