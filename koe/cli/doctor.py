"""`koe doctor`: check the torch build against the hardware, the codecs, KOE_HOME and the models."""

import typer
from rich.markup import escape
from rich.table import Table

from koe.cli.common import command, err, open_home, out

_STYLE = {"ok": "[green]ok[/]", "warn": "[yellow]warn[/]", "fail": "[bold red]fail[/]"}


@command
def doctor() -> None:
    """Check this machine for koe: torch build vs hardware, codecs, KOE_HOME, installed models."""
    from koe.service.doctor import run_checks

    settings = open_home().settings
    with err.status("checking …", spinner="dots"):
        checks = run_checks(settings)
    table = Table("check", "status", "detail", box=None, pad_edge=False)
    for c in checks:
        table.add_row(escape(c.name), _STYLE[c.status], escape(c.detail))
    out.print(table)
    failed = [c for c in checks if c.status == "fail"]
    if failed:
        err.print(f"[bold red]{len(failed)} problem(s) found[/]")
        raise typer.Exit(1)
