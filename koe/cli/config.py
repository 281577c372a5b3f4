"""`koe config ...`: the effective settings and where each came from; set, get and unset one of them.

Also `koe models default [NAME]` (registered on the models app by koe.cli.main): it is a settings edit."""

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from koe.cli.common import command, err, fail, note, open_home, out, state, warn

MIN_VALUE_WIDTH = 16  # `koe config show` keeps the env var column only where the values get this much


def _complete_key(incomplete: str) -> list[str]:
    """Shell completion for KEY: the settings koe.toml may hold."""
    from koe.service.config.edit import setting_keys

    return [k for k in setting_keys() if k.startswith(incomplete)]


app = typer.Typer(help="Settings: koe.toml in KOE_HOME, KOE_<SECTION>__<KEY> env vars, flags.", no_args_is_help=True)


@app.command("show")
@command
def show(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Print every setting, its effective value and its source (default, koe.toml, env, flag)."""
    from koe.service.config.settings import load_settings

    settings = load_settings(state.home, state.flags)
    rows = list(settings.items())
    if as_json:
        out.print_json(json.dumps({r.key: {"value": r.display(), "source": r.source, "env": r.env_name} for r in rows}))
        return
    out.print(f"[dim]koe.toml: {escape(str(settings.toml_path))}{'' if settings.toml_path.is_file() else ' (not present)'}[/]")
    cells = [(r.key, r.display(), "env" if r.source.startswith("env ") else r.source, "KOE_HOME" if r.key == "home" else r.env_name) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    with_env = out.width - widths[0] - widths[2] - widths[3] - 3 * 2 >= MIN_VALUE_WIDTH  # else the rule, once, under the table
    table = Table(box=None, pad_edge=False)
    table.add_column("setting", no_wrap=True, min_width=widths[0])  # names whole: they are typed back into `koe config set`
    table.add_column("value", overflow="fold", ratio=1)
    table.add_column("source", no_wrap=True, min_width=widths[2])
    if with_env:
        table.add_column("env var", no_wrap=True, min_width=widths[3])
    for key, value, source, env in cells:
        table.add_row(key, escape(value), escape(source), *([env] if with_env else []))
    out.print(table)
    if not with_env:
        out.print("[dim]env var: KOE_<SECTION>__<NAME> (e.g. KOE_SERVER__PORT); home: KOE_HOME[/]")


@app.command("path")
@command
def path() -> None:
    """Print the path of koe.toml."""
    from koe.service.config.settings import load_settings

    out.print(str(load_settings(state.home, state.flags).toml_path))


@app.command("get")
@command
def get(
    key: Annotated[
        str,
        typer.Argument(
            metavar="KEY", help="Dotted setting, e.g. server.port, models.default, synthesis.options.NAME.", show_default=False, autocompletion=_complete_key
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: value, source, env var.")] = False,
) -> None:
    """Print one setting's effective value (stdout) and where it came from (stderr)."""
    from koe.service.config.edit import get_value

    value = get_value(state.home, key, state.flags)
    if as_json:
        shown = value.display if value.key == "server.token" else value.value
        out.print_json(json.dumps({"key": value.key, "value": shown, "source": value.source, "env": value.env_name}, default=str))
        return
    out.print(escape(value.display))
    note(f"{value.key}: from {value.source}")


@app.command("set", context_settings={"ignore_unknown_options": True})  # `koe config set synthesis.seed -5` is a value, not an option
@command
def set_(
    key: Annotated[
        str, typer.Argument(metavar="KEY", help="Dotted setting, e.g. server.port, models.default.", show_default=False, autocompletion=_complete_key)
    ],
    value: Annotated[
        str, typer.Argument(metavar="VALUE", help="The value: a number, true/false, a choice, a,b for lists, {k = v} for tables.", show_default=False)
    ],
) -> None:
    """Validate VALUE and write it to koe.toml (comments and layout kept; `auto`/empty clears an optional setting)."""
    from koe.service.config.edit import set_value

    _report(set_value(state.home, key, value))


@app.command("unset")
@command
def unset(
    key: Annotated[
        str,
        typer.Argument(metavar="KEY", help="Dotted setting to remove from koe.toml (back to its default).", show_default=False, autocompletion=_complete_key),
    ],
) -> None:
    """Remove KEY from koe.toml, so its default (or env var) applies again."""
    from koe.service.config.edit import unset_value

    _report(unset_value(state.home, key))


def _report(change) -> None:
    """One line for an edit of koe.toml, and a warning when an env var overrides the file."""
    where = escape(str(change.path))
    if change.value is None:
        err.print(f"[green]unset[/] {change.key}  [dim]({where})[/]" if change.changed else f"[dim]{change.key} was not set in {where}[/]")
    else:
        shown = "********" if change.key == "server.token" else json.dumps(change.value) if not isinstance(change.value, str) else change.value
        verb = "set" if change.changed else "unchanged:"
        err.print(f"[green]{verb}[/] {change.key} = {escape(shown)}  [dim]({where})[/]")
    if change.overridden_by:
        warn(f"{change.overridden_by} is set in the environment and overrides koe.toml")


@command
def models_default(
    name: Annotated[
        str | None, typer.Argument(metavar="NAME", help="An installed model, a hub id or a model folder; without it, print the default.", show_default=False)
    ] = None,
) -> None:
    """Set models.default (the model used when a request names none), or print it."""
    from koe.service.config.edit import get_value, set_value

    if name is None:
        current = get_value(state.home, "models.default", state.flags)
        if not current.display:
            fail("no default model set: `koe models default NAME` sets one (`koe models list` shows the installed)")
        out.print(escape(current.display))
        note(f"models.default: from {current.source}")
        return
    from pathlib import Path

    from koe.service.errors import Unavailable
    from koe.service.store.resolve import is_hub_id

    home = open_home()
    try:
        ref = home.models.resolve(name, download=False)  # installed, a folder koe runs, or a hub id here (store or HF cache)
    except Unavailable:
        if not is_hub_id(name):
            raise
        ref = None  # a release koe runs that is not here yet: its first use downloads it
        note(f"{name} is not downloaded yet: the first use downloads it (or run `koe models pull {name}` now)")
    folder = Path(name).expanduser()
    if ref is not None and not ref.installed and folder.is_dir():
        name = str(folder.resolve())  # koe.toml is read from any working directory
    _report(set_value(state.home, "models.default", name))
