"""The parts of the streamed-text WebSocket that need no server: the text feed the engine reads,
a handshake refused where the ASGI server has no denial response, and the WebSocket protocol that
leaves open streams to the drain. The route itself, on a real server: tests/test_server_text_stream.py."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from koe.engines.base import Cancelled
from koe.server.errors import error_response
from koe.server.guards import draining_ws_protocol, refuse
from koe.server.routes.speech_stream import close_code, offered_protocols, token_header
from koe.service.synthesis.textfeed import POLL_SECONDS, TextFeed


def test_the_feed_gives_the_pieces_as_they_come_and_ends_after_the_end():
    feed = TextFeed()
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.extend(feed))
    reader.start()
    feed.put("Hello ")
    feed.put("there.")
    time.sleep(3 * POLL_SECONDS)
    assert got == ["Hello ", "there."] and reader.is_alive()  # waiting for more
    feed.end()
    reader.join(5)
    assert not reader.is_alive() and feed.text == "Hello there." and feed.chars == 12
    with pytest.raises(RuntimeError, match="ended"):
        feed.put("more")


def test_cancelling_the_feed_stops_a_reader_that_waits_for_text():
    feed = TextFeed()
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            list(feed)
        except Cancelled as e:
            outcome.append(e)

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(POLL_SECONDS)
    feed.cancel.cancel()
    reader.join(5 * POLL_SECONDS + 1)
    assert not reader.is_alive() and len(outcome) == 1


def test_a_refused_handshake_is_an_http_error_where_the_server_can_send_one_else_a_close():
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "websocket.connect"}

    response = error_response(403, "no", code="origin_not_allowed")
    scope = {"type": "websocket", "path": "/v1/audio/speech/stream", "headers": [], "extensions": {"websocket.http.response": {}}}
    asyncio.run(refuse(scope, receive, send, response))
    assert [m["type"] for m in sent] == ["websocket.http.response.start", "websocket.http.response.body"] and sent[0]["status"] == 403
    sent.clear()
    asyncio.run(refuse({**scope, "extensions": {}}, receive, send, response))
    assert sent == [{"type": "websocket.close", "code": 1008}]


def test_an_accepted_websocket_is_left_open_by_the_shutdown_and_any_other_closed():
    closed: list[str] = []

    class Base:
        handshake_complete, initial_response, close_sent, disconnected = True, None, False, False

        def shutdown(self) -> None:
            closed.append("closed")

    protocol = draining_ws_protocol(Base)  # type: ignore[arg-type]
    open_stream = protocol()
    open_stream.shutdown()
    assert closed == []  # the route ends it, within the drain's grace
    for state in ({"handshake_complete": False}, {"initial_response": object()}, {"close_sent": True}, {"disconnected": True}):
        other = protocol()
        vars(other).update(state)
        other.shutdown()
    assert closed == ["closed"] * 4


@pytest.mark.parametrize(("status", "code"), [(400, 1008), (404, 1008), (408, 1008), (413, 1009), (429, 1013), (500, 1011), (503, 1012), (507, 1011)])
def test_each_error_closes_with_the_code_of_its_kind(status, code):
    assert close_code(status) == code


def test_the_offered_subprotocols_are_every_header_split_at_its_commas():
    assert offered_protocols(["koe, koe.bearer.YWJj", " other ,,"]) == ["koe", "koe.bearer.YWJj", "other"]
    assert offered_protocols([]) == []


@pytest.mark.parametrize(
    ("protocol", "header"),
    [
        ("koe.bearer.YS10b2tlbi8-Pz0", "Bearer a-token/>?="),  # base64url without padding
        ("koe.bearer.YS10b2tlbi8-Pz0=", "Bearer a-token/>?="),  # padding is allowed
        ("koe.bearer.4pyTIMOg", "Bearer \u2713 \u00e0"),  # UTF-8
        ("koe.bearer.a-token", "Bearer "),  # not base64url: no token
        ("koe.bearer.%%", "Bearer "),
        ("koe.bearer.__8", "Bearer "),  # not UTF-8
        ("koe.bearer.", "Bearer "),
    ],
)
def test_a_subprotocol_token_is_base64url(protocol, header):
    assert token_header(protocol) == header
