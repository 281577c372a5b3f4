"""`koe serve`: run the OpenAI-compatible HTTP server (koe.server, loaded only here)."""

import importlib
from typing import Annotated

import typer

from koe.cli.common import command, open_home


@command
def serve(
    host: Annotated[str | None, typer.Option("--host", help="Address to bind (default 127.0.0.1; others need --token).")] = None,
    port: Annotated[int | None, typer.Option("--port", "-p", help="TCP port.")] = None,
    token: Annotated[str | None, typer.Option("--token", help="Bearer token clients must send.", show_default=False)] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Default model (folder or store name).")] = None,
    device: Annotated[str | None, typer.Option("--device", help="cpu, cuda, cuda:1, mps.")] = None,
    dtype: Annotated[str | None, typer.Option("--dtype", help="float32, bfloat16, float16.")] = None,
    precision: Annotated[
        str | None,
        typer.Option(
            "--precision", help="Opt-in speed mode that changes bits: bf16, int8 or int4 (CPU), as the model runs them (koe models info); fp32 = exact."
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host", metavar="HOST", help="A Host name to answer besides loopback and the bound address ('*' = any; repeatable).", show_default=False
        ),
    ] = None,
    allow_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-origin", metavar="ORIGIN", help="A web origin (scheme://host[:port]) that may make changes ('*' = any; repeatable).", show_default=False
        ),
    ] = None,
) -> None:
    """Serve /v1/audio/speech (OpenAI's API), /v1/models, voices, /health, and the web page at /."""
    from koe.runtime.process import prefer_huge_pages
    from koe.service.errors import Unavailable

    prefer_huge_pages()  # before torch loads: weights on 2 MB pages (a long-lived process; koe.runtime.process)

    settings = open_home(
        server={"host": host, "port": port, "token": token, "allowed_hosts": allow_host or None, "allowed_origins": allow_origin or None},
        models={"default": model, "device": device, "dtype": dtype, "precision": precision},
    ).settings
    try:
        server = importlib.import_module("koe.server.app")
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith("koe.server"):
            raise Unavailable("the HTTP server is not part of this koe build (koe.server.app is missing)") from e
        raise Unavailable(f"the server needs {e.name}: pip install 'koe[server]'") from e
    run = getattr(server, "run", None)
    if run is None:
        raise Unavailable("koe.server.app has no run(settings)")
    run(settings)
