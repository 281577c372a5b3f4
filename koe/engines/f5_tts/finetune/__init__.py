"""F5-TTS fine-tuning, upstream's recipe (f5-tts 1.1.22's `f5_tts/train/finetune_cli.py` and
`f5_tts/model/trainer.py`) on koe's own modules, bit for bit on the CPU in float32:
`objective` (the loss of one batch), `batches` (batches by frames, their order), `data` (what
each clip gives), `trainer` (the loop, the EMA, upstream's checkpoints), `run` (a run on a model
folder, exported as a model folder).

    from koe.engines.f5_tts.finetune import Clip, TrainSettings, finetune
    finetune("F5TTS_v1_Base/", [Clip("a.wav", "Hello.")], "mine/", TrainSettings(epochs=10))
"""

from koe.engines.f5_tts.finetune.data import Clip
from koe.engines.f5_tts.finetune.run import Finetuned, finetune
from koe.engines.f5_tts.finetune.trainer import StepReport, TrainSettings

__all__ = ["Clip", "Finetuned", "StepReport", "TrainSettings", "finetune"]
