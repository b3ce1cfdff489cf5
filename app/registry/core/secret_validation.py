"""Secret validation (upstream's ValidateSecret and ValidateSecretUpdate)."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from kube.errors import FieldError, forbidden, invalid, required, too_long

# Upstream's MaxSecretSize: the decoded values of all keys together.
MAX_SECRET_BYTES = 1 << 20
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_CONFIG_KEY_MESSAGE = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
    "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)
# Secret types whose data must hold certain keys.
REQUIRED_KEYS = {
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
}
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
SERVICE_ACCOUNT_NAME_ANNOTATION = "kubernetes.io/service-account.name"


def decode_value(value: Any) -> bytes:
    """A data value as JSON carries it (standard base64); ValueError with Go's message otherwise."""
    if not isinstance(value, str):
        raise ValueError(f"json: cannot unmarshal {type(value).__name__} into Go value of type []uint8")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        bad = next((i for i, c in enumerate(value) if not (c.isascii() and (c.isalnum() or c in "+/="))), len(value) - len(value) % 4)
        raise ValueError(f"illegal base64 data at input byte {bad}") from None


def _config_key_errors(key: str) -> list[str]:
    messages = []
    if len(key) > 253:
        messages.append("must be no more than 253 characters")
    if not _CONFIG_KEY.fullmatch(key):
        messages.append(_CONFIG_KEY_MESSAGE)
    if key == ".":
        messages.append("must not be '.'")
    elif key == "..":
        messages.append("must not be '..'")
    elif key.startswith(".."):
        messages.append("must not start with '..'")
    return messages


def validate_secret(obj: dict[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    data = obj.get("data") or {}
    if not isinstance(data, dict):
        return [invalid("data", data, "must be an object")]
    total = 0
    for key, value in data.items():
        errs.extend(invalid(f"data[{key}]", key, message) for message in _config_key_errors(key))
        try:
            total += len(decode_value(value))
        except ValueError as exc:
            errs.append(invalid(f"data[{key}]", "", str(exc)))
    if total > MAX_SECRET_BYTES:
        errs.append(too_long("data", MAX_SECRET_BYTES))
    kind = obj.get("type") or ""
    for key in REQUIRED_KEYS.get(kind, ()):
        if key not in data:
            errs.append(required(f"data[{key}]"))
    if kind == "kubernetes.io/basic-auth" and "username" not in data and "password" not in data:
        errs.append(required("data[username]"))
    if kind == SERVICE_ACCOUNT_TOKEN and not ((obj["metadata"].get("annotations") or {}).get(SERVICE_ACCOUNT_NAME_ANNOTATION)):
        errs.append(required(f"metadata.annotations[{SERVICE_ACCOUNT_NAME_ANNOTATION}]"))
    return errs


def validate_secret_update(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    if (new.get("type") or "") != (old.get("type") or ""):
        errs.append(invalid("type", new.get("type"), "field is immutable"))
    if old.get("immutable") is True:
        if new.get("immutable") is not True:
            errs.append(forbidden("immutable", "field is immutable when `immutable` is set"))
        if (new.get("data") or {}) != (old.get("data") or {}):
            errs.append(forbidden("data", "field is immutable when `immutable` is set"))
    return errs + validate_secret(new)
