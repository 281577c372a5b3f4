"""Upstream F5-TTS fine-tuning (`f5_tts/train/finetune_cli.py --finetune --pretrain CKPT`, its
`Trainer`), for parity tests.

Job: {"model": folder, "clips": [{"audio", "text"}], "seed", "settings": {the Trainer's arguments:
epochs, learning_rate, num_warmup_updates, batch_size_per_gpu, max_samples,
grad_accumulation_steps, max_grad_norm, save_per_updates, last_per_updates}}.

As the script does: the folder's checkpoint copied into the run's checkpoint folder as
`pretrained_<name>` (the Trainer loads it into the model and its EMA), the model built from the
folder's arch and vocab.txt (the "custom" tokenizer), batches by frames (`batch_size_type="frame"`)
shuffled with `resumable_with_seed=666`. The data is what `prepare_csv_wavs.py` makes of the clips:
rows of audio path, `convert_char_to_pinyin([text])[0]` and soundfile's duration, read through
upstream's `CustomDataset` (the mel made per item from the file, as in training). Torch and
Python's `random` are seeded with `seed` right before `trainer.train(...)`; the data loader runs
one worker process (upstream asks for persistent workers).

Writes `loss`, `grad_norm` and `lr` (the one the step's update uses), one per step, and the final
`model_last.pt`'s `model.<name>`, `ema.<name>`, `optimizer.<index>.<state>`; info: the updates,
the checkpoint files written and the scheduler's state.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from common import read_job, use_soundfile_loader, write_results


def main() -> None:
    job, out = read_job()
    use_soundfile_loader()
    import random

    import soundfile as sf
    import yaml
    from f5_tts.model import CFM, DiT, Trainer
    from f5_tts.model.dataset import CustomDataset
    from f5_tts.model.utils import convert_char_to_pinyin, get_tokenizer

    folder = Path(job["model"])
    arch = yaml.safe_load((folder / "config.yaml").read_text())["model"]["arch"]
    vocab_char_map, vocab_size = get_tokenizer(str(folder / "vocab.txt"), "custom")
    mel_spec_kwargs = dict(n_fft=1024, hop_length=256, win_length=1024, n_mel_channels=100, target_sample_rate=24000, mel_spec_type="vocos")
    model = CFM(transformer=DiT(**arch, text_num_embeds=vocab_size, mel_dim=100), mel_spec_kwargs=mel_spec_kwargs, vocab_char_map=vocab_char_map)

    checkpoints = out / "ckpts"
    checkpoints.mkdir()
    pretrained = next(p for p in sorted(folder.iterdir()) if p.name.startswith("model_"))
    shutil.copy2(pretrained, checkpoints / f"pretrained_{pretrained.name}")

    s = job["settings"]
    trainer = Trainer(
        model,
        s["epochs"],
        s["learning_rate"],
        num_warmup_updates=s["num_warmup_updates"],
        save_per_updates=s["save_per_updates"],
        keep_last_n_checkpoints=-1,
        checkpoint_path=str(checkpoints),
        batch_size_per_gpu=s["batch_size_per_gpu"],
        batch_size_type="frame",
        max_samples=s["max_samples"],
        grad_accumulation_steps=s["grad_accumulation_steps"],
        max_grad_norm=s["max_grad_norm"],
        logger=None,
        last_per_updates=s["last_per_updates"],
    )

    losses, norms, lrs = [], [], []
    forward = CFM.forward

    def recorded_forward(self, *args, **kwargs):
        lrs.append(trainer.optimizer.param_groups[0]["lr"])  # what this step's update uses
        loss, cond, pred = forward(self, *args, **kwargs)
        losses.append(loss.detach().clone())
        return loss, cond, pred

    CFM.forward = recorded_forward
    clip = trainer.accelerator.clip_grad_norm_

    def recorded_clip(*args, **kwargs):
        norm = clip(*args, **kwargs)
        norms.append(norm.detach().clone())
        return norm

    trainer.accelerator.clip_grad_norm_ = recorded_clip

    texts = convert_char_to_pinyin([c["text"] for c in job["clips"]], polyphone=True)
    rows = [{"audio_path": c["audio"], "text": t, "duration": sf.info(c["audio"]).duration} for c, t in zip(job["clips"], texts)]
    dataset = CustomDataset(rows, durations=[r["duration"] for r in rows], **mel_spec_kwargs)

    torch.manual_seed(job["seed"])
    random.seed(job["seed"])
    trainer.train(dataset, num_workers=1, resumable_with_seed=666)

    last = torch.load(checkpoints / "model_last.pt", weights_only=True, map_location="cpu")
    tensors = {"loss": torch.stack(losses), "grad_norm": torch.stack(norms), "lr": torch.tensor(lrs, dtype=torch.float64)}
    tensors.update({f"model.{k}": v for k, v in last["model_state_dict"].items()})
    tensors.update({f"ema.{k}": v for k, v in last["ema_model_state_dict"].items()})
    for index, state in last["optimizer_state_dict"]["state"].items():
        tensors.update({f"optimizer.{index}.{k}": v for k, v in state.items()})
    info = {
        "update": last["update"],
        "files": sorted(p.name for p in checkpoints.iterdir()),
        "scheduler": {k: v for k, v in last["scheduler_state_dict"].items() if k != "_schedulers"},
    }
    write_results(out, tensors, info)


if __name__ == "__main__":
    main()
