"""Random object and request identifiers."""

from __future__ import annotations

import os


def new_uid() -> str:
    """A random (version 4, RFC 4122 variant) UUID in its canonical text form, the same as
    ``str(uuid.uuid4())`` but without building a ``uuid.UUID`` (its checks and formatting run as
    Python, several times this on every create)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # variant 10xx
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
