"""`koe speak`: text in, audio out (a file, stdout, or a stream as it is made)."""

import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from koe.cli.common import command, err, fail, open_home, warn

LONG_TEXT_CHARS = 200  # above this, show progress in seconds of audio made
OWN_VOICE = "(the model's own)"  # how a result without a named voice is labelled
OPT_HELP = "A model option as NAME=VALUE (repeatable), the long form of its flag --NAME VALUE; `koe models info MODEL` lists them."


# The options `koe speak` and `koe convert` share.
SeedOption = Annotated[int | None, typer.Option("--seed", help="Random seed, for repeatable output.", min=0)]
OptOption = Annotated[list[str] | None, typer.Option("--opt", "-O", metavar="KEY=VALUE", help=OPT_HELP, rich_help_panel="Model options", show_default=False)]
OutputOption = Annotated[Path | None, typer.Option("--output", "-o", help="Output file (format from its extension); '-' = stdout.")]
FormatOption = Annotated[str | None, typer.Option("--format", "-F", help="wav, flac, mp3, opus, aac, m4a or pcm.")]
StreamOption = Annotated[bool, typer.Option("--stream", help="Write audio as it is made (to stdout unless -o).")]
SaveOption = Annotated[bool | None, typer.Option("--save/--no-save", help="Also keep it under KOE_HOME/outputs.", show_default=False)]
DeviceOption = Annotated[str | None, typer.Option("--device", help="cpu, cuda, cuda:1, mps.", rich_help_panel="Runtime")]
DtypeOption = Annotated[str | None, typer.Option("--dtype", help="float32, bfloat16, float16.", rich_help_panel="Runtime")]
PrecisionOption = Annotated[
    str | None,
    typer.Option(
        "--precision",
        help="Opt-in speed mode that changes bits: bf16, int8 or int4 (CPU), as the model runs them (koe models info); fp32 = exact.",
        rich_help_panel="Runtime",
    ),
]


def read_text(text: str | None, file: Path | None) -> str:
    """The text to speak: TEXT, '-' (stdin), --file, or piped stdin; bytes that are not UTF-8 are
    a one-line error naming the offset of the first bad byte (exit 2). A leading BOM is dropped."""
    from koe.text.checks import Utf8Error, argument_bytes_problem, decode_utf8

    if text is not None and file is not None:
        fail("give TEXT or --file, not both", 2)
    try:
        if file is not None:
            try:
                return decode_utf8(file.read_bytes(), str(file))
            except OSError as e:
                fail(f"cannot read {file}: {e.strerror}", 2)
        if text == "-" or (text is None and not sys.stdin.isatty()):
            stdin = getattr(sys.stdin, "buffer", None)
            return decode_utf8(stdin.read(), "stdin") if stdin is not None else sys.stdin.read()
    except Utf8Error as e:
        fail(str(e), 2)
    except UnicodeDecodeError as e:  # a text-mode stdin without a byte buffer
        fail(f"stdin is not UTF-8 text: byte at offset {e.start} cannot be decoded", 2)
    if text is None:
        fail("nothing to say: give TEXT, '-' to read stdin, or --file PATH", 2)
    problem = argument_bytes_problem(text, "TEXT")
    if problem:
        fail(problem, 2)
    return text


def check_arguments(**arguments: str | None) -> None:
    """A one-line error (exit 2) for an option whose bytes on the command line are not UTF-8."""
    from koe.text.checks import argument_bytes_problem

    for flag, value in arguments.items():
        problem = argument_bytes_problem(value, f"--{flag.replace('_', '-')}") if value else None
        if problem:
            fail(problem, 2)


@command
def speak(
    ctx: typer.Context,
    text: Annotated[str | None, typer.Argument(help="Text to speak; '-' reads stdin.", show_default=False)] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Read the text from a UTF-8 file.")] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="Model: a store name (koe models list), a folder, or a hub id (OWNER/NAME): the store, then the Hugging Face cache, else downloaded on first use (default: models.default).",
        ),
    ] = None,
    voice: Annotated[str | None, typer.Option("--voice", help="Library voice (cloned) or preset speaker.")] = None,
    speaker: Annotated[str | None, typer.Option("--speaker", "-s", help="Preset speaker of the model.")] = None,
    instruct: Annotated[str | None, typer.Option("--instruct", "-i", help="Style instruction (on a model that designs voices: the voice).")] = None,
    design: Annotated[str | None, typer.Option("--design", "-d", help="Describe a new voice in words (a model that designs voices).")] = None,
    ref: Annotated[Path | None, typer.Option("--ref", help="Reference clip to clone (a cloning model).")] = None,
    ref_text: Annotated[str | None, typer.Option("--ref-text", help="Transcript of --ref (without it: timbre-only cloning).")] = None,
    emotion_ref: Annotated[
        Path | None, typer.Option("--emotion-ref", help="A second clip whose emotion the speech takes (a model that takes an emotion reference).")
    ] = None,
    emotion_voice: Annotated[str | None, typer.Option("--emotion-voice", help="A library voice whose clip gives the emotion (as --emotion-ref).")] = None,
    language: Annotated[str | None, typer.Option("--language", "-l", help="Language of the text (auto, english, chinese, ...).")] = None,
    seed: SeedOption = None,
    opt: OptOption = None,
    speed: Annotated[float | None, typer.Option("--speed", help="Tempo 0.25-4.0, pitch kept.")] = None,
    output: OutputOption = None,
    fmt: FormatOption = None,
    stream: StreamOption = False,
    save: SaveOption = None,
    device: DeviceOption = None,
    dtype: DtypeOption = None,
    precision: PrecisionOption = None,
) -> None:
    """Speak TEXT (or stdin, or --file) and write the audio.

    Without -o the file is kept under KOE_HOME/outputs and its path printed.

    Each model has options of its own, and each is a flag: --NAME VALUE (a switch: --NAME or --no-NAME), NAME as `koe models info MODEL` lists it with dashes for underscores; --opt NAME=VALUE does the same.
    """
    from koe.cli.common import parse_options
    from koe.cli.model_options import model_flags, own_flags
    from koe.service.synthesis.encode import format_for_path, get_format
    from koe.service.synthesis.requests import SpeechRequest
    from koe.service.synthesis.synthesizer import Synthesizer

    to_stdout = (output is not None and str(output) == "-") or (stream and output is None)
    if to_stdout:
        refuse_terminal_stdout("--stream" if stream else "-o -")
    words = read_text(text, file)
    check_arguments(
        voice=voice, speaker=speaker, instruct=instruct, design=design, ref_text=ref_text, language=language, model=model, emotion_voice=emotion_voice
    )
    if emotion_ref is not None and emotion_voice is not None:
        fail("give --emotion-ref or --emotion-voice, not both", 2)
    if output is not None and not to_stdout:
        audio_format = format_for_path(output, fmt)
    else:
        audio_format = get_format(fmt) if fmt else None
    home = open_home(models={"device": device, "dtype": dtype, "precision": precision})
    synth = Synthesizer(home)
    options = {**model_options(synth, model, model_flags(ctx), own_flags(ctx)), **parse_options(opt)}
    keep = save if save is not None else (True if output is None and not stream else None)
    request = SpeechRequest(
        text=words,
        model=model,
        voice=voice,
        speaker=speaker,
        instruct=instruct,
        design=design,
        ref_audio=str(ref) if ref is not None else None,
        ref_text=ref_text,
        language=language,
        seed=seed,
        options=options,
        speed=speed,
        format=audio_format.name if audio_format else ("wav" if stream or to_stdout else None),
        save=keep,
        emotion_voice=emotion_voice,
        emotion_audio=str(emotion_ref) if emotion_ref is not None else None,
    )
    run_plan(synth, synth.plan(request), model is None, stream, output, to_stdout)


def run_plan(synth, plan, default_model: bool, stream: bool, output: Path | None, to_stdout: bool) -> None:
    """Speak (or convert) a plan: streamed to stdout or `output`, or whole and written (`write_result`);
    a random-weight model chosen by default (no --model) is warned about first."""
    random_weights = synth.planner.details(plan.model).random_weights
    if random_weights and default_model:
        warn_random(plan.model.name)
    started = time.perf_counter()
    if stream:
        stream_plan(synth, plan, None if to_stdout else output)
        return
    result = speak_plan(synth, plan)
    write_result(result, output, to_stdout, time.perf_counter() - started, random_weights=random_weights)


def model_options(synth, model: str | None, flags: list, taken: set[str]) -> dict:
    """The model flags given (`koe.cli.model_options`) as options of the model `model` names (else the default)."""
    if not flags:
        return {}
    from koe.cli.model_options import flag_values

    ref = synth.planner.resolve_model(model)
    return flag_values(flags, synth.planner.details(ref).capabilities.options, ref.name, taken=taken)


def warn_random(name: str) -> None:
    """Say that model `name`, which no --model named (the default, or the only one installed), is one of koe's
    random-weight test models. (Its summary line says "random weights" however it was chosen.)"""
    from koe.service.store.models import RANDOM_WEIGHTS_NOTE

    warn(f"model {name} has {RANDOM_WEIGHTS_NOTE}; for real speech, `koe models pull ID` a released model and pass --model")


def refuse_terminal_stdout(flag: str) -> None:
    """Exit 2 before anything is loaded when audio would go to stdout and stdout is a terminal:
    binary audio there is noise (and can garble the terminal). A file or a pipe is what is meant."""
    isatty = getattr(sys.stdout, "isatty", None)
    if isatty is not None and isatty():
        fail(f"{flag} writes binary audio to stdout, which is a terminal: give -o FILE, or pipe it (| ffplay -)", 2)


def speak_plan(synth, plan):
    """Speak (or convert) a plan with a spinner (or, for long texts on a terminal, seconds of audio made) and print its warnings."""
    if plan.source is not None:
        label = f"converting {len(plan.source[0]) / plan.source[1]:.1f} s of speech with {plan.model.name}"
    else:
        label = f"speaking {len(plan.text):,} characters with {plan.model.name}"
    if len(plan.text) > LONG_TEXT_CHARS and err.is_terminal:
        result = _speak_with_progress(synth, plan, label)
    else:
        with err.status(label + " …", spinner="dots"):
            result = synth.speak(plan)
    for w in result.warnings:
        warn(w)
    return result


def write_result(result, output: Path | None, to_stdout: bool, elapsed: float, *, random_weights: bool = False) -> None:
    """Write a finished utterance to stdout or `output` (atomically), or name its kept file; print one summary line
    (its model marked "random weights" when it is a test model)."""
    if to_stdout:
        sys.stdout.buffer.write(result.audio)
        sys.stdout.buffer.flush()
        where = "stdout"
    elif output is not None:
        from koe.service.fsio import atomic_write_bytes

        atomic_write_bytes(output, result.audio)
        where = str(output)
    else:
        where = str(result.path)
    err.print(
        f"[green]wrote[/] {escape(where)}  [dim]({result.format.name}, {result.sample_rate} Hz, {result.duration:.2f} s; "
        f"{elapsed:.1f} s; model {escape(result.model)}{' (random weights)' if random_weights else ''}, voice {escape(result.voice or OWN_VOICE)}, seed {result.seed})[/]"
    )


def _speak_with_progress(synth, plan, label: str):
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TextColumn("[cyan]{task.fields[audio]}"), TimeElapsedColumn(), console=err, transient=True
    ) as bar:
        task = bar.add_task(label, audio="")
        return synth.speak(plan, on_progress=lambda seconds: bar.update(task, audio=f"{seconds:.1f} s of audio"))


def stream_plan(synth, plan, output: Path | None) -> None:
    """Write chunks to stdout (or a file) as soon as they are made.

    A file is written as a hidden temporary beside it (`koe.service.fsio.atomic_writer`, as the
    one-shot path writes) and renamed into place when the stream ends: a request that fails or is
    interrupted (Ctrl-C) leaves no file, and never a truncated one where a file was before.
    """
    import contextlib

    from koe.service.errors import RequestCancelled
    from koe.service.fsio import atomic_writer

    started = time.perf_counter()
    first: float | None = None
    try:
        with atomic_writer(output) if output is not None else contextlib.nullcontext(sys.stdout.buffer) as sink:
            for chunk in synth.stream(plan):
                if chunk.data:
                    sink.write(chunk.data)
                    sink.flush()
                    first = first if first is not None else time.perf_counter() - started
                if chunk.final:
                    for w in chunk.warnings:
                        warn(w)
    except RequestCancelled:
        fail("cancelled")
    where = "stdout" if output is None else str(output)
    err.print(
        f"[green]streamed[/] {escape(where)}  [dim]({plan.format.name}; first audio after {first or 0:.2f} s; {time.perf_counter() - started:.1f} s in all)[/]"
    )
