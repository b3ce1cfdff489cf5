"""new_uid: exactly what str(uuid.uuid4()) makes of the same random bytes."""

from __future__ import annotations

import os
import random
import uuid

import pytest

from kube import uids


@pytest.mark.parametrize("seed", range(4))
def test_new_uid_is_uuid4_of_the_same_bytes(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    rng = random.Random(seed)
    samples = [bytes(16), b"\xff" * 16] + [rng.randbytes(16) for _ in range(500)]
    for raw in samples:
        monkeypatch.setattr(os, "urandom", lambda n, raw=raw: raw[:n])
        assert uids.new_uid() == str(uuid.UUID(bytes=raw, version=4))


def test_new_uids_differ_and_parse_as_version_4() -> None:
    made = {uids.new_uid() for _ in range(1000)}
    assert len(made) == 1000
    for text in made:
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and str(parsed) == text
