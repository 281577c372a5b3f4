"""`koe convert`: speech in, the same words in another voice out (voice conversion)."""

from pathlib import Path
from typing import Annotated

import typer

from koe.cli.common import command, open_home
from koe.cli.speak import OPT_HELP, check_arguments, refuse_terminal_stdout, run_plan


@command
def convert(
    source: Annotated[Path, typer.Argument(help="The speech to convert (wav, flac, mp3, ogg, ...).", show_default=False)],
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="A model that converts voices (`koe models info` lists conversion); default: models.default.")
    ] = None,
    voice: Annotated[str | None, typer.Option("--voice", help="The library voice to convert into.")] = None,
    ref: Annotated[Path | None, typer.Option("--ref", help="A clip of the voice to convert into (instead of --voice).")] = None,
    ref_text: Annotated[str | None, typer.Option("--ref-text", help="Transcript of --ref (conversion does not need it).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Random seed, for repeatable output.", min=0)] = None,
    opt: Annotated[list[str] | None, typer.Option("--opt", "-O", metavar="KEY=VALUE", help=OPT_HELP, show_default=False)] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Output file (format from its extension); '-' = stdout.")] = None,
    fmt: Annotated[str | None, typer.Option("--format", "-F", help="wav, flac, mp3, opus, aac, m4a or pcm.")] = None,
    stream: Annotated[bool, typer.Option("--stream", help="Write audio as it is made (to stdout unless -o).")] = False,
    save: Annotated[bool | None, typer.Option("--save/--no-save", help="Also keep it under KOE_HOME/outputs.", show_default=False)] = None,
    device: Annotated[str | None, typer.Option("--device", help="cpu, cuda, cuda:1, mps.", rich_help_panel="Runtime")] = None,
    dtype: Annotated[str | None, typer.Option("--dtype", help="float32, bfloat16, float16.", rich_help_panel="Runtime")] = None,
    precision: Annotated[
        str | None, typer.Option("--precision", help="Opt-in speed mode that changes bits (as the model runs them); fp32 = exact.", rich_help_panel="Runtime")
    ] = None,
) -> None:
    """Say the speech in SOURCE again in another voice (--voice NAME or --ref clip.wav): the same words, another speaker.

    Needs a model that converts voices (`koe models info MODEL` says so). Without -o the file is kept under KOE_HOME/outputs and its path printed.
    """
    from koe.cli.common import parse_options
    from koe.service.synthesis.encode import format_for_path, get_format
    from koe.service.synthesis.requests import ConvertRequest
    from koe.service.synthesis.synthesizer import Synthesizer

    to_stdout = (output is not None and str(output) == "-") or (stream and output is None)
    if to_stdout:
        refuse_terminal_stdout("--stream" if stream else "-o -")
    check_arguments(voice=voice, ref_text=ref_text, model=model)
    audio_format = format_for_path(output, fmt) if output is not None and not to_stdout else (get_format(fmt) if fmt else None)
    synth = Synthesizer(open_home(models={"device": device, "dtype": dtype, "precision": precision}))
    request = ConvertRequest(
        source=str(source),
        model=model,
        voice=voice,
        ref_audio=str(ref) if ref is not None else None,
        ref_text=ref_text,
        seed=seed,
        options=parse_options(opt),
        format=audio_format.name if audio_format else ("wav" if stream or to_stdout else None),
        save=save if save is not None else (True if output is None and not stream else None),
    )
    run_plan(synth, synth.plan_conversion(request), model is None, stream, output, to_stdout)
