"""json_response and protobuf_response build exactly what starlette's Response would."""

from __future__ import annotations

import pytest
from starlette.responses import Response
from starlette.types import Message

from app.api import negotiation
from app.api.negotiation import JSON, PROTOBUF


def _as_starlette_builds_it(raw: bytes, status: int, headers: dict[str, str] | None, media_type: str) -> Response:
    return Response(raw, status_code=status, media_type=media_type, headers=headers)


def _same(built: Response, expected: Response) -> None:
    assert (built.status_code, built.media_type, built.body, built.raw_headers, built.background) == (
        expected.status_code,
        expected.media_type,
        expected.body,
        expected.raw_headers,
        expected.background,
    )


STATUSES = (100, 199, 200, 201, 202, 204, 206, 304, 400, 404, 409, 422, 500, 503)
HEADERS: tuple[dict[str, str] | None, ...] = (None, {}, {"Warning": '299 - "careful"'}, {"Content-Length": "3"}, {"Content-Type": "text/plain"})


@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("headers", HEADERS)
@pytest.mark.parametrize("media_type", [JSON, PROTOBUF, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "text/plain"])
def test_json_response_is_starlettes(status: int, headers: dict[str, str] | None, media_type: str) -> None:
    for body in (b"", b'{"kind":"ResourceClaim"}', {"kind": "Status", "code": status}):
        raw = body if isinstance(body, bytes) else negotiation.orjson.dumps(body)
        _same(negotiation.json_response(body, status, headers, media_type), _as_starlette_builds_it(raw, status, headers, media_type))


@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("headers", HEADERS)
def test_protobuf_response_is_starlettes(status: int, headers: dict[str, str] | None) -> None:
    raw = b"k8s\x00\n\x0c\n\x02v1\x12\x06Status"
    _same(negotiation.protobuf_response(raw, status, headers), _as_starlette_builds_it(raw, status, headers, PROTOBUF))


async def test_an_answer_is_sent_as_starlettes() -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request"}

    await negotiation.json_response(b"{}", 201)({"type": "http"}, receive, send)
    ours = list(sent)
    sent.clear()
    await _as_starlette_builds_it(b"{}", 201, None, JSON)({"type": "http"}, receive, send)
    assert ours == sent
