"""Toleration matching, one rule for node taints (core/v1) and device taints (resource.k8s.io).

A toleration tolerates a taint when

* its effect is empty or equals the taint's effect,
* its key is empty or equals the taint's key, and
* its operator is ``Exists``, or ``Equal`` (also when empty) with a value equal to the taint's.

An empty key with ``Equal`` therefore tolerates every taint whose value equals the toleration's
(validation rejects that combination for pods, not for devices). The numeric ``Gt``/``Lt``
operators of newer releases sit behind a feature gate this project does not serve; like any
other operator they tolerate nothing.

Which taint effects count is the caller's choice: the scheduler looks at NoSchedule and
NoExecute taints, the device taint eviction controller only at NoExecute ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether ``toleration`` tolerates ``taint`` (see the module docstring for the rule)."""
    effect = toleration.get("effect")
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key")
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return operator == "Exists"


def tolerations_tolerate(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Whether any of ``tolerations`` tolerates ``taint``."""
    return any(tolerates(toleration, taint) for toleration in tolerations)
