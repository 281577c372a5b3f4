"""`koe demo`: the whole path end to end, with real words where it can.

The model: `--model`, else `models.default`, else the family's first released model (the 0.6B
CustomVoice release of Qwen3-TTS) from the store or the Hugging Face cache (koe.service.store.resolve),
else downloaded into the store when the hub is reachable (what, how big and where said first; each
step and a progress bar; resumable). Nothing global is set: the next run finds it in the store. With `--offline` / `KOE_DEMO_OFFLINE=1`, or when the download
cannot happen (offline, hub unreachable, a failed pull), a tiny random-weight model of the same
layout speaks instead, saying so and why. `--family NAME` tries that family offline: its tiny
random-weight model, built once into the store (`demo-random-tiny`, `demo-random-tiny-f5-tts`, ...).

Random weights make full-scale noise: the demo writes it at a safe level (peak `SAFE_PEAK_DBFS`) and
says so, and says why such a model's speech is cut off (it seldom predicts the end of speech).
"""

import math
import os
import time
import warnings
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from koe.cli.common import command, err, fail, open_home, warn
from koe.cli.speak import OWN_VOICE

DEMO_MODEL = "demo-random-tiny"  # the default family's test model; another family's is demo-random-tiny-<family>
OFFLINE_ENV = "KOE_DEMO_OFFLINE"  # set (1/true/yes/on): never download, use the random-weight model
DEMO_TEXT = "Hello from koe. This sentence went from text to speech on this machine."
RANDOM_SECONDS = 3.0  # how much audio a random-weight model makes (they seldom say "end of speech")
SAFE_PEAK_DBFS = -20.0  # random-weight noise is written no louder than this
REFERENCE_TEXT = "This is the reference clip of the demo."  # said to a family that only clones (F5-TTS), with a synthetic clip


@command
def demo(
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the audio.")] = Path("out/demo.wav"),
    text: Annotated[str, typer.Option("--text", help="What to say.")] = DEMO_TEXT,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Use this model instead of the default / test model.")] = None,
    family: Annotated[
        str | None,
        typer.Option(
            "--family",
            help="Try this model family offline with its tiny random-weight test model (noise, not speech); a family koe does not run lists those it does.",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0)] = 0,
    max_new_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-new-tokens", help="Cap on steps (the option the model caps its length with, `koe models info`; a test model rarely stops by itself)."
        ),
    ] = None,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline", envvar=OFFLINE_ENV, help="Download nothing: without a configured model, use the tiny random-weight test model.", show_default=False
        ),
    ] = False,
) -> None:
    """Speak a sentence into out/demo.wav: the configured model, else the real 0.6B CustomVoice (downloaded once), else a random-weight one."""
    from koe.service.fsio import atomic_write_bytes
    from koe.service.store.models import size_label
    from koe.service.synthesis.encode import format_for_path
    from koe.service.synthesis.synthesizer import Synthesizer

    if model is not None and family is not None:
        fail("give --model or --family, not both", 2)
    test_family = _family(family) if family is not None else None
    home = open_home()
    spec = None if test_family else (model or home.settings.models.default)
    why = None
    if spec is None and test_family is None:
        spec, why = _released_model(home, offline)
    if spec is None:
        spec = _ensure_demo_model(home, test_family or _family(None))
        if why:
            warn(
                f"{why}: using {spec}, a tiny model with RANDOM weights — the audio is noise-like, not speech. "
                f"For real speech: koe models pull {_released_example()} (or import a folder) and set models.default."
            )
    fmt = format_for_path(output)
    synth = Synthesizer(home)
    started = time.perf_counter()
    ref = synth.planner.resolve_model(spec)
    details = synth.planner.details(ref)
    random_weights = details.random_weights
    if random_weights and not why:
        warn(f"{ref.name} has RANDOM weights (a test model): the audio is noise-like, not speech; it shows the whole path runs here, offline")
    steps = max_new_tokens if max_new_tokens is not None else (_random_steps(details.capabilities) if random_weights else None)
    plan = synth.plan(_request(text, spec, seed, fmt.name, details.capabilities, steps))
    loading = time.perf_counter()
    with err.status(f"loading {plan.model.name} …", spinner="dots"), synth.cache.use(plan.model):
        pass  # loaded now (and kept): the load is a step of its own, said with its time
    err.print(f"[dim]loaded {escape(plan.model.name)} ({size_label(details.parameters) or '?'} parameters) in {time.perf_counter() - loading:.1f} s[/]")
    with err.status(f"speaking with {plan.model.name} ({plan.model.variant}) …", spinner="dots"):
        result = synth.speak(plan)
    for w in result.warnings:
        warn(
            w
            + (
                f" — expected with random weights: they seldom predict the end of speech, so the demo stops them at {steps} steps"
                if random_weights and steps
                else ""
            )
        )
    audio = result.audio
    if random_weights:
        audio, said = _safe_level(result, fmt)
        err.print(f"[dim]{escape(said)}[/]")
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(output, audio)
    elapsed = time.perf_counter() - started
    err.print(f"[green]wrote[/] {escape(str(output.resolve()))}")
    err.print(
        f"  model {escape(plan.model.name)} ({plan.model.variant}{', random weights' if random_weights else ''}) at {escape(str(plan.model.path))}\n"
        f"  voice {escape(result.voice or OWN_VOICE)}, seed {result.seed}, {result.format.name} {result.sample_rate} Hz, {result.duration:.2f} s of audio "
        f"in {elapsed:.1f} s (RTF {elapsed / max(result.duration, 1e-9):.2f})"
    )


def _family(name: str | None) -> str:
    """The family `--family` names (default: the demo's); exit 2 naming those there are."""
    from koe.engines.registry import DEMO_FAMILY, families

    if name is None:
        return DEMO_FAMILY
    key = name.strip().lower().replace("-", "_")
    known = families()
    if key not in known:
        fail(f"unknown model family {name!r}; koe runs: {', '.join(known)}", 2)
    return key


def demo_model_name(family: str) -> str:
    """The store name of `family`'s random-weight test model."""
    from koe.engines.registry import DEMO_FAMILY

    return DEMO_MODEL if family == DEMO_FAMILY else f"{DEMO_MODEL}-{family.replace('_', '-')}"


def _random_steps(caps) -> int | None:
    """Steps of the family's length cap that make about `RANDOM_SECONDS` of audio (None: it has no such cap)."""
    if caps is None or not caps.stream_step_s or not caps.length_option:
        return None
    return max(2, math.ceil(RANDOM_SECONDS / caps.stream_step_s))


def _request(text: str, model: str, seed: int, fmt: str, caps, steps: int | None):
    """The demo's request: the model's own way of choosing a voice (a preset speaker, its own voice, a
    description; a family that only clones gets a synthetic reference clip), and the step cap."""
    from koe.engines.base import CLONE, DESIGN, NO_VOICE, PRESET
    from koe.service.synthesis.requests import SpeechRequest

    modes = caps.voice_modes if caps is not None else frozenset()
    voice: dict = {}
    if not modes & {PRESET, NO_VOICE}:
        if DESIGN in modes:
            voice = {"design": "A calm, clear voice at an even pace."}
        elif CLONE in modes:
            voice = {"ref_audio": _reference_clip(max(2.0, caps.min_reference_s)), "ref_text": REFERENCE_TEXT}
    name = caps.length_option if caps is not None else None  # `Capabilities.length_option`
    options = {name: steps} if name and steps is not None else {}
    return SpeechRequest(text=text, model=model, seed=seed, format=fmt, options=options, save=False, **voice)


def _reference_clip(seconds: float = 2.0, rate: int = 24000):
    """A voiced-sounding synthetic clip (harmonics of 140 Hz, a syllable-like envelope) as (samples, rate)."""
    import numpy as np

    t = np.arange(int(seconds * rate)) / rate
    x = sum(np.sin(2 * np.pi * f * t) / (i + 1) for i, f in enumerate((140, 280, 420, 560)))
    x = 0.3 * x * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t)) / np.abs(x).max()
    return x.astype(np.float32), rate


def _safe_level(result, fmt) -> tuple[bytes, str]:
    """The audio with its peak at most `SAFE_PEAK_DBFS` (random weights make full-scale noise), and what was done."""
    import numpy as np

    from koe.service.synthesis.encode import encode_audio

    samples = np.asarray(result.samples, dtype=np.float32)
    peak = float(np.abs(samples).max()) if samples.size else 0.0
    safe = 10 ** (SAFE_PEAK_DBFS / 20)
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if samples.size else 0.0
    if peak <= safe:
        return result.audio, f"random weights: peak {_dbfs(peak)}, RMS {_dbfs(rms)}, already a safe level: written as made"
    quieter = encode_audio(samples * np.float32(safe / peak), result.engine_sample_rate, fmt).data
    return quieter, (
        f"random weights make noise at full scale (peak {_dbfs(peak)}, RMS {_dbfs(rms)}): "
        f"written {20 * math.log10(peak / safe):.0f} dB quieter, peak {SAFE_PEAK_DBFS:.0f} dBFS, safe to play"
    )


def _dbfs(x: float) -> str:
    return f"{20 * math.log10(max(x, 1e-9)):.1f} dBFS"


def _released_model(home, offline: bool) -> tuple[str | None, str | None]:
    """(model, None) for the demo's real model: from the store or the Hugging Face cache (the resolver's
    order, nothing downloaded), else pulled now into the store; (None, why not) when it cannot be had."""
    from koe.cli.models import pull_with_progress
    from koe.service.errors import KoeError, Unavailable
    from koe.service.store.resolve import Downloads, free_name, release_for, resolve_model

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
    err.print(f"no model configured: fetching the real {escape(repo)} into {escape(str(home.models.root / name))} once (skip with {OFFLINE_ENV}=1) …")
    try:
        d, bar = pull_with_progress(home.models, repo, name=name, talk=True)
    except KoeError as e:
        return None, f"no model configured and {repo} could not be downloaded ({e.message})"
    err.print(f"[green]installed[/] {escape(d.ref.name)}[dim]: {bar.summary()}; `koe demo` uses it from now on[/]")
    return d.ref.name, None


def _ensure_demo_model(home, family: str) -> str:
    """`family`'s random-weight test model in the store (its first fixture variant), built on first use."""
    from koe.service.errors import NotFound

    name = demo_model_name(family)
    try:
        home.models.get(name)
        return name
    except NotFound:
        pass
    from koe.engines.registry import spec, write_demo_fixture
    from koe.engines.spec import FixtureNote
    from koe.service.fsio import atomic_folder
    from koe.service.store.models import size_label

    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FixtureNote)
        with err.status(f"building a tiny random-weight {spec(family).title} test model (once) …", spinner="dots"):
            with atomic_folder(home.models.root / name, replace=True) as tmp:
                write_demo_fixture(tmp, family)
            d = home.models.register(name, f"koe demo (random weights, {family})")
    for w in caught:  # the family's notes (what its fixture fell back to) to the user; any other warning as Python shows it
        if issubclass(w.category, FixtureNote):
            warn(str(w.message))
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    err.print(
        f"[dim]built {escape(name)} ({d.ref.variant}, {size_label(d.parameters)} parameters, random weights) in {time.perf_counter() - started:.1f} s "
        f"at {escape(str(d.ref.path))}[/]"
    )
    return name


def _released_example() -> str:
    from koe.engines.registry import DEMO_FAMILY, spec

    return spec(DEMO_FAMILY).released[0].repo_id
