"""`koe convert`: speech in, the same words in another voice out (voice conversion)."""

from pathlib import Path
from typing import Annotated

import typer

from koe.cli.common import command, open_home
from koe.cli.speak import (
    DeviceOption,
    DtypeOption,
    FormatOption,
    OptOption,
    OutputOption,
    PrecisionOption,
    SaveOption,
    SeedOption,
    StreamOption,
    check_arguments,
    refuse_terminal_stdout,
    run_plan,
)


@command
def convert(
    source: Annotated[Path, typer.Argument(help="The speech to convert (wav, flac, mp3, ogg, ...).", show_default=False)],
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="A model that converts voices (`koe models info` lists conversion); default: models.default.")
    ] = None,
    voice: Annotated[str | None, typer.Option("--voice", help="The library voice to convert into.")] = None,
    ref: Annotated[Path | None, typer.Option("--ref", help="A clip of the voice to convert into (instead of --voice).")] = None,
    ref_text: Annotated[str | None, typer.Option("--ref-text", help="Transcript of --ref (conversion does not need it).")] = None,
    seed: SeedOption = None,
    opt: OptOption = None,
    output: OutputOption = None,
    fmt: FormatOption = None,
    stream: StreamOption = False,
    save: SaveOption = None,
    device: DeviceOption = None,
    dtype: DtypeOption = None,
    precision: PrecisionOption = None,
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
