"""OmniVoice fine-tuning, upstream's recipe (omnivoice 0.2.1's `omnivoice/training/` and its
`omnivoice/data/` pipeline on the padded SDPA path) on koe's own modules, bit for bit on the CPU in
float32: `objective` (the loss of one batch), `pipeline` (the sample processor's draws, the
length-grouped batches, the data loader's workers and their order), `shards` (upstream's
WebDataset layout), `data` (the clips, checked, and their audio tokens), `trainer` (the loop,
AdamW, the schedule, accumulation and clipping, upstream's checkpoints), `run` (a run on a model
folder, exported as a model folder).

    from koe.engines.omnivoice.finetune import Clip, TrainSettings, finetune
    finetune("OmniVoice/", [Clip(Path("a.wav"), "Hello.")], "mine/", TrainSettings(steps=1000, workers=1))
"""

from koe.engines.omnivoice.finetune.data import Clip
from koe.engines.omnivoice.finetune.run import Finetuned, finetune
from koe.engines.omnivoice.finetune.trainer import StepReport, TrainSettings

__all__ = ["Clip", "Finetuned", "StepReport", "TrainSettings", "finetune"]
