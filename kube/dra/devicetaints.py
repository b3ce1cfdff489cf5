"""Which devices a DeviceTaintRule taints: one rule for the scheduler, the eviction controller and
the views of ``kubectl dra``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def rule_selects(rule: Mapping[str, Any], driver: str, pool: str, device: str) -> bool:
    """A rule's deviceSelector: nil selects nothing, empty selects everything, set fields must match."""
    selector = (rule.get("spec") or {}).get("deviceSelector")
    if not isinstance(selector, Mapping):
        return False
    return all(not selector.get(field) or selector[field] == value for field, value in (("driver", driver), ("pool", pool), ("device", device)))
