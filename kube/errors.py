"""Kubernetes ``Status`` errors and field errors, shared by server and clients."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# Field error reasons as upstream names them (apimachinery field.ErrorType).
REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
DUPLICATE = "FieldValueDuplicate"
NOT_SUPPORTED = "FieldValueNotSupported"
FORBIDDEN = "FieldValueForbidden"
TOO_LONG = "FieldValueTooLong"
TOO_MANY = "FieldValueTooMany"
NOT_FOUND = "FieldValueNotFound"
TYPE_INVALID = "FieldValueTypeInvalid"
INTERNAL = "InternalError"


class GoSyntax(str):
    """A field error's value already written as Go prints it (``[]string{"x"}``): shown as it is."""


# The escapes Go's strconv.Quote writes by name.
_GO_ESCAPES = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(text: str) -> str:
    """Go's ``%q`` for a string: printable runes kept, the rest escaped."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch == " " or ch.isprintable():
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _render_value(value: Any) -> str:
    """A field error's value as upstream's field.Error prints it (a string as Go's %q)."""
    if isinstance(value, GoSyntax):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


@dataclass
class FieldError:
    """One problem with one field, rendered the way apimachinery renders field errors."""

    reason: str
    field: str
    detail: str = ""
    value: Any = None
    has_value: bool = False
    supported: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        """The cause message: ``Invalid value: "x": detail`` (without the field path)."""
        if self.reason == REQUIRED:
            text = "Required value"
            return f"{text}: {self.detail}" if self.detail else text
        if self.reason == FORBIDDEN:
            text = "Forbidden"
            return f"{text}: {self.detail}" if self.detail else text
        if self.reason == TOO_LONG:
            text = "Too long"
            return f"{text}: {self.detail}" if self.detail else text
        if self.reason == INTERNAL:
            return f"Internal error: {self.detail}"
        names = {
            INVALID: "Invalid value",
            DUPLICATE: "Duplicate value",
            NOT_SUPPORTED: "Unsupported value",
            NOT_FOUND: "Not found",
            TYPE_INVALID: "Invalid value",
            TOO_MANY: "Too many",
        }
        text = names.get(self.reason, "Invalid value")
        if self.has_value:
            text = f"{text}: {_render_value(self.value)}"
        if self.reason == NOT_SUPPORTED and self.supported:
            quoted = ", ".join(go_quote(s) for s in self.supported)
            return f"{text}: supported values: {quoted}"
        if self.detail:
            text = f"{text}: {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def required(field: str, detail: str = "") -> FieldError:
    return FieldError(REQUIRED, field, detail)


def invalid(field: str, value: Any, detail: str = "") -> FieldError:
    return FieldError(INVALID, field, detail, value, True)


def duplicate(field: str, value: Any) -> FieldError:
    return FieldError(DUPLICATE, field, "", value, True)


def not_supported(field: str, value: Any, supported: list[str] | tuple[str, ...]) -> FieldError:
    return FieldError(NOT_SUPPORTED, field, "", value, True, tuple(supported))


def forbidden(field: str, detail: str) -> FieldError:
    return FieldError(FORBIDDEN, field, detail)


def too_many(field: str, actual: int, limit: int) -> FieldError:
    """``Too many: 33: must have at most 32 items`` (apimachinery's field.TooMany; a negative count
    or limit is left out, as there)."""
    detail = (f"must have at most {limit} item" + ("" if limit == 1 else "s")) if limit >= 0 else "has too many items"
    return FieldError(TOO_MANY, field, detail, actual if actual >= 0 else None, actual >= 0)


def too_long(field: str, limit: int) -> FieldError:
    return FieldError(TOO_LONG, field, f"may not be more than {limit} bytes")


class ApiError(Exception):
    """An error answered to the client as a ``Status`` object."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        list_meta: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        # The Status's own ListMeta (metadata), e.g. the continue token of an expired one.
        self.list_meta = list_meta

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.list_meta or {}),
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            # An empty reason (StatusReasonUnknown) is left out, as Go's omitempty does.
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body

    @property
    def retry_after_seconds(self) -> int:
        """``details.retryAfterSeconds`` (0 when absent): a server also sends it as a Retry-After header."""
        value = (self.details or {}).get("retryAfterSeconds")
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    @classmethod
    def from_status(cls, status: dict[str, Any], code: int | None = None) -> ApiError:
        return cls(
            int(status.get("code") or code or 500),
            str(status.get("reason") or ""),
            str(status.get("message") or ""),
            status.get("details"),
        )


def _details(name: str, group: str, kind: str) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = kind
    return details


def not_found(qualified_resource: str, name: str, group: str, plural: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified_resource} "{name}" not found',
        _details(name, group, plural),
    )


def already_exists(qualified_resource: str, name: str, group: str, plural: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified_resource} "{name}" already exists',
        _details(name, group, plural),
    )


def conflict(qualified_resource: str, name: str, group: str, plural: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified_resource} "{name}": {why}',
        _details(name, group, plural),
    )


def invalid_object(kind: str, name: str, group: str, errors: list[FieldError]) -> ApiError:
    summary = ", ".join(str(e) for e in errors)
    qualified = f"{kind}.{group}" if group else kind
    shown = summary if len(errors) == 1 else f"[{summary}]"
    message = f'{qualified} "{name}" is invalid: {shown}'
    details = _details(name, group, kind)
    details["causes"] = [
        {"reason": e.reason, "message": e.message, "field": e.field} for e in errors
    ]
    return ApiError(422, "Invalid", message, details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def not_acceptable(message: str) -> ApiError:
    return ApiError(406, "NotAcceptable", message)


def unsupported_media_type(accepted: list[str] | tuple[str, ...]) -> ApiError:
    """A body in a media type the endpoint does not read, listing those it does."""
    return ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted media types include: {', '.join(accepted)}")


def entity_too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"Request entity too large: limit is {limit}")


def forbidden_error(message: str, name: str = "", group: str = "", plural: str = "") -> ApiError:
    return ApiError(403, "Forbidden", message, _details(name, group, plural))


def forbidden_object(qualified_resource: str, name: str, group: str, plural: str, why: str) -> ApiError:
    """``<resource> "<name>" is forbidden: <why>`` (apierrors.NewForbidden), as admission refuses a write."""
    message = f"{qualified_resource} {json.dumps(name)} is forbidden: {why}" if name else f"{qualified_resource} is forbidden: {why}"
    return forbidden_error(message, name, group, plural)


def internal_error(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}")
