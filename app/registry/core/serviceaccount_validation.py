"""TokenRequest validation (upstream's ValidateTokenRequest)."""

from __future__ import annotations

from typing import Any

from kube.errors import FieldError, invalid

MIN_TOKEN_SECONDS = 10 * 60
MAX_TOKEN_SECONDS = 1 << 32


def validate_token_request(spec: dict[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    seconds = spec.get("expirationSeconds")
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        return [invalid("spec.expirationSeconds", seconds, "must be an integer")]
    if seconds < MIN_TOKEN_SECONDS:
        errs.append(invalid("spec.expirationSeconds", seconds, "may not specify a duration less than 10 minutes"))
    if seconds > MAX_TOKEN_SECONDS:
        errs.append(invalid("spec.expirationSeconds", seconds, "may not specify a duration larger than 2^32 seconds"))
    return errs
