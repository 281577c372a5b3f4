"""`koe voices ...`: the voice library."""

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from koe.cli.common import command, err, fail, open_home, out
from koe.cli.model_options import model_options_command
from koe.cli.speak import OPT_HELP

app = typer.Typer(help="Voices to clone: add from a clip, design from words, list, show, remove, export, import.", no_args_is_help=True)


def _ref_text(ref_text: str | None, ref_text_file: Path | None) -> str | None:
    if ref_text and ref_text_file:
        fail("give --ref-text or --ref-text-file, not both", 2)
    if ref_text_file:
        from koe.text.checks import Utf8Error, decode_utf8

        try:
            return decode_utf8(ref_text_file.read_bytes(), str(ref_text_file))  # as koe speak --file reads text
        except OSError as e:
            fail(f"cannot read {ref_text_file}: {e.strerror}", 2)
        except Utf8Error as e:
            fail(f"{e}; save it as UTF-8", 2)
    return ref_text


@app.command("add")
@command
def add(
    name: Annotated[str, typer.Argument(help="Voice name (letters, digits, . _ -).")],
    ref: Annotated[Path, typer.Option("--ref", help="Reference clip: 3-20 s of clean speech (wav, flac, mp3, ogg, m4a, ...).")],
    ref_text: Annotated[str | None, typer.Option("--ref-text", help="What the clip says (better cloning); at most server.max_transcript_chars (2000).")] = None,
    ref_text_file: Annotated[Path | None, typer.Option("--ref-text-file", help="Read the transcript from a UTF-8 file.")] = None,
    language: Annotated[str | None, typer.Option("--language", "-l", help="Language of the clip (at most 64 characters).")] = None,
    description: Annotated[str | None, typer.Option("--description", help="A note about the voice; at most server.max_description_chars (1000).")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace a voice of the same name.")] = False,
) -> None:
    """Add a voice from a reference clip (and its transcript)."""
    home = open_home()
    voice = home.voices.add(name, str(ref), _ref_text(ref_text, ref_text_file), description=description, language=language, overwrite=overwrite)
    mode = "with transcript" if voice.ref_text else "no transcript: timbre-only cloning"
    err.print(f"[green]added voice[/] {escape(voice.name)}  [dim]({voice.duration_s:.1f} s at {voice.sample_rate} Hz, {mode})[/]")


@app.command("prepare", cls=model_options_command("voice_options"))  # the model's voice-prompt options are flags too
@command
def prepare(
    ctx: typer.Context,
    clip: Annotated[Path, typer.Argument(help="Reference clip: 3-10 s of clean speech (wav, flac, mp3, ogg, m4a, ...).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder to write the prompt to (prompt.safetensors + prompt.json).")],
    model: Annotated[str | None, typer.Option("--model", "-m", help="A cloning model: store name, folder or hub id (OWNER/NAME).")] = None,
    ref_text: Annotated[str | None, typer.Option("--ref-text", help="What the clip says (in-context cloning).")] = None,
    ref_text_file: Annotated[Path | None, typer.Option("--ref-text-file", help="Read the transcript from a file.")] = None,
    x_vector_only: Annotated[bool, typer.Option("--x-vector-only", help="Clone from the clip alone, without its transcript (timbre only).")] = False,
    trim_ref: Annotated[bool, typer.Option("--trim-ref", help="Use the first 30 s of a longer clip.")] = False,
) -> None:
    """Prepare a reusable voice prompt from a clip with a cloning model (the engine's load_voice reads it back).

    The model's voice-prompt options are flags: --NAME VALUE (`koe models info MODEL` lists them under "voice options").
    """
    from koe.cli.model_options import flag_values, model_flags
    from koe.engines.base import CLONE, CLONE_WITHOUT_TRANSCRIPT, RequestError, VoiceReference
    from koe.engines.registry import describe, load_engine
    from koe.service.store.resolve import downloads_for

    home = open_home()
    ref = home.models.resolve(model, home.settings.models.default, download=downloads_for(home.settings, client=False))
    caps = describe(ref.path).capabilities
    try:  # checked before the model loads; a default value gives the plain prompt
        variant = caps.prompt_options(flag_values(model_flags(ctx), caps.voice_options, ref.name, what="voice-prompt options"))
    except RequestError as e:
        fail(str(e), 2)
    text = _ref_text(ref_text, ref_text_file)
    alone = x_vector_only or caps.voice_modes & {CLONE, CLONE_WITHOUT_TRANSCRIPT} == {
        CLONE_WITHOUT_TRANSCRIPT
    }  # a model that clones from a clip alone needs no transcript
    if not alone and not (text and text.strip()):
        if CLONE_WITHOUT_TRANSCRIPT in caps.voice_modes:
            fail(
                "cloning in context needs the clip's transcript (--ref-text or --ref-text-file); without one, pass "
                "--x-vector-only to clone from the clip alone (the voice is matched less closely)",
                2,
            )
        fail(f"{ref.name} clones from a clip and its transcript: give what the clip says with --ref-text or --ref-text-file", 2)
    with err.status(f"preparing a voice prompt with {ref.name} …", spinner="dots"):
        m = home.settings.models
        engine = load_engine(ref.path, device=m.device, dtype=m.dtype, precision=m.precision)
        try:
            prompt = engine.prepare_voice(VoiceReference(str(clip), None if x_vector_only else text, trim=trim_ref), **variant)
            prompt.save(output)
        except RequestError as e:
            fail(str(e), 2)
        finally:
            engine.close()
    mode = "from the clip alone" if alone else "from the clip and its transcript"
    err.print(f"[green]wrote voice prompt[/] {escape(str(output))}  [dim]({mode}, for {ref.name})[/]")


@app.command("design", cls=model_options_command("options"))  # the model's options are flags too
@command
def design(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Name for the new voice.")],
    description: Annotated[str, typer.Option("--description", "-d", help="The voice in words: age, gender, timbre, mood, pace.")],
    model: Annotated[str | None, typer.Option("--model", "-m", help="A model that designs voices: store name, folder or hub id (OWNER/NAME).")] = None,
    text: Annotated[str | None, typer.Option("--text", help="What the sample says (becomes the transcript).")] = None,
    language: Annotated[str | None, typer.Option("--language", "-l")] = None,
    seed: Annotated[int | None, typer.Option("--seed", min=0)] = None,
    opt: Annotated[list[str] | None, typer.Option("--opt", "-O", metavar="KEY=VALUE", help=OPT_HELP, show_default=False)] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite")] = False,
) -> None:
    """Design a voice from a description with a voice-design model and keep its sample as a clone reference.

    The model's options are flags, as for `koe speak`: --NAME VALUE (`koe models info MODEL` lists them), or --opt NAME=VALUE.
    """
    from koe.cli.common import parse_options
    from koe.cli.model_options import model_flags, own_flags
    from koe.cli.speak import model_options
    from koe.service.synthesis.synthesizer import Synthesizer

    home = open_home()
    synth = Synthesizer(home)
    options = {**model_options(synth, model, model_flags(ctx), own_flags(ctx)), **parse_options(opt)}
    with err.status(f"designing {name} …", spinner="dots"):
        voice = synth.design_voice(
            name,
            description,
            model=model,
            text=text,
            language=language,
            seed=seed,
            options=options,
            overwrite=overwrite,
        )
    err.print(
        f"[green]designed voice[/] {escape(voice.name)}  [dim]({voice.duration_s:.1f} s sample; clone it with a cloning model: koe speak --voice {escape(voice.name)} ...)[/]"
    )


@app.command("list")
@command
def list_voices(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List the voices in the library."""
    voices = open_home().voices.list()
    if as_json:
        out.print_json(json.dumps([v.to_dict() for v in voices]))
        return
    if not voices:
        err.print("no voices yet: koe voices add NAME --ref clip.wav --ref-text '...'")
        return
    table = Table("name", "source", "seconds", "transcript", "added", box=None, pad_edge=False)
    for v in voices:
        transcript = (v.ref_text[:40] + "…") if v.ref_text and len(v.ref_text) > 40 else (v.ref_text or "—")
        table.add_row(escape(v.name), v.source, f"{v.duration_s:.1f}", escape(transcript), time.strftime("%Y-%m-%d", time.localtime(v.created_at)))
    out.print(table)


@app.command("show")
@command
def show(name: str, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show one voice: reference, transcript, description, models it is prepared for."""
    v = open_home().voices.get(name)
    d = v.to_dict()
    if as_json:
        out.print_json(json.dumps(d))
        return
    for key in ("name", "source", "folder", "duration_s", "sample_rate", "language", "description", "ref_text", "prepared_for"):
        value = d[key]
        out.print(f"[bold]{key}[/]: {escape(', '.join(value) if isinstance(value, list) else str(value if value is not None else '—'))}")


@app.command("remove")
@command
def remove(name: str) -> None:
    """Delete a voice and its prepared prompts."""
    open_home().voices.remove(name)
    err.print(f"[green]removed voice[/] {escape(name)}")


@app.command("export")
@command
def export(
    name: str,
    dest: Annotated[Path | None, typer.Argument(help="Archive path (.zip, .tar, .tar.gz) or folder; default ./NAME.zip.")] = None,
) -> None:
    """Export a voice to a .zip or .tar archive."""
    path = open_home().voices.export(name, dest or Path(f"{name}.zip"))
    err.print(f"[green]exported[/] {escape(name)} → {escape(str(path))}")


@app.command("import")
@command
def import_voice(
    archive: Annotated[Path, typer.Argument(help="An archive made by koe voices export.")],
    name: Annotated[str | None, typer.Option("--name", help="Import under another name.")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite")] = False,
) -> None:
    """Import a voice from an archive."""
    voice = open_home().voices.import_archive(archive, name, overwrite=overwrite)
    err.print(f"[green]imported voice[/] {escape(voice.name)}  [dim]({voice.duration_s:.1f} s)[/]")
