"""Speaking a request: plan it, run it on a loaded model, encode what it makes.

`requests` is what a caller asks for and gets back; `plan` checks a request against the model's
description before anything loads; `cache` keeps the loaded models; `synthesizer` runs a request
(voice prompt, engine, encoder, history row); `scheduler` queues and micro-batches the server's
requests; `encode` and `tempo` turn samples into a format, at a speed.
"""
