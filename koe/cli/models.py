"""`koe models ...`: the model store."""

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from koe.cli.common import command, err, human_bytes, open_home, out

app = typer.Typer(help="Models: list, import a folder, info, remove, pull from the Hugging Face hub.", no_args_is_help=True)


def details_dict(d) -> dict:
    """A model's details as plain JSON-able data."""
    return {
        "name": d.ref.name, "path": str(d.ref.path), "family": d.ref.family, "variant": d.ref.variant, "size": d.ref.size,
        "uses": d.uses, "parameters": d.parameters, "weights_bytes": d.weights_bytes, "stored_dtype": d.stored_dtype,
        "memory_float32_bytes": d.memory_bytes("float32"), "memory_bfloat16_bytes": d.memory_bytes("bfloat16"),
        "speakers": d.speakers, "languages": d.languages, "missing": d.missing, "origin": d.origin, "linked": d.linked,
        "added_at": d.added_at, "capabilities": d.capabilities.to_dict() if d.capabilities else None,
    }  # fmt: skip


@app.command("list")
@command
def list_models(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List installed models."""
    home = open_home()
    models = home.models.list()
    if as_json:
        out.print_json(json.dumps([details_dict(d) for d in models]))
        return
    if not models:
        err.print("no models installed: koe models import PATH, koe models pull ID, or koe demo for a test model")
        return
    default = home.settings.models.default
    table = Table("name", "variant", "size", "weights", "origin", box=None, pad_edge=False)
    for d in models:
        mark = " [green](default)[/]" if default and default.lower() == d.ref.name.lower() else ""
        origin = ("→ " if d.linked else "") + (d.origin or "")
        table.add_row(escape(d.ref.name) + mark, d.ref.variant, d.ref.size, human_bytes(d.weights_bytes), escape(origin))
    out.print(table)


@app.command("import")
@command
def import_model(
    path: Annotated[Path, typer.Argument(help="A model folder in its released layout (configs, weights, tokenizer files), or a release's checkpoint folder (with --arch).")],
    name: Annotated[str | None, typer.Option("--name", help="Store name (default: the folder's name).")] = None,
    link: Annotated[bool, typer.Option("--link", help="Keep a symlink to the folder instead of a copy.")] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite")] = False,
    arch: Annotated[str | None, typer.Option("--arch", help="The architecture, by name, of a checkpoint released without its config: "
                                             "its config is written into the copy (a wrong name is an error listing the names koe knows).",
                                             show_default=False)] = None,
    vocoder: Annotated[Path | None, typer.Option("--vocoder", help="A vocoder folder to copy in, for a release that ships without "
                                                 "its vocoder (the error for such a folder says which one).", show_default=False)] = None,
) -> None:
    """Install a local model folder into the store (completed and validated first)."""
    home = open_home()
    with err.status(f"importing {path} …", spinner="dots"):
        d = home.models.import_model(path, name, link=link, overwrite=overwrite, arch=arch, vocoder=vocoder)
    how = "linked" if d.linked else "copied"
    err.print(f"[green]installed[/] {escape(d.ref.name)}  [dim]({d.ref.variant} {d.ref.size}, {human_bytes(d.weights_bytes)}, {how})[/]")


@app.command("info")
@command
def info(
    model: Annotated[str, typer.Argument(help="Store name or folder path.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show what a model is, what it holds and what it needs."""
    from koe.service.models import inspect_model

    home = open_home()
    ref = home.models.resolve(model)
    d = home.models.get(ref.name) if ref.installed else inspect_model(ref)
    data = details_dict(d)
    if as_json:
        out.print_json(json.dumps(data))
        return
    rows = [
        ("name", d.ref.name), ("path", str(d.ref.path)), ("model", f"{d.ref.family} {d.ref.variant} ({d.ref.size})"),
        ("use it for", d.uses), ("parameters", f"{d.parameters / 1e6:.1f} M"),
        ("weights", f"{human_bytes(d.weights_bytes)} on disk ({d.stored_dtype})"),
        ("needs", f"~{human_bytes(d.memory_bytes('float32'))} in float32 (CPU, exact), ~{human_bytes(d.memory_bytes('bfloat16'))} in bfloat16 (GPU)"),
        ("speakers", ", ".join(d.speakers) or "—"), ("languages", ", ".join(d.languages) or "—"),
        ("origin", (d.origin or "—") + (" (symlink)" if d.linked else "")),
        ("added", time.strftime("%Y-%m-%d %H:%M", time.localtime(d.added_at)) if d.added_at else "—"),
        ("status", "ok" if d.ok else "missing " + ", ".join(d.missing)),
    ]  # fmt: skip
    if d.capabilities:
        caps = d.capabilities
        rows[3:3] = [("voices", ", ".join(sorted(caps.voice_modes)) or "—"), ("sample rate", f"{caps.sample_rate} Hz")]
    for k, v in rows:
        out.print(f"[bold]{k}[/]: {escape(v)}")
    if d.capabilities and d.capabilities.options.options:
        table = Table(title="options (koe speak --opt KEY=VALUE; HTTP: \"options\": {...})", title_justify="left")
        for column in ("option", "type", "default", "range", "what it does"):
            help_column = column == "what it does"
            table.add_column(column, no_wrap=not help_column, overflow="fold" if help_column else "ellipsis")  # names whole, to be copied
        for o in d.capabilities.options.options:
            table.add_row(o.name, o.type, "model's" if o.default is None else json.dumps(o.default), o.rule.removeprefix("must be ") or "—", o.help)
        out.print(table)


@app.command("remove")
@command
def remove(name: str) -> None:
    """Uninstall a model (a linked folder itself is left alone)."""
    open_home().models.remove(name)
    err.print(f"[green]removed model[/] {escape(name)}")


@app.command("pull")
@command
def pull(
    repo_id: Annotated[str, typer.Argument(help="Hub id, e.g. Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice, or a release's own id "
                                           "(OWNER/NAME/SUBFOLDER) where a repo holds several.")],
    arch: Annotated[str | None, typer.Option("--arch", help="Which release of a repo that holds several, by its architecture's name; "
                                             "or the architecture of a checkpoint repo released without its config.",
                                             show_default=False)] = None,
    name: Annotated[str | None, typer.Option("--name", help="Store name (default: the release's name, else the id's last part).")] = None,
    revision: Annotated[str | None, typer.Option("--revision", help="Branch, tag or commit.")] = None,
    token: Annotated[str | None, typer.Option("--token", envvar="HF_TOKEN", help="Hub token for gated/private repos.", show_default=False)] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite")] = False,
    timeout: Annotated[float, typer.Option("--connect-timeout", help="Seconds to wait for the hub before giving up.")] = 3.0,
) -> None:
    """Download a model from the Hugging Face hub (resumable; checksums verified; a release's vocoder too)."""
    from koe.service.hub import pull_model

    home = open_home()
    d = pull_model(home.models, repo_id, arch=arch, name=name, revision=revision, token=token, overwrite=overwrite, connect_timeout=timeout,
                   on_status=lambda msg: err.print(f"[dim]{escape(msg)}[/]"))  # fmt: skip
    err.print(f"[green]installed[/] {escape(d.ref.name)}  [dim]({d.ref.variant} {d.ref.size}, {human_bytes(d.weights_bytes)})[/]")
