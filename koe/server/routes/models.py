"""`GET /v1/models` (OpenAI's list, with koe's details) and `GET /health`.

Each model card has a `status`: `loaded` (resident), `ready` (loads on first use) or `failed` (its
last load failed with its files as they are now, or its files are missing or unreadable), with the
reason in `error`. `/health` stays `ok` (the server is alive) and lists failed models.
`size` comes from the weights' parameter count (`11M`, `0.9B`), never from a config's size tag (a
tiny random-weight folder in a release's layout keeps the release's tag); `random_weights` marks koe's
test models, which speak noise; `license` is the model's licence (`koe.service.store.licenses.license_data`).
"""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from koe import __version__
from koe.server.errors import client_text
from koe.server.schemas import Health, ListOf, ModelCard
from koe.server.state import ServerState, server_state
from koe.service.store.licenses import license_data
from koe.service.store.models import ModelDetails
from koe.service.synthesis.cache import LoadFailure

router = APIRouter(tags=["models"])
health_router = APIRouter(tags=["health"])


def _family_title(family: str) -> str:
    """The family's title from its spec (the page names families by it, never by a list of its own); its
    name where the spec cannot be had (a plugin uninstalled since the model was added)."""
    from koe.engines.registry import UnknownModelError, spec

    try:
        return spec(family).title
    except UnknownModelError:
        return family


def _card(d: ModelDetails, state: ServerState, loaded: set[str], failure: LoadFailure | None) -> ModelCard:
    is_loaded = d.ref.name in loaded
    error = None
    if not is_loaded and failure is not None:
        error = failure.reason
    elif not is_loaded and d.missing:
        error = f"incomplete: missing {', '.join(d.missing)}"
    return ModelCard(
        id=d.ref.name,
        created=int(d.added_at or 0),
        family=d.ref.family,
        family_title=_family_title(d.ref.family),
        variant=d.ref.variant,
        size=d.size,
        parameters=d.parameters,
        random_weights=d.random_weights,
        speakers=d.speakers,
        languages=d.languages,
        loaded=is_loaded,
        default=d.ref.name == state.settings.models.default,
        uses=d.uses,
        status="loaded" if is_loaded else "failed" if error else "ready",
        error=client_text(error) if error else None,
        failed_at=int(failure.failed_at) if failure is not None and not is_loaded else None,
        voice_modes=sorted(d.capabilities.voice_modes) if d.capabilities else [],
        options=d.capabilities.options.describe() if d.capabilities else [],
        capabilities=d.capabilities.to_dict() if d.capabilities else None,
        license=license_data(d.license, state.home.models.licenses),
    )


def _loaded(state: ServerState) -> set[str]:
    return {m.ref.name for m in state.synthesizer.cache.loaded()}


def _cards(state: ServerState, models: list[ModelDetails]) -> list[ModelCard]:
    """The cards of `models` (blocking: the failed ones' files are looked at)."""
    cache = state.synthesizer.cache
    loaded = _loaded(state)
    return [_card(d, state, loaded, cache.failure(d.ref)) for d in models]


@router.get("/v1/models", response_model=ListOf)
async def list_models(request: Request) -> ListOf:
    """The installed models, each with its `status` (loaded / ready / failed, with `error`)."""
    state = server_state(request)
    models = await run_in_threadpool(state.home.models.list)
    return ListOf(data=await run_in_threadpool(_cards, state, models))


@router.get("/v1/models/{name}", response_model=ModelCard)
async def get_model(name: str, request: Request) -> ModelCard:
    """One installed model."""
    state = server_state(request)
    details = await run_in_threadpool(state.home.models.get, name)
    return (await run_in_threadpool(_cards, state, [details]))[0]


@health_router.get("/health", response_model=Health)
async def health(request: Request) -> Health:
    """Liveness, resident models, failed models (name -> reason) and each model's queue (waiting,
    running, completed, cancelled, ...)."""
    state = server_state(request)
    queues = {name: asdict(s) for name, s in state.scheduler.stats().items()}
    failed = await run_in_threadpool(state.synthesizer.cache.failures)
    loaded = _loaded(state)
    models_failed = {f.name: client_text(f.reason) for f in failed if f.name not in loaded}
    return Health(version=__version__, models_loaded=sorted(loaded), models_failed=models_failed, queues=queues)
