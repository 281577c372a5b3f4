"""`koe train ...`: fine-tune a model on recordings (`speaker`: a new preset speaker; `finetune`: the model itself; `lora`: adapters on it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from koe.cli.common import command, err, fail, note, open_home, out

app = typer.Typer(
    help="Fine-tune a model on recordings: `speaker` (a new preset speaker), `finetune` (the model itself) or `lora` (adapters on it), as its family trains (`koe models info` says which).",
    no_args_is_help=True,
)


class TrainProgress:
    """The run's reporter: notes, a bar for preparing, a bar per epoch with the loss (on a terminal);
    a line per epoch otherwise. Every batch is in OUT/training/train.log either way."""

    def __init__(self, show: bool) -> None:
        self.show = show
        self.progress = None  # a rich Progress while a bar is drawn
        self.task = None
        self.epoch: int | None = None
        self.epoch_losses: list[float] = []

    def note(self, message: str) -> None:
        note(message)

    def _bar(self, description: str, total: int) -> None:
        self.close()
        if self.show:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[loss]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=err,
                transient=False,
            )
            self.progress.start()
            self.task = self.progress.add_task(description, total=total, loss="")

    def prepare(self, done: int, total: int) -> None:
        if done == 0:
            err.print(f"[dim]preparing {total} clips (the codec's codes)...[/]") if not self.show else self._bar("prepare", total)
        elif self.progress is not None:
            self.progress.update(self.task, completed=done)

    def step(self, r) -> None:
        if r.epoch != self.epoch:
            self.epoch, self.epoch_losses = r.epoch, []
            self._bar(f"epoch {r.epoch + 1}/{r.epochs}", r.batches)
        self.epoch_losses.append(r.loss)
        if self.progress is not None:
            self.progress.update(self.task, completed=r.batch, loss=f"loss {r.loss:.4f}")
        if r.batch == r.batches and not self.show:
            mean = sum(self.epoch_losses) / len(self.epoch_losses)
            err.print(f"epoch {r.epoch + 1}/{r.epochs}: {r.batches} batches, mean loss {mean:.4f}, {r.optimizer_steps} optimizer steps so far")

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def _model_folder(spec: str) -> Path:
    from koe.service.store.resolve import downloads_for

    home = open_home()
    try:
        return home.models.resolve(spec, download=downloads_for(home.settings, client=False)).path
    finally:
        home.close()


@app.command("speaker")
@command
def speaker(
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="The model to start from (one `koe models info` says trains): a store name, a folder, or a hub id (OWNER/NAME).",
            show_default=False,
        ),
    ],
    data: Annotated[
        Path,
        typer.Option(
            "--data",
            help="The recordings: upstream's JSONL (audio, text, ref_audio), a CSV with a header (audio, text[, ref_audio]), or a folder of NAME.wav + NAME.txt pairs.",
            show_default=False,
        ),
    ],
    name: Annotated[str, typer.Option("--speaker", help="The new preset's name (letters, digits, _ or -; saved in lower case).", show_default=False)],
    out_dir: Annotated[
        Path, typer.Option("--out", help="The model folder to make (OUT/training/ keeps the run: prepared data, log, checkpoint).", show_default=False)
    ],
    ref: Annotated[Path | None, typer.Option("--ref", help="The reference clip for rows without ref_audio (default: the data's first).")] = None,
    epochs: Annotated[int, typer.Option("--epochs", help="Passes over the data.")] = 3,
    lr: Annotated[float, typer.Option("--lr", help="AdamW's learning rate (constant).")] = 2e-5,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Clips per batch.")] = 2,
    grad_accum: Annotated[int, typer.Option("--grad-accum", help="Batches per optimizer step (upstream's accelerate set-up: 4).")] = 4,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the data order (the same seed: the same weights).")] = 0,
    precision: Annotated[
        str,
        typer.Option(
            "--precision", help="float32 (exact: upstream's bits on the CPU) or bfloat16 (upstream's own recipe: bf16 weights and autocast; half the memory)."
        ),
    ] = "float32",
    gradient_checkpointing: Annotated[
        bool, typer.Option("--gradient-checkpointing", help="Recompute activations in the backward pass: less memory, same results.")
    ] = False,
    offload_optimizer: Annotated[bool, typer.Option("--offload-optimizer", help="Keep AdamW's state on the CPU when training on a GPU.")] = False,
    save_every: Annotated[int, typer.Option("--save-every", help="Also checkpoint every N optimizer steps (0: after each epoch only).")] = 0,
    lora_rank: Annotated[
        int, typer.Option("--lora-rank", help="Train rank-N LoRA adapters instead of every weight (not upstream's recipe; merged at export; 0: off).")
    ] = 0,
    lora_alpha: Annotated[
        float | None, typer.Option("--lora-alpha", help="The adapters' scale is alpha / rank (default: 2 x rank).", show_default=False)
    ] = None,
    device: Annotated[str | None, typer.Option("--device", help="cpu, cuda or cuda:N (default: cuda when there is one).")] = None,
    export_dtype: Annotated[
        str | None, typer.Option("--export-dtype", help="dtype of the exported weights: float32, bfloat16 or float16 (default: as trained).")
    ] = None,
    stop_after: Annotated[str | None, typer.Option("--stop-after", help="Stop after a stage: prepare or train (run again without it to go on).")] = None,
    progress: Annotated[bool | None, typer.Option("--progress/--no-progress", help="Progress bars (default: on a terminal).", show_default=False)] = None,
) -> None:
    """Fine-tune a Base model into a model whose preset speaker is NAME, from their recordings.

    Upstream Qwen3-TTS's recipe step for step: on the CPU in float32 the same seed gives its weights bit for bit. Three stages, each resumable: prepare (the codec's codes), train (a checkpoint after every epoch), export (a CustomVoice model folder in OUT). Run the same command again after a stop to go on where it was.
    """
    from koe.cli.progress import (
        wanted,  # (imports numpy: not at module level, `koe --help` stays light)
    )
    from koe.service.training import SpeakerJob, run_speaker, speaker_settings

    folder = _model_folder(model)
    settings = speaker_settings(locals())  # the run's settings, among the arguments
    job = SpeakerJob(folder, data, name, out_dir, ref=ref, device=device, export_dtype=export_dtype, stop_after=stop_after, settings=settings)
    reporter = TrainProgress(wanted(progress))
    try:
        result = run_speaker(job, reporter)
    except KeyboardInterrupt:
        reporter.close()
        fail(f"interrupted; run the same command again to go on from the last checkpoint (in {out_dir / 'training'})", 130)
    finally:
        reporter.close()
    if result is None:
        out.print(f"prepared: {escape(str(out_dir / 'training' / 'prepared.jsonl'))}")
        return
    if not result.finished or stop_after == "train":
        out.print(f"trained {result.optimizer_steps} optimizer steps; checkpoint in {escape(str(out_dir / 'training' / 'checkpoint'))}")
        return
    out.print(
        f"[bold]{escape(str(result.out))}[/]: a CustomVoice model with the speaker [bold]{escape(result.speaker)}[/] "
        f"({result.optimizer_steps} optimizer steps, last loss {result.losses[-1]:.4f})"
    )
    err.print(
        f'[dim]try it: koe speak --model {escape(str(result.out))} --speaker {escape(result.speaker)} "Hello!"  '
        f"(or add it to the store: koe models import {escape(str(result.out))})[/]"
    )


@app.command("finetune")
@command
def finetune(
    ctx: typer.Context,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="The model to start from (one `koe models info` says fine-tunes): a store name, a folder, or a hub id (OWNER/NAME).",
            show_default=False,
        ),
    ],
    data: Annotated[
        Path,
        typer.Option(
            "--data",
            help="The recordings and their transcripts: a JSONL (audio, text), a CSV with a header (audio,text), or a folder of NAME.wav + NAME.txt pairs.",
            show_default=False,
        ),
    ],
    out_dir: Annotated[Path, typer.Option("--out", help="The model folder to make (OUT/training/ keeps the run's checkpoints).", show_default=False)],
    epochs: Annotated[
        int | None, typer.Option("--epochs", help="Passes over the data, for recipes counted in epochs (default: the recipe's).", show_default=False)
    ] = None,
    steps: Annotated[
        int | None, typer.Option("--steps", help="Optimizer updates in all, for recipes counted in updates (default: the recipe's).", show_default=False)
    ] = None,
    lr: Annotated[float | None, typer.Option("--lr", help="The peak learning rate (default: the recipe's).", show_default=False)] = None,
    weight_decay: Annotated[float | None, typer.Option("--weight-decay", help="AdamW's weight decay, where the recipe sets it.", show_default=False)] = None,
    warmup_updates: Annotated[
        int | None, typer.Option("--warmup-updates", help="Updates of linear warm-up before the decay (default: the recipe's).", show_default=False)
    ] = None,
    frames_per_batch: Annotated[
        int | None, typer.Option("--frames-per-batch", help="Audio frames per batch, for batches by frames (default: the recipe's).", show_default=False)
    ] = None,
    max_clips: Annotated[
        int | None, typer.Option("--max-clips", help="Clips per batch at most, for batches by frames (0: any number).", show_default=False)
    ] = None,
    batch_size: Annotated[int | None, typer.Option("--batch-size", help="Clips per batch, for batches by clips.", show_default=False)] = None,
    max_batch_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-batch-tokens", help="Leave no clip longer than this many text and audio positions over the batch size (0: any length).", show_default=False
        ),
    ] = None,
    grad_accum: Annotated[int | None, typer.Option("--grad-accum", help="Batches per optimizer step.", show_default=False)] = None,
    max_grad_norm: Annotated[float | None, typer.Option("--max-grad-norm", help="Gradient clipping (0: off).", show_default=False)] = None,
    save_every: Annotated[int | None, typer.Option("--save-every", help="Keep a checkpoint every N updates.", show_default=False)] = None,
    last_every: Annotated[
        int | None, typer.Option("--last-every", help="Write the latest checkpoint every N updates, where the recipe keeps one apart.", show_default=False)
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="The run's seed (the same seed: the same weights).", show_default=False)] = None,
    gradient_checkpointing: Annotated[
        bool | None,
        typer.Option(
            "--gradient-checkpointing/--no-gradient-checkpointing",
            help="Recompute activations in the backward pass: less memory, same results.",
            show_default=False,
        ),
    ] = None,
    schedule: Annotated[
        str | None,
        typer.Option(
            "--schedule", help="The rate after the warm-up, where the recipe has a choice: cosine or constant (default: the recipe's).", show_default=False
        ),
    ] = None,
    batch_tokens: Annotated[
        int | None, typer.Option("--batch-tokens", help="Text and audio tokens of a batch, padding included, for batches by tokens.", show_default=False)
    ] = None,
    min_sample_tokens: Annotated[
        int | None, typer.Option("--min-sample-tokens", help="Samples of fewer tokens are skipped, where the recipe does.", show_default=False)
    ] = None,
    max_sample_tokens: Annotated[
        int | None,
        typer.Option("--max-sample-tokens", help="Samples of more tokens are skipped, where the recipe does (longer clips refused).", show_default=False),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option("--workers", help="The recipe's data-loader workers, whose seeds its draws follow (default: the recipe's).", show_default=False),
    ] = None,
    lora_rank: Annotated[int | None, typer.Option("--lora-rank", help="The adapters' rank (lora; default: the recipe's).", show_default=False)] = None,
    lora_alpha: Annotated[int | None, typer.Option("--lora-alpha", help="The adapters' alpha: their scale is alpha / rank (lora).", show_default=False)] = None,
    lora_dropout: Annotated[float | None, typer.Option("--lora-dropout", help="Dropout on the adapters' output (lora).", show_default=False)] = None,
    lora_lm: Annotated[
        bool | None, typer.Option("--lora-lm/--no-lora-lm", help="Adapters on the language models' attention (lora).", show_default=False)
    ] = None,
    lora_dit: Annotated[
        bool | None, typer.Option("--lora-dit/--no-lora-dit", help="Adapters on the diffusion model's attention (lora).", show_default=False)
    ] = None,
    lora_proj: Annotated[
        bool | None, typer.Option("--lora-proj/--no-lora-proj", help="Adapters on the projections between the parts (lora).", show_default=False)
    ] = None,
    device: Annotated[str | None, typer.Option("--device", help="cpu, cuda or cuda:N (default: cuda when there is one).")] = None,
    progress: Annotated[bool | None, typer.Option("--progress/--no-progress", help="Progress bars (default: on a terminal).", show_default=False)] = None,
) -> None:
    """Fine-tune a model on recordings with their transcripts: its family's upstream recipe, bit for bit on the CPU in float32.

    `koe train lora` trains low-rank adapters only (where the family's recipe has them; the --lora-* settings), `koe train finetune` the whole model. Every problem of the data is listed at once before anything is trained. OUT becomes a model folder koe (and upstream) loads; OUT/training/ keeps the checkpoints in upstream's format. Run the same command again after a stop to go on where it was.
    """
    from koe.cli.progress import wanted
    from koe.service.training import FINETUNE_SETTINGS, FinetuneJob, run_finetune

    arguments = locals()
    method = ctx.info_name  # finetune, or lora (the same command under its other name)
    job = FinetuneJob(_model_folder(model), data, out_dir, device=device, settings={name: arguments[name] for name in FINETUNE_SETTINGS}, method=method)
    reporter = TrainProgress(wanted(progress))
    try:
        result = run_finetune(job, reporter)
    except KeyboardInterrupt:
        reporter.close()
        fail(f"interrupted; run the same command again to go on from the last checkpoint (in {out_dir / 'training'})", 130)
    finally:
        reporter.close()
    out.print(f"[bold]{escape(str(result.folder))}[/]: the fine-tuned model ({result.updates} updates)")
    err.print(f'[dim]try it: koe speak --model {escape(str(result.folder))} --ref CLIP --ref-text TEXT "Hello!"[/]')


app.command(
    "lora",
    help=f"Train low-rank adapters (LoRA) on recordings, where the family's recipe has them: `koe train finetune` with the adapters alone trained.\n\n{finetune.__doc__.split(chr(10) + chr(10), 1)[1].strip()}",
)(finetune)


@app.command("export")
@command
def export(
    out_dir: Annotated[Path, typer.Option("--out", help="The run's folder (the --out of koe train speaker).", show_default=False)],
    export_dtype: Annotated[
        str | None, typer.Option("--export-dtype", help="dtype of the exported weights: float32, bfloat16 or float16 (default: as trained).")
    ] = None,
) -> None:
    """Export a run's latest checkpoint as the model in OUT (to listen to a run stopped early)."""
    from koe.service.training import export_run

    folder = export_run(out_dir, export_dtype)
    out.print(f"exported the checkpoint to {escape(str(folder))}")
