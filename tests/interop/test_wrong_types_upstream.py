"""The answers tests/app/api/wrong_types.py holds are upstream's: each row, sent to kube-apiserver
v1.37.2, is refused with its message (and nothing stored); every kind this server serves is
refused a string for ``metadata.labels`` in the same words by upstream; and a server-side apply
over a ResourceClaim that ``kubectl create`` made conflicts as tests/app/api expects."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import orjson
import pytest
import yaml

from app.registry import served_kinds
from app.registry.base import KindStrategy
from devtools import upstream
from kube.client import resource_path
from tests.app.api.wrong_types import LABELS_NOT_A_MAP, ROWS, YAML, WrongType, cannot_handle
from tests.helpers import assert_status, claim
from tests.interop.upstream import needs_upstream, upstream_binaries

pytestmark = needs_upstream


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, str]]:
    """An admin client of upstream's kube-apiserver and a namespace in it."""
    upstream_binaries()
    with (
        upstream.UpstreamControlPlane(tmp_path_factory.mktemp("upstream"), workers=False) as plane,
        httpx.Client(**plane.httpx_options(), timeout=30.0) as client,  # type: ignore[arg-type]
    ):
        namespace = f"wrong-{uuid.uuid4().hex[:8]}"
        assert client.post("/api/v1/namespaces", json={"metadata": {"name": namespace}}).status_code == 201
        yield client, namespace


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.case)
def test_upstream_answers_each_row_as_recorded(admin: tuple[httpx.Client, str], row: WrongType) -> None:
    client, namespace = admin
    refused = assert_status(row.send(client, namespace), 400, "BadRequest")
    assert refused["message"] == row.message
    assert not row.stored(client, namespace)


@pytest.mark.parametrize("strategy", served_kinds(), ids=lambda s: f"{s.api_version}/{s.kind}")
def test_upstream_refuses_labels_of_the_wrong_type_for_every_kind_served_here(admin: tuple[httpx.Client, str], strategy: KindStrategy) -> None:
    client, namespace = admin
    collection = resource_path(strategy.group, strategy.version, strategy.plural, namespace if strategy.namespaced else None)
    body = {"apiVersion": strategy.api_version, "kind": strategy.kind, "metadata": {"name": "wrong", "labels": "x"}}
    for content_type in ("application/json", YAML):
        content = yaml.safe_dump(body).encode() if content_type == YAML else orjson.dumps(body)
        refused = assert_status(client.post(collection, content=content, headers={"Content-Type": content_type}), 400, "BadRequest")
        assert refused["message"] == cannot_handle(strategy.kind, strategy.version) + LABELS_NOT_A_MAP


def test_upstream_conflicts_on_the_requests_of_a_claim_kubectl_created(admin: tuple[httpx.Client, str]) -> None:
    client, namespace = admin
    claims = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"

    created = client.post(claims, params={"fieldManager": "kubectl-create"}, json=claim("gpu-claim", device_class="gpu"))
    assert created.status_code == 201, created.text
    assert [m["fieldsV1"] for m in created.json()["metadata"]["managedFields"]] == [{"f:spec": {"f:devices": {"f:requests": {}}}}]
    applied = client.patch(
        f"{claims}/gpu-claim", params={"fieldManager": "platform"}, content=orjson.dumps(claim("gpu-claim", device_class="other-class")), headers={"Content-Type": "application/apply-patch+yaml"}
    )
    refused = assert_status(applied, 409, "Conflict")
    assert refused["message"] == 'Apply failed with 1 conflict: conflict with "kubectl-create" using resource.k8s.io/v1: .spec.devices.requests'
