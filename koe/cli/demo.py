"""`koe demo`: the whole path end to end, with real words where it can.

The model: `--model`, else `models.default`, else the family's first released model (the 0.6B
CustomVoice release of Qwen3-TTS) from the store or the Hugging Face cache (koe.service.resolve),
else downloaded into the store when the hub is reachable (what, how big and where said first; a
progress bar; resumable). Nothing global is set: the next run finds it in the store. With `--offline` / `KOE_DEMO_OFFLINE=1`, or when the download
cannot happen (offline, hub unreachable, a failed pull), a tiny random-weight model of the same
layout speaks instead, saying so and why.
"""

import os
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from koe.cli.common import command, err, open_home, warn

DEMO_MODEL = "demo-random-tiny"
OFFLINE_ENV = "KOE_DEMO_OFFLINE"  # set (1/true/yes/on): never download, use the random-weight model
DEMO_TEXT = "Hello from koe. This sentence went from text to speech on this machine."


@command
def demo(
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the audio.")] = Path("out/demo.wav"),
    text: Annotated[str, typer.Option("--text", help="What to say.")] = DEMO_TEXT,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Use this model instead of the default / test model.")] = None,
    seed: Annotated[int, typer.Option("--seed", min=0)] = 0,
    max_new_tokens: Annotated[int | None, typer.Option("--max-new-tokens", help="Cap on frames (the test model rarely stops by itself).")] = None,
    offline: Annotated[bool, typer.Option("--offline", envvar=OFFLINE_ENV, help="Download nothing: without a configured model, "
                                          "use the tiny random-weight test model.", show_default=False)] = False,
) -> None:
    """Speak a sentence into out/demo.wav: the configured model, else the real 0.6B CustomVoice (downloaded once), else a random-weight one."""
    from koe.service.encode import format_for_path
    from koe.service.fsio import atomic_write_bytes
    from koe.service.requests import SpeechRequest
    from koe.service.synthesizer import Synthesizer

    home = open_home()
    spec = model or home.settings.models.default
    why = None
    if spec is None:
        spec, why = _released_model(home, offline)
    random_weights = spec is None
    if random_weights:
        spec = _ensure_demo_model(home)
        warn(f"{why}: using {DEMO_MODEL}, a tiny model with RANDOM weights — the audio is noise-like, not speech. "
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


def _released_model(home, offline: bool) -> tuple[str | None, str | None]:
    """(model, None) for the demo's real model: from the store or the Hugging Face cache (the resolver's
    order, nothing downloaded), else pulled now into the store; (None, why not) when it cannot be had."""
    from koe.cli.models import pull_with_progress
    from koe.service.errors import KoeError, Unavailable
    from koe.service.resolve import Downloads, free_name, release_for, resolve_model

    repo = _released_example()
    try:
        ref = resolve_model(home.models, repo, downloads=Downloads(False, "the demo downloads it itself"))
        return (ref.name if ref.installed else str(ref.path)), None
    except Unavailable:
        pass  # not here: download it
    if offline:
        how = "--offline" if os.environ.get(OFFLINE_ENV) is None else f"{OFFLINE_ENV} is set"
        return None, f"no model configured and {how}, so {repo} is not downloaded"
    name = free_name(home.models, release_for(repo)[1])
    err.print(f"no model configured: fetching the real {escape(repo)} into {escape(str(home.models.root / name))} "
              f"once (skip with {OFFLINE_ENV}=1) …")  # fmt: skip
    try:
        d, bar = pull_with_progress(home.models, repo, name=name, talk=True)
    except KoeError as e:
        return None, f"no model configured and {repo} could not be downloaded ({e.message})"
    err.print(f"[green]installed[/] {escape(d.ref.name)}[dim]: {bar.summary()}; `koe demo` uses it from now on[/]")
    return d.ref.name, None


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
    from koe.text.qwen_vocab import VOCAB_PACKAGE, resolve_vocabulary

    vocabulary = resolve_vocabulary("auto")
    if vocabulary == "synthetic":
        warn(f"{VOCAB_PACKAGE} (the real Qwen text vocabulary) is not installed: the test model gets a small synthetic "
             "vocabulary instead; its random weights speak noise either way")  # fmt: skip
    with err.status("building a tiny random-weight test model (once) …", spinner="dots"):
        with atomic_folder(home.models.root / DEMO_MODEL, replace=True) as tmp:
            write_fixture(tmp, vocabulary=vocabulary)
        home.models.register(DEMO_MODEL, "koe demo (random weights)")
    return DEMO_MODEL


def _released_example() -> str:
    from koe.engines.registry import DEMO_FAMILY, spec

    return spec(DEMO_FAMILY).released[0].repo_id
