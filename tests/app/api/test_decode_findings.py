"""What decoding a body found, handed to the request's write once (``bodies.take_decode_findings``)."""

from __future__ import annotations

import contextvars

from app.api import bodies


def _in_own_context() -> contextvars.Context:
    return contextvars.Context()  # as each request's task has its own


def test_a_json_bodys_findings_are_taken_once() -> None:
    def run() -> None:
        bodies.decode_json(b'{"kind": "ResourceClaim", "kind": "ResourceClaim"}', "ResourceClaim")
        first = bodies.take_decode_findings()
        assert first is not None and first.duplicate_fields == ["kind"]
        assert bodies.take_decode_findings() is None

    _in_own_context().run(run)


def test_a_typed_body_stays_typed_for_a_second_taker_and_never_reaches_another_request() -> None:
    def run() -> None:
        assert bodies.take_decode_findings() is None
        bodies.note_typed_body()
        for _ in range(2):  # an update that creates takes the findings twice
            found = bodies.take_decode_findings()
            assert found is not None and found.typed and not found.duplicate_fields

    _in_own_context().run(run)
    _in_own_context().run(lambda: None)
    assert contextvars.Context().run(bodies.take_decode_findings) is None
