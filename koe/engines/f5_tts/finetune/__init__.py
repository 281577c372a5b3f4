"""F5-TTS fine-tuning, upstream's recipe (f5-tts 1.1.22's `f5_tts/train/finetune_cli.py` and
`f5_tts/model/trainer.py`) on koe's own modules: `objective` is the conditional flow-matching loss
of one batch with upstream's random draws in upstream's order."""
