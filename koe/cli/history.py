"""`koe history ...`: what was spoken (the outputs rows in koe.db): list, show, replay, delete."""

import json
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from koe.cli.common import command, err, fail, open_home, out, warn

app = typer.Typer(help="What was spoken: list, show, replay or delete the outputs recorded in koe.db.", no_args_is_help=True)

TEXT_WIDTH = 48  # at most this many characters of text shown per row in the list (what the terminal's width leaves)
MIN_TEXT_WIDTH = 12  # ... and at least this many


def _history():
    from koe.service.history import History

    return History(open_home())


def _shorten(text: str, width: int = TEXT_WIDTH) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@app.command("list")
@command
def list_(
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many of the newest to show.", min=1)] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (the whole text).")] = False,
) -> None:
    """The newest outputs first: id, when, model, voice, seconds, text and the kept file."""
    history = _history()
    entries = history.list(limit)
    if as_json:
        out.print_json(json.dumps([e.summary() for e in entries]))
        return
    if not entries:
        err.print("[dim]no outputs yet: `koe speak TEXT` records one[/]")
        return
    header = ["id", "when", "model", "voice", "seconds", "text", "file"]
    rows = [[str(e.id), _when(e), e.row.model, e.row.voice or "-", f"{e.row.duration_s:.2f}", e.row.text, _kept(e, history.outputs)] for e in entries]
    kept = any(r[6] for r in rows)

    def text_room(columns: int) -> int:  # what the other columns leave of the terminal's width for the text
        widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(columns) if i != 5]
        return out.width - sum(widths) - 2 * (columns - 1)

    if not kept or text_room(7) < MIN_TEXT_WIDTH:  # too narrow for the paths too: `koe history show ID` has them
        header, rows = header[:6], [r[:6] for r in rows]
    text_width = max(MIN_TEXT_WIDTH, min(TEXT_WIDTH, text_room(len(header))))
    table = Table(box=None, pad_edge=False)
    for name in header:  # one line a row, nothing cut but the text: names are copied, the text is whole in `koe history show`
        table.add_column(name, no_wrap=True, justify="right" if name in ("id", "seconds") else "left")
    for row in rows:
        row[5] = _shorten(row[5], text_width)
        table.add_row(*map(escape, row))
    out.print(table)
    if kept:
        out.print(f"[dim]{'files under ' + escape(str(history.outputs)) if len(header) == 7 else 'the kept files: `koe history show ID`'}[/]")
    total = history.count()
    if total > limit:
        err.print(f"[dim]{len(entries)} of {total}; --limit N shows more[/]")


def _when(entry) -> str:
    """The row's local time, short: `MM-DD HH:MM` this year, else the date (`koe history show` has it all)."""
    made = time.localtime(entry.row.created_at)
    return time.strftime("%m-%d %H:%M" if made.tm_year == time.localtime().tm_year else "%Y-%m-%d", made)


def _kept(entry, outputs: Path) -> str:
    """The kept file, as its path under KOE_HOME/outputs (the table's last line names that folder)."""
    if entry.file is None:
        return ""
    try:
        return str(entry.file.relative_to(outputs.resolve()))
    except ValueError:
        return str(entry.file)


@app.command("show")
@command
def show(
    output_id: Annotated[int, typer.Argument(metavar="ID", help="The output's id (`koe history list`).", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Everything recorded about one output: its text, model, voice, seed, options, file and the engine's metadata."""
    entry = _history().get(output_id)
    details = entry.details()
    if as_json:
        out.print_json(json.dumps(details, default=str))
        return
    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in details.items():
        if key == "metadata":
            continue
        table.add_row(key, escape("" if value is None else str(value)))
    for key, value in details["metadata"].items():
        table.add_row(key, escape(value if isinstance(value, str) else json.dumps(value, default=str)))
    out.print(table)


@app.command("replay")
@command
def replay(
    output_id: Annotated[int, typer.Argument(metavar="ID", help="The output to speak again (`koe history list`).", show_default=False)],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Output file (format from its extension); '-' = stdout.")] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Another model than the recorded one (folder or store name).")] = None,
    ref: Annotated[Path | None, typer.Option("--ref", help="The reference clip again, for an output cloned from a clip.")] = None,
    ref_text: Annotated[str | None, typer.Option("--ref-text", help="Transcript of --ref.")] = None,
    emotion_ref: Annotated[Path | None, typer.Option("--emotion-ref", help="The emotion clip again, for an output that took its emotion from a clip.")] = None,
    save: Annotated[bool | None, typer.Option("--save/--no-save", help="Also keep it under KOE_HOME/outputs.", show_default=False)] = None,
) -> None:
    """Speak output ID again: the same text, model, voice, seed, language, options, speed and format.

    The new output is a new history row. Without -o it is kept under KOE_HOME/outputs, as `koe speak` does. Device, dtype and precision come from this run's settings.
    """
    from koe.cli.speak import refuse_terminal_stdout, speak_plan, write_result
    from koe.service.errors import NotFound
    from koe.service.synthesis.encode import format_for_path
    from koe.service.synthesis.synthesizer import Synthesizer

    to_stdout = output is not None and str(output) == "-"
    if to_stdout:
        refuse_terminal_stdout("-o -")
    history = _history()
    recorded = history.get(output_id).row
    request = history.replay_request(
        output_id,
        model=model,
        ref_audio=str(ref) if ref is not None else None,
        ref_text=ref_text,
        save=save if save is not None else (True if output is None else None),
        emotion_audio=str(emotion_ref) if emotion_ref is not None else None,
    )
    if output is not None and not to_stdout and output.suffix:
        request.format = format_for_path(output, None).name  # the file's extension decides, as in `koe speak -o`
    synth = Synthesizer(history.home)
    try:
        plan = synth.plan(request)
    except NotFound as e:
        if e.param != "model" or model is not None:
            raise
        fail(f"output {output_id} was made with model {request.model!r}, which is not installed here: give --model NAME|FOLDER", 2)
    started = time.perf_counter()
    result = speak_plan(synth, plan)
    was, now = recorded.metadata.get("precision"), result.metadata.get("precision")
    if was and now and was != now:
        warn(f"output {output_id} was made in {was}, this one in {now}: the audio may differ in its bits")
    write_result(result, output, to_stdout, time.perf_counter() - started)


@app.command("delete")
@command
def delete(
    output_ids: Annotated[list[int] | None, typer.Argument(metavar="ID", help="The outputs to delete.", show_default=False)] = None,
    all_: Annotated[bool, typer.Option("--all", help="Delete the whole history.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="With --all: do not ask.")] = False,
) -> None:
    """Delete history rows and their kept files under KOE_HOME/outputs (files elsewhere are never touched)."""
    if bool(output_ids) == all_:
        fail("give the ids to delete, or --all", 2)
    history = _history()
    if all_:
        total = history.count()
        if total and not yes:
            if not sys.stdin.isatty():
                fail("--all deletes the whole history: add --yes to confirm", 2)
            if not typer.confirm(f"delete all {total} outputs and their kept files?", err=True):
                raise typer.Exit(1)
    done = history.delete(None if all_ else output_ids)
    err.print(f"[green]deleted[/] {len(done.rows)} output{'s' if len(done.rows) != 1 else ''}, {len(done.files)} file{'s' if len(done.files) != 1 else ''}")
    for left in done.left:
        warn(f"left {left}")
