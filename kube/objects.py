"""Kubernetes objects as the project handles them: plain JSON dicts, and their top-level parts read
safely (a missing or null part reads as an empty dict)."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def meta(obj: Obj | None) -> Obj:
    """``metadata``, or an empty dict."""
    found: Obj = (obj or {}).get("metadata") or {}
    return found


def spec(obj: Obj | None) -> Obj:
    """``spec``, or an empty dict."""
    found: Obj = (obj or {}).get("spec") or {}
    return found


def status(obj: Obj | None) -> Obj:
    """``status``, or an empty dict."""
    found: Obj = (obj or {}).get("status") or {}
    return found


def json_copy(value: Any) -> Any:
    """A deep copy of JSON data (dicts, lists and scalars), several times cheaper than
    ``copy.deepcopy``, which also handles every other type and shared references."""
    if type(value) is dict:
        return {k: json_copy(v) for k, v in value.items()}
    if type(value) is list:
        return [json_copy(v) for v in value]
    return value
