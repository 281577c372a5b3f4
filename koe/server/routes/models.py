"""`GET /v1/models` (OpenAI's list, with koe's details) and `GET /health`."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from koe import __version__
from koe.service.models import ModelDetails
from koe.server.schemas import Health, ListOf, ModelCard
from koe.server.state import ServerState, server_state

router = APIRouter(tags=["models"])
health_router = APIRouter(tags=["health"])


def _card(d: ModelDetails, state: ServerState, loaded: set[str]) -> ModelCard:
    return ModelCard(
        id=d.ref.name, created=int(d.added_at or 0), family=d.ref.family, variant=d.ref.variant, size=d.ref.size,
        speakers=d.speakers, languages=d.languages, loaded=d.ref.name in loaded,
        default=d.ref.name == state.settings.models.default, uses=d.uses,
        voice_modes=sorted(d.capabilities.voice_modes) if d.capabilities else [],
        options=d.capabilities.options.describe() if d.capabilities else [],
        capabilities=d.capabilities.to_dict() if d.capabilities else None,
    )  # fmt: skip


def _loaded(state: ServerState) -> set[str]:
    return {m.ref.name for m in state.synthesizer.cache.loaded()}


@router.get("/v1/models", response_model=ListOf)
async def list_models(request: Request) -> ListOf:
    """The installed models (`loaded`: resident in memory now)."""
    state = server_state(request)
    models = await run_in_threadpool(state.home.models.list)
    loaded = _loaded(state)
    return ListOf(data=[_card(d, state, loaded) for d in models])


@router.get("/v1/models/{name}", response_model=ModelCard)
async def get_model(name: str, request: Request) -> ModelCard:
    """One installed model."""
    state = server_state(request)
    details = await run_in_threadpool(state.home.models.get, name)
    return _card(details, state, _loaded(state))


@health_router.get("/health", response_model=Health)
async def health(request: Request) -> Health:
    """Liveness, resident models and each model's queue (waiting, running, completed, cancelled, ...)."""
    state = server_state(request)
    queues = {name: asdict(s) for name, s in state.scheduler.stats().items()}
    return Health(version=__version__, models_loaded=sorted(_loaded(state)), queues=queues)
