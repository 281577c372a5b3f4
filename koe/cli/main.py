"""The `koe` command: speak, convert, voices, models, train, config, history, doctor, serve, demo, bench."""

from pathlib import Path
from typing import Annotated

import typer

from koe.cli import config, convert, demo, doctor, history, models, serve, speak, train, voices
from koe.cli.common import KoeGroup, configure_logging, state
from koe.cli.model_options import model_options_command

app = typer.Typer(
    name="koe",
    cls=KoeGroup,  # flags shown without a <bool> placeholder
    help="koe (声): open text-to-speech models, natively in PyTorch.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,  # koe --install-completion / --show-completion
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from koe import __version__

        typer.echo(f"koe {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    home: Annotated[Path | None, typer.Option("--home", help="KOE_HOME for this run (models, voices, outputs, koe.toml).", show_default=False)] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress and show tracebacks.")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")] = False,
) -> None:
    """koe (声): open text-to-speech models, natively in PyTorch."""
    from koe.runtime.process import keep_freed_memory, reproducible_blas

    reproducible_blas()  # before torch loads: MKL's products independent of memory alignment (koe.runtime.process)
    keep_freed_memory()  # malloc reuses freed tensors' pages instead of faulting new ones in (koe.runtime.process)
    state.home = str(home) if home else None
    state.verbose = verbose
    state.flags = {}
    configure_logging(verbose, server=ctx.invoked_subcommand == "serve")  # a server's log keeps its tracebacks for the operator


app.command("speak", cls=model_options_command("options"))(speak.speak)  # the model's options are flags too
app.command("convert")(convert.convert)
app.add_typer(voices.app, name="voices")
app.add_typer(models.app, name="models")
models.app.command("default")(config.models_default)  # a settings edit, so its code lives with `koe config`
app.add_typer(train.app, name="train")
app.add_typer(config.app, name="config")
app.add_typer(history.app, name="history")
app.command("doctor")(doctor.doctor)
app.command("serve")(serve.serve)
app.command("demo")(demo.demo)


@app.command("bench", add_help_option=False, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def bench(ctx: typer.Context) -> None:
    """Benchmark a model family here on random weights at the released sizes, optionally against upstream and peer runtimes (`koe bench --help`)."""
    from koe.bench import main as bench_main

    raise typer.Exit(bench_main(list(ctx.args)))


if __name__ == "__main__":
    app()
