"""koe's OpenAI-compatible HTTP server (FastAPI + uvicorn): `create_app` and `run`."""

from koe.server.app import create_app, run

__all__ = ["create_app", "run"]
