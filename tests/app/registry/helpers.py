"""Shared by the validation tests of ObjectMeta and of the core and coordination kinds: a request
context with gates, (field, reason) pairs, and mutations of a valid object."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from app.registry.base import RequestContext
from kube.errors import FieldError
from kube.features import FeatureGates
from kube.objects import Obj

Mutation = Callable[[Obj], object]


def ctx(**gates: bool) -> RequestContext:
    return RequestContext(feature_gates=FeatureGates(gates))


def pairs(errs: list[FieldError]) -> list[tuple[str, str]]:
    return sorted((e.field, e.reason) for e in errs)


def mutated(base: Obj, mutate: Mutation) -> Obj:
    obj = copy.deepcopy(base)
    mutate(obj)
    return obj


def setitem(path: str, value: Any) -> Mutation:
    """A mutation that sets a dotted path (list indexes as numbers) to ``value``."""
    def apply(obj: Obj) -> None:
        keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
        target: Any = obj
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return apply
