"""What every command shares: the consoles, global options, opening KOE_HOME, error reporting, and the root group."""

import functools
import logging
import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

out = Console(highlight=False, soft_wrap=True)  # results (tables, listings)
err = Console(stderr=True, highlight=False, soft_wrap=True)  # progress, notes, warnings, errors

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class GlobalOptions:
    """Options given before the command (`koe --home DIR -v speak ...`)."""

    home: str | None = None
    verbose: bool = False
    flags: dict[str, Any] = field(default_factory=dict)


state = GlobalOptions()


def fail(message: str, code: int = 1) -> NoReturn:
    """Print a one-line error and exit with `code`."""
    err.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


def note(message: str) -> None:
    err.print(f"[dim]{escape(message)}[/]")


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(message)}")


def command(fn: F) -> F:
    """Wrap a command so every error becomes one clear line and a non-zero exit (traceback with -v)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from koe.audio.errors import AudioError
        from koe.runtime.precision import UnsupportedPrecision
        from koe.service.errors import KoeError

        with warnings.catch_warnings():
            # Engines also put these warnings in their results, which the commands print.
            warnings.filterwarnings("ignore", category=UserWarning, module=r"koe\.")
            try:
                return fn(*args, **kwargs)
            except (typer.Exit, typer.Abort, SystemExit):
                raise
            except KoeError as e:
                if state.verbose:
                    err.print_exception()
                fail(str(e), 2 if e.status < 500 and e.status != 429 else 1)
            except AudioError as e:
                fail(f"audio: {e}", 2)
            except UnsupportedPrecision as e:  # a model loaded directly (not through a plan) in a mode it does not run
                fail(str(e), 2)
            except KeyboardInterrupt:
                fail("interrupted", 130)
            except BrokenPipeError:
                _quiet_broken_pipe()
                raise typer.Exit(141) from None
            except OSError as e:
                if state.verbose:
                    err.print_exception()
                where = f"{e.filename}: " if e.filename else ""
                fail(f"{where}{e.strerror or e}")
            except Exception as e:  # noqa: BLE001 - the last line of defence: one line, never a traceback
                if state.verbose:
                    err.print_exception()
                    raise typer.Exit(1) from None
                fail(f"unexpected {type(e).__name__}: {e} (run `koe -v ...` for the traceback)")

    return wrapper  # type: ignore[return-value]


def _quiet_broken_pipe() -> None:
    """After the reader of stdout went away, stop Python complaining at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def open_home(**flags: Any):
    """Settings (defaults < koe.toml < env < `flags` and the global flags) and their KOE_HOME, opened."""
    from koe.service.config.settings import load_settings
    from koe.service.home import KoeHome

    merged: dict[str, Any] = {}
    for source in (state.flags, flags):
        for section, values in source.items():
            merged.setdefault(section, {}).update({k: v for k, v in (values or {}).items() if v is not None})
    home = KoeHome(load_settings(state.home, merged))
    _announce_downloads(home)
    return home


def _announce_downloads(home) -> None:
    """A hub id's first use downloads it (`models.download`): its steps on stderr and a byte bar on a terminal."""
    from rich.markup import escape

    from koe.cli.progress import FirstUseProgress, wanted

    home.models.on_status = lambda msg: err.print(f"[dim]{escape(msg)}[/]")
    home.models.on_progress = FirstUseProgress(wanted(None))


LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"


def configure_logging(verbose: bool, server: bool = False) -> None:
    """Log to stderr: INFO with -v, else WARNING, through `log_handler`."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[log_handler(verbose, server)])


def log_handler(verbose: bool, server: bool = False) -> logging.Handler:
    """A terminal is its user's: without -v a record is one line, no traceback, and a record whose error the command
    gets too (`koe.service.synthesis.cache.RAISED`) is left to the command's one `error:` line. A server's log (`server`) is its
    operator's, and -v asks for the whole story: every record whole, tracebacks included."""
    handler = logging.StreamHandler(sys.stderr)
    if verbose or server:
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
    else:
        handler.setFormatter(_OneLine(LOG_FORMAT))
        handler.addFilter(lambda record: not getattr(record, "raised", False))
    return handler


class _OneLine(logging.Formatter):
    """A record's message without its traceback or stack."""

    def formatException(self, ei) -> str:
        return ""

    def formatStack(self, stack_info: str) -> str:
        return ""


def human_bytes(n: int | float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def parse_options(pairs: list[str] | None) -> dict[str, Any]:
    """`--opt KEY=VALUE` pairs as a dict: VALUE is read as JSON where it is one (numbers, true,
    false, null), else kept as text. The model's schema checks them when the request is planned."""
    import json

    options: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            fail(f"--opt {pair!r}: give KEY=VALUE, an option of the model and its value (`koe models info MODEL` lists them)", 2)
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    return options


class KoeGroup(TyperGroup):
    """The root command group: before it runs, every flag in the tree is shown without a placeholder.

    Typer 0.29 renders an option's value placeholder from `TyperOption.display_type_rich`, which
    gives `<bool>` for plain flags (`--stream`, `--json`, `--save/--no-save`, `--help`), as if they
    took a value. An explicit metavar wins there, so `plain_flags` gives each flag an empty one;
    other placeholders (`<str>`, `<path>`, `KEY=VALUE`) are left as they are. It runs in `main`
    because typer adds the completion options after the group is built, and it also reaches the
    `--help` options, which click makes lazily per command.
    """

    def main(self, *args: Any, **kwargs: Any) -> Any:
        plain_flags(self, self.context_settings.get("help_option_names") or ["--help"])
        return super().main(*args, **kwargs)


def plain_flags(cmd: Any, help_names: list[str]) -> None:
    """Give every flag (and the `--help` option) of `cmd` and its subcommands an empty metavar."""
    help_option = cmd.get_help_option(typer.Context(cmd, help_option_names=help_names)) if cmd.add_help_option else None
    for param in [*cmd.params, *([help_option] if help_option is not None else [])]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for sub in getattr(cmd, "commands", {}).values():
        plain_flags(sub, sub.context_settings.get("help_option_names") or help_names)
