"""`koe models ...`: the model store."""

import json
import re
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from koe.cli.common import command, err, human_bytes, open_home, out

LARGE_FOLDER_BYTES = 64 * 2**20  # an import this big gets a progress bar on a terminal

app = typer.Typer(help="Models: list, import a folder, info, remove, pull from the Hugging Face hub.", no_args_is_help=True)


def _size(d) -> str:
    """A model's size from its parameter count (11M, 0.9B), and "random weights" for a test model."""
    return d.size + (", random weights" if d.random_weights else "")


def short_origin(origin: str | None) -> str:
    """An origin with its commit SHAs cut to 12 characters (hub:REPO@SHA + ...), for a table."""
    return re.sub(r"@([0-9a-f]{12})[0-9a-f]{28}\b", r"@\1", origin or "")


def license_rows(license, licenses=None) -> list[tuple[str, str]]:
    """`koe models info`'s lines about a model's licence: which, where to read it, its key terms, and
    for one that needs acceptance whether it was accepted in this store."""
    if license is None:
        return [("license", "not declared by its family (see where the model was published)")]
    rows = [("license", license.title + (f" — {license.where()}" if license.where() else ""))]
    if license.summary:
        rows.append(("license terms", license.summary))
    if license.needs_acceptance:
        found = licenses.get(license) if licenses is not None else None
        said = "not yet: `koe models pull` asks for it (--accept-license)"
        if found is not None:
            said = "yes, " + time.strftime("%Y-%m-%d %H:%M", time.localtime(found.accepted_at)) + (f" ({found.by})" if found.by else "")
        rows.append(("license accepted", said))
    return rows


def details_dict(d, licenses=None) -> dict:
    """A model's details as plain JSON-able data (`licenses`: the store's accepted licences, for `license.accepted_at`)."""
    from koe.service.store.licenses import license_data

    return {
        "name": d.ref.name,
        "path": str(d.ref.path),
        "family": d.ref.family,
        "variant": d.ref.variant,
        "size": d.ref.size,
        "uses": d.uses,
        "random_weights": d.random_weights,
        "parameters": d.parameters,
        "weights_bytes": d.weights_bytes,
        "stored_dtype": d.stored_dtype,
        "memory_float32_bytes": d.memory_bytes("float32"),
        "memory_bfloat16_bytes": d.memory_bytes("bfloat16"),
        "speakers": d.speakers,
        "languages": d.languages,
        "missing": d.missing,
        "origin": d.origin,
        "linked": d.linked,
        "added_at": d.added_at,
        "capabilities": d.capabilities.to_dict() if d.capabilities else None,
        "revisions": hub_revisions(d.origin),
        "license": license_data(d.license, licenses),
    }


def hub_revisions(origin: str | None) -> list[dict]:
    """The hub commits a pulled model came from: [{"repo", "subfolder", "sha"}] (empty for an import)."""
    out = []
    for part in (origin or "").split(" + "):
        m = re.fullmatch(r"hub:([^/@\s]+/[^/@\s]+)(?:/([^@\s]+))?@(\S+)", part.strip())
        if m:
            out.append({"repo": m[1], "subfolder": m[2] or "", "sha": m[3]})
    return out


@app.command("list")
@command
def list_models(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List installed models."""
    home = open_home()
    models = home.models.list()
    if as_json:
        out.print_json(json.dumps([details_dict(d, home.models.licenses) for d in models]))
        return
    if not models:
        err.print("no models installed: koe models import PATH, koe models pull ID, or koe demo for a test model")
        return
    default = home.settings.models.default
    origins = [("→ " if d.linked else "") + short_origin(d.origin) for d in models]
    table = Table("name", "variant", "size", "weights", box=None, pad_edge=False)
    hub = [len(o) for o in origins if o.lstrip("→ ").startswith("hub:")]
    table.add_column("origin", no_wrap=bool(hub), min_width=min(max(hub, default=0), 48) or None)  # a hub origin's short SHA stays whole
    for d, origin in zip(models, origins, strict=True):
        mark = " [green](default)[/]" if default and default.lower() == d.ref.name.lower() else ""
        table.add_row(escape(d.ref.name) + mark, d.ref.variant, _size(d), human_bytes(d.weights_bytes), escape(origin))
    out.print(table)


@app.command("import")
@command
def import_model(
    path: Annotated[
        Path, typer.Argument(help="A model folder in its released layout (configs, weights, tokenizer files), or a release's checkpoint folder (with --arch).")
    ],
    name: Annotated[str | None, typer.Option("--name", help="Store name (default: the folder's name).")] = None,
    link: Annotated[bool, typer.Option("--link", help="Keep a symlink to the folder instead of a copy.")] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite")] = False,
    arch: Annotated[
        str | None,
        typer.Option(
            "--arch",
            help="The architecture, by name, of a checkpoint released without its config: "
            "its config is written into the copy (a wrong name is an error listing the names koe knows).",
            show_default=False,
        ),
    ] = None,
    vocoder: Annotated[
        Path | None,
        typer.Option(
            "--vocoder",
            help="A vocoder folder to copy in, for a release that ships without its vocoder (the error for such a folder says which one).",
            show_default=False,
        ),
    ] = None,
    progress: Annotated[
        bool | None,
        typer.Option("--progress/--no-progress", help="A bar of the bytes copied (default: on a terminal, for folders of 64 MB or more).", show_default=False),
    ] = None,
) -> None:
    """Install a local model folder into the store (completed and validated first)."""
    from koe.cli.progress import tree_bytes, wanted, watch_copy

    home = open_home()
    total = 0 if link or not path.is_dir() else tree_bytes(path)
    if total and (progress or (progress is None and total >= LARGE_FOLDER_BYTES and wanted(None))):  # a bar of the bytes copied
        with watch_copy(home.models.root, total, f"copying {escape(path.name)}", show=True):
            d = home.models.import_model(path, name, link=link, overwrite=overwrite, arch=arch, vocoder=vocoder)
    else:
        with err.status(f"importing {escape(str(path))} …", spinner="dots"):
            d = home.models.import_model(path, name, link=link, overwrite=overwrite, arch=arch, vocoder=vocoder)
    how = "linked" if d.linked else "copied"
    err.print(f"[green]installed[/] {escape(d.ref.name)}  [dim]({d.ref.variant} {_size(d)}, {human_bytes(d.weights_bytes)}, {how})[/]")


@app.command("info")
@command
def info(
    model: Annotated[str, typer.Argument(help="Store name or folder path.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show what a model is, what it holds and what it needs."""
    from koe.service.store.models import inspect_model

    home = open_home()
    ref = home.models.resolve(model)
    d = home.models.get(ref.name) if ref.installed else inspect_model(ref)
    data = details_dict(d, home.models.licenses)
    if as_json:
        out.print_json(json.dumps(data))
        return
    rows = [
        ("name", d.ref.name),
        ("path", str(d.ref.path)),
        ("model", f"{d.ref.family} {d.ref.variant} ({_size(d)})"),
        ("use it for", d.uses),
        ("parameters", f"{d.parameters / 1e6:.1f} M"),
        ("weights", f"{human_bytes(d.weights_bytes)} on disk ({d.stored_dtype})"),
        (
            "needs",
            f"~{human_bytes(d.memory_bytes('float32'))} in float32 (CPU, exact)"
            + (f", ~{human_bytes(d.memory_bytes('bfloat16'))} in bfloat16 (GPU)" if d.capabilities is None or "bf16" in d.capabilities.precisions else ""),
        ),
        ("speakers", ", ".join(d.speakers) or "—"),
        ("languages", ", ".join(d.languages) or "—"),
        ("origin", (d.origin or "—") + (" (symlink)" if d.linked else "")),
        *(("revision", f"{r['repo']}{'/' + r['subfolder'] if r['subfolder'] else ''} at commit {r['sha']}") for r in data["revisions"]),
        ("added", time.strftime("%Y-%m-%d %H:%M", time.localtime(d.added_at)) if d.added_at else "—"),
        ("status", "ok" if d.ok else "missing " + ", ".join(d.missing)),
        *license_rows(d.license, home.models.licenses),
    ]
    if d.capabilities:
        caps = d.capabilities
        rows[3:3] = [
            ("voices", ", ".join(sorted(caps.voice_modes)) or "—"),
            *((("conversion", "yes: koe convert SPEECH --voice NAME (POST /v1/audio/conversions)"),) if caps.conversion else ()),
            ("sample rate", f"{caps.sample_rate} Hz"),
            ("precisions", ", ".join(caps.precisions) + " (--precision; fp32 = exact)"),
            *((("training", ", ".join(f"koe train {method}" for method in caps.training)),) if caps.training else ()),
        ]
    for k, v in rows:
        out.print(f"[bold]{k}[/]: {escape(v)}")
    if d.capabilities:
        _options_table('options (koe speak --NAME VALUE, a switch --NAME / --no-NAME, or --opt KEY=VALUE; HTTP: "options": {...})', d.capabilities.options)
        _options_table("voice options (koe voices prepare --NAME VALUE; koe speak too, where also an option above)", d.capabilities.voice_options)


def _options_table(title: str, schema) -> None:
    """A model's options of one kind (their flags: NAME with dashes, `koe.cli.model_options`); nothing for none."""
    if not schema.options:
        return
    table = Table(title=title, title_justify="left")
    for column in ("option", "type", "default", "range", "what it does"):
        help_column = column == "what it does"
        table.add_column(column, no_wrap=not help_column, overflow="fold" if help_column else "ellipsis")  # names whole, to be copied
    for o in schema.options:
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
    repo_id: Annotated[str, typer.Argument(help="Hub id (OWNER/NAME), or a release's own id (OWNER/NAME/SUBFOLDER) where a repo holds several.")],
    arch: Annotated[
        str | None,
        typer.Option(
            "--arch",
            help="Which release of a repo that holds several, by its architecture's name; "
            "or the architecture of a checkpoint repo released without its config.",
            show_default=False,
        ),
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="Store name (default: the release's name, else the id's last part).")] = None,
    revision: Annotated[
        str | None,
        typer.Option(
            "--revision", help="Branch, tag or commit of the repo (default: main); the commit it names is recorded in the model's origin.", show_default=False
        ),
    ] = None,
    token: Annotated[str | None, typer.Option("--token", envvar="HF_TOKEN", help="Hub token for gated/private repos.", show_default=False)] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite")] = False,
    accept_license: Annotated[
        bool,
        typer.Option(
            "--accept-license",
            help="Accept the model's licence where it must be accepted (`koe models info` shows it), without being asked: for scripts. "
            "Without it koe shows the licence and asks on a terminal, and refuses elsewhere, before downloading anything. "
            "An acceptance is recorded in the model store: models under the same licence do not ask again.",
        ),
    ] = False,
    timeout: Annotated[float, typer.Option("--connect-timeout", help="Seconds to wait for the hub before giving up.")] = 3.0,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help="A progress bar (bytes, speed, time left) and each step (default: on a terminal; otherwise one summary line).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Download a model from the Hugging Face hub (resumable to the byte; checksums verified; a release's vocoder too).

    A model under a licence that must be accepted (`koe models info` shows a model's licence) is
    downloaded once you accept it: koe shows the licence and asks, or `--accept-license` accepts it.
    """
    home = open_home()
    _accept_license(home.models, repo_id, arch, accept_license)
    d, bar = pull_with_progress(
        home.models, repo_id, arch=arch, name=name, revision=revision, token=token, overwrite=overwrite, connect_timeout=timeout, progress=progress
    )
    err.print(f"[green]installed[/] {escape(d.ref.name)}  [dim]({d.ref.variant} {_size(d)}, {human_bytes(d.weights_bytes)}) from {escape(d.origin or '')}[/]")
    err.print(f"[dim]  downloaded {bar.summary()}[/]")


def can_ask() -> bool:
    """Whether koe may ask the user a question: stdin is a terminal."""
    return sys.stdin.isatty()


def _ask(license, release) -> bool:
    from koe.service.store.licenses import license_question

    err.print(escape(license_question(license, release)))
    return typer.confirm("Accept this licence? (recorded in the model store; not asked again)", default=False, err=True)


def _accept_license(store, repo_id: str, arch: str | None, accept: bool) -> None:
    """Before a pull: the licence of the release `repo_id` means accepted (on record, by `--accept-license`,
    or asked on a terminal) where it needs acceptance; `LicenseNotAccepted` (nothing downloaded) otherwise."""
    from koe.service.store.licenses import accept_release_license
    from koe.service.store.resolve import release_for

    _, release = release_for((repo_id or "").strip(), arch)
    if release.license is None or not release.license.needs_acceptance or store.licenses.get(release.license) is not None:
        return
    how = "pass --accept-license to accept it" + ("" if can_ask() else "; koe asks only on a terminal")
    accept_release_license(store.licenses, release, accept=accept, ask=_ask if can_ask() else None, hint=how)
    err.print(f"[green]accepted[/] {escape(release.license.title)}[dim]: recorded in the model store; not asked again[/]")


def pull_with_progress(store, repo_id: str, *, progress: bool | None = None, talk: bool | None = None, **kwargs):
    """`pull_model` with a byte bar on stderr (on a terminal, or as `progress` says) and its steps (with the bar,
    with -v, or as `talk` says); (details, the bar)."""
    from koe.cli.common import state
    from koe.cli.progress import ByteProgress, wanted
    from koe.service.store.hub import pull_model

    show = wanted(progress)
    talk = (show or state.verbose) if talk is None else talk
    with ByteProgress(f"pulling {escape(repo_id)}", show) as bar:
        d = pull_model(store, repo_id, on_status=(lambda msg: err.print(f"[dim]{escape(msg)}[/]")) if talk else None, on_progress=bar, **kwargs)
    return d, bar
