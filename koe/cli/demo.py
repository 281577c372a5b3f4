"""`koe demo`: the whole path end to end, with a real model if one is set up, else a random-weight one."""

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from koe.cli.common import command, err, open_home, warn

DEMO_MODEL = "demo-random-tiny"
DEMO_TEXT = "Hello from koe. This sentence went from text to speech on this machine."


@command
def demo(
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the audio.")] = Path("out/demo.wav"),
    text: Annotated[str, typer.Option("--text", help="What to say.")] = DEMO_TEXT,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Use this model instead of the default / test model.")] = None,
    seed: Annotated[int, typer.Option("--seed", min=0)] = 0,
    max_new_tokens: Annotated[int | None, typer.Option("--max-new-tokens", help="Cap on frames (the test model rarely stops by itself).")] = None,
) -> None:
    """Speak a sentence and write it to out/demo.wav: the configured model, or a tiny random-weight test model."""
    from koe.service.encode import format_for_path
    from koe.service.fsio import atomic_write_bytes
    from koe.service.requests import SpeechRequest
    from koe.service.synthesizer import Synthesizer

    home = open_home()
    spec = model or home.settings.models.default
    random_weights = spec is None
    if random_weights:
        spec = _ensure_demo_model(home)
        warn(f"no model configured: using {DEMO_MODEL}, a tiny model with RANDOM weights — the audio is noise-like, not speech. "
             f"For real speech: koe models pull {_released_example()} (or import a folder) and set models.default.")  # fmt: skip
        if max_new_tokens is None:
            max_new_tokens = 40  # ~3 s: random weights seldom say "end of speech"
    fmt = format_for_path(output)
    synth = Synthesizer(home)
    started = time.perf_counter()
    options = {"max_new_tokens": max_new_tokens} if max_new_tokens is not None else {}
    request = SpeechRequest(text=text, model=spec, seed=seed, format=fmt.name, options=options, save=False)
    plan = synth.plan(request)
    with err.status(f"speaking with {plan.model.name} ({plan.model.variant}) …", spinner="dots"):
        result = synth.speak(plan)
    for w in result.warnings:
        if not random_weights:
            warn(w)
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(output, result.audio)
    elapsed = time.perf_counter() - started
    err.print(f"[green]wrote[/] {escape(str(output.resolve()))}")
    err.print(
        f"  model {escape(plan.model.name)} ({plan.model.variant}{', random weights' if random_weights else ''}) at {escape(str(plan.model.path))}\n"
        f"  voice {escape(str(result.voice))}, seed {result.seed}, {result.format.name} {result.sample_rate} Hz, {result.duration:.2f} s of audio "
        f"in {elapsed:.1f} s (RTF {elapsed / max(result.duration, 1e-9):.2f})"
    )


def _ensure_demo_model(home) -> str:
    """The random-weight CustomVoice test model in the store, built on first use."""
    from koe.service.errors import NotFound

    try:
        home.models.get(DEMO_MODEL)
        return DEMO_MODEL
    except NotFound:
        pass
    from koe.engines.registry import write_fixture
    from koe.service.fsio import atomic_folder

    with err.status("building a tiny random-weight test model (once) …", spinner="dots"):
        with atomic_folder(home.models.root / DEMO_MODEL, replace=True) as tmp:
            write_fixture(tmp)
        home.models.register(DEMO_MODEL, "koe demo (random weights)")
    return DEMO_MODEL


def _released_example() -> str:
    from koe.engines.registry import DEMO_FAMILY, spec

    return spec(DEMO_FAMILY).released[0].repo_id
