"""A model's options as command-line flags: `--NAME VALUE` (switches: `--NAME` / `--no-NAME`) for each
option the model asked for declares (`Capabilities.options`, or `voice_options` for a voice prompt).

The shells never list a family's options: the model, known only once `--model` is read, brings its
own. `ModelOptionsCommand` takes every long flag the command itself does not have out of the
arguments before click parses them; the command then reads them as the model's options
(`model_flags`), each checked against the model's schema: a flag the model lacks is an error naming
the flags it has. `--opt KEY=VALUE` stays the long form (and reaches an option whose flag the
command already has for something else, such as `--speed`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import click
from typer.core import TyperCommand

from koe.cli.common import fail

META = "koe.model_flags"  # where parse_args leaves the flags for the command (click's ctx.meta)
_NUMBER = re.compile(r"-\d|-\.\d")  # a negative number is a value, not a flag


@dataclass(frozen=True)
class Flag:
    """One model flag as given: `--name` (its option `option`), with its value as text (None: bare), `negated` for `--no-name`."""

    flag: str
    option: str
    value: str | None
    negated: bool = False


def flag_name(option: str) -> str:
    """The flag of option `option` ("nfe_step" -> "--nfe-step")."""
    return "--" + option.replace("_", "-")


def _is_flag(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NUMBER.match(token)


class ModelOptionsCommand(TyperCommand):
    """A command (with a `--model` option) whose model's options are flags too (see the module doc).

    `switches(ctx, model)` (set by `model_options_command`) returns the names of the model's bool
    options, or None when the model cannot be read yet (say, a hub id not downloaded: a flag then
    takes the next argument as its value unless that is a flag, or it is `--no-NAME` or `--NAME=V`).
    """

    switches: Any = None  # Callable[[click.Context, str | None], set[str] | None]

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if any(a in ("--help", "-h") for a in args) or not args:
            return super().parse_args(ctx, args)
        own = {o for p in self.params for o in (*p.opts, *p.secondary_opts)}
        taking_values = {o for p in self.params if isinstance(p, click.Option) and not p.is_flag for o in p.opts}
        if "--" in args:  # after "--" every token is an argument (TEXT may start with a dash)
            cut = args.index("--")
            head, tail = args[:cut], args[cut:]
        else:
            head, tail = args, []
        switches = None
        if any(a.startswith("--") and a.partition("=")[0] not in own for a in head):
            switches = self.switches(ctx, _model_argument(head)) if self.switches is not None else None
        rest, flags, i = [], [], 0
        while i < len(head):
            token = head[i]
            if token in taking_values and i + 1 < len(head):
                rest += [token, head[i + 1]]
                i += 2
                continue
            name, eq, inline = token.partition("=")
            if not token.startswith("--") or name in own:
                rest.append(token)
                i += 1
                continue
            option = name[2:].replace("-", "_")
            negated = option.startswith("no_") and (switches is None or option[3:] in switches)
            if negated:
                flags.append(Flag(name, option[3:], inline if eq else None, negated=True))
            elif eq:
                flags.append(Flag(name, option, inline))
            elif switches is not None and option in switches:
                flags.append(Flag(name, option, None))
            elif i + 1 < len(head) and not _is_flag(head[i + 1]):
                flags.append(Flag(name, option, head[i + 1]))
                i += 1
            else:
                flags.append(Flag(name, option, None))
            i += 1
        ctx.meta[META] = flags
        return super().parse_args(ctx, rest + tail)


def _model_argument(args: list[str]) -> str | None:
    """The value of `--model`/`-m` in `args` (the last one given), read before click parses them."""
    model = None
    for i, token in enumerate(args):
        if token in ("--model", "-m") and i + 1 < len(args):
            model = args[i + 1]
        elif token.startswith("--model="):
            model = token.partition("=")[2]
        elif token.startswith("-m") and len(token) > 2 and not token.startswith("--"):
            model = token[2:]
    return model


def model_switches(schema_of: str):
    """A `switches` hook: the bool options of the model `--model` names (else the default), from its
    files alone (no download, no weights), in the capabilities' schema `schema_of` ("options" or
    "voice_options"); None when that model cannot be read now (the command says why)."""

    def switches(ctx: click.Context, model: str | None) -> set[str] | None:
        from koe.cli.common import open_home
        from koe.engines.registry import describe
        from koe.service.errors import KoeError

        try:
            home = open_home()
            try:
                ref = home.models.resolve(model, home.settings.models.default, download=False)
                schema = getattr(describe(ref.path).capabilities, schema_of)
            finally:
                home.close()
        except (KoeError, ValueError, OSError):
            return None
        return {o.name for o in schema.options if o.type == "bool"}

    return switches


def model_options_command(schema_of: str = "options") -> type[ModelOptionsCommand]:
    """The command class for a command whose model's `schema_of` options are flags."""
    return type("ModelOptionsCommand", (ModelOptionsCommand,), {"switches": staticmethod(model_switches(schema_of))})


def model_flags(ctx: click.Context) -> list[Flag]:
    """The model flags `ModelOptionsCommand` took out of the command's arguments."""
    return list(ctx.meta.get(META, ()))


def own_flags(ctx: click.Context) -> set[str]:
    """The flags the command has itself (a model option of the same name is reached with --opt)."""
    return {o for p in ctx.command.params for o in (*p.opts, *p.secondary_opts)}


def flag_values(flags: list[Flag], schema, model: str, *, taken: set[str] = frozenset(), what: str = "options") -> dict[str, Any]:
    """`flags` as option values of `schema` (an `OptionsSchema`) for the model `model`; exit 2 naming
    the model's flags for one it lacks (an option whose flag is in `taken`, the command's own, is
    shown as --opt NAME=), and the option's type for a value that is not one."""
    values: dict[str, Any] = {}
    for f in flags:
        option = schema.get(f.option)
        if option is None:
            have = ", ".join(f"--opt {n}=" if flag_name(n) in taken else flag_name(n) for n in schema.names) or "none"
            fail(
                f"no such option: {f.flag} (the model {model} has no option {f.option!r}); it takes these {what}: {have} "
                f"(`koe models info {model}` describes them)",
                2,
            )
        values[f.option] = _value(f, option)
    return values


_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def _value(f: Flag, option) -> Any:
    if option.type == "bool":
        if f.value is None:
            return not f.negated
        word = f.value.strip().lower()
        if word not in _TRUE + _FALSE or f.negated:
            fail(f"{f.flag} is a switch: give {flag_name(option.name)} or --no-{option.name.replace('_', '-')}", 2)
        return word in _TRUE
    if f.negated or f.value is None:
        fail(f"{f.flag} needs a value ({option.type}): {flag_name(option.name)} VALUE", 2)
    text = f.value.strip()
    if option.null and text.lower() in ("null", "none"):
        return None
    if option.type == "str":
        return f.value
    try:
        return int(text) if option.type == "int" and text.lstrip("+-").isdigit() else float(text)  # "1e3" too: the schema checks it is whole
    except ValueError:
        kind = "a whole number" if option.type == "int" else "a number"
        fail(f"{f.flag} {f.value!r}: must be {kind}", 2)
