"""Speaker fine-tuning for Qwen3-TTS: a Base model and a person's recordings -> a CustomVoice model.

The recipe is upstream's (QwenLM/Qwen3-TTS `finetuning/`: `prepare_data.py`, `dataset.py`,
`sft_12hz.py`), re-implemented on koe's own modules so that on the CPU in float32 the same seed
gives the same weights bit for bit. Three stages, each leaving an artefact on disk:

  data.py       read a dataset (upstream's JSONL, a CSV, or a folder of .wav + .txt pairs) and
                check it before anything runs; prepare: the codec's codes of every clip, in
                upstream's prepared JSONL (`audio`, `text`, `ref_audio`, `audio_codes`)
  batch.py      one training example (text ids, codes, reference mels) and the collate that lays
                a batch out as upstream's does (text and codec channels, masks, labels)
  objective.py  the loss: talker (codebook 0) + 0.3 x code predictor (codebooks 1..15)
  trainer.py    the loop: data order, gradient accumulation, clipping, AdamW, checkpoints, resume
  export.py     a CustomVoice model folder in the released layout with the new speaker
"""
