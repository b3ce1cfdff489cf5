"""A written body's type and place: kind, apiVersion and metadata first (upstream's order), then
the body's other fields in their order, whatever order the body had; checked against the
rule spelled out over random bodies."""

from __future__ import annotations

import random
from typing import Any

import pytest

from app.api.generic import GenericStore
from app.registry.base import KindStrategy
from app.registry.core import namespace as namespace_kind
from app.registry.resource import resourceclaim
from kube.errors import ApiError


def _reference(strategy: KindStrategy, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    metadata = obj.get("metadata")
    metadata = {} if metadata is None else dict(metadata)
    if strategy.namespaced:
        metadata["namespace"] = namespace
    else:
        metadata.pop("namespace", None)
    rest = [(k, v) for k, v in obj.items() if k not in ("kind", "apiVersion", "metadata")]
    return {"kind": strategy.kind, "apiVersion": strategy.api_version, "metadata": metadata, **dict(rest)}


def _checked(store: GenericStore, strategy: KindStrategy, obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    store._check_type_and_scope(strategy, obj, namespace, None)
    return obj


@pytest.mark.parametrize("strategy", [resourceclaim.STRATEGY, namespace_kind.STRATEGY], ids=["namespaced", "cluster"])
async def test_the_order_of_random_bodies(store: GenericStore, strategy: KindStrategy) -> None:
    rng = random.Random(44)
    optional = ["kind", "apiVersion", "metadata", "spec", "status", "extra", "zz", "aa"]
    for _ in range(500):
        keys = rng.sample(optional, rng.randrange(0, len(optional) + 1))
        body: dict[str, Any] = {}
        for key in keys:
            if key == "kind":
                body[key] = rng.choice([None, "", strategy.kind])
            elif key == "apiVersion":
                body[key] = rng.choice([None, "", strategy.api_version])
            elif key == "metadata":
                body[key] = rng.choice([None, {}, {"name": "n"}, {"namespace": "ns", "labels": {"a": "b"}}])
            else:
                body[key] = rng.choice([None, 1, "x", {"k": [1]}])
        expected = _reference(strategy, body, "ns")
        checked = _checked(store, strategy, body, "ns")
        assert list(checked.items()) == list(expected.items())
        assert list(checked) == list(expected)


async def test_metadata_must_be_an_object(store: GenericStore) -> None:
    with pytest.raises(ApiError) as refused:
        _checked(store, resourceclaim.STRATEGY, {"metadata": [1]}, "ns")
    assert refused.value.code == 400 and refused.value.message == "metadata must be an object"


async def test_the_namespace_of_the_body_must_be_the_requests(store: GenericStore) -> None:
    with pytest.raises(ApiError) as refused:
        _checked(store, resourceclaim.STRATEGY, {"metadata": {"namespace": "other"}}, "ns")
    assert refused.value.message == "the namespace of the provided object does not match the namespace sent on the request"
