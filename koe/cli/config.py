"""`koe config ...`: the effective settings and where each came from."""

import json
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from koe.cli.common import command, out, state

app = typer.Typer(help="Settings: koe.toml in KOE_HOME, KOE_<SECTION>__<KEY> env vars, flags.", no_args_is_help=True)


@app.command("show")
@command
def show(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Print every setting, its effective value and its source (default, koe.toml, env, flag)."""
    from koe.service.settings import load_settings

    settings = load_settings(state.home, state.flags)
    rows = list(settings.items())
    if as_json:
        out.print_json(json.dumps({r.key: {"value": r.display(), "source": r.source, "env": r.env_name} for r in rows}))
        return
    out.print(f"[dim]koe.toml: {escape(str(settings.toml_path))}{'' if settings.toml_path.is_file() else ' (not present)'}[/]")
    table = Table("setting", "value", "source", "env var", box=None, pad_edge=False)
    for r in rows:
        table.add_row(r.key, escape(r.display()), r.source, "KOE_HOME" if r.key == "home" else r.env_name)
    out.print(table)


@app.command("path")
@command
def path() -> None:
    """Print the path of koe.toml."""
    from koe.service.settings import load_settings

    out.print(str(load_settings(state.home, state.flags).toml_path))
