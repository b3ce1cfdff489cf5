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


def clone(value: Any) -> Any:
    """A deep copy of JSON data (dicts, lists, scalars); much faster than ``copy.deepcopy``."""
    if type(value) is dict:
        return {k: clone(v) for k, v in value.items()}
    if type(value) is list:
        return [clone(v) for v in value]
    return value
