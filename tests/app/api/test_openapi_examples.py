"""The request examples in the OpenAPI v3 documents are objects the server accepts.

app/api/openapi.py gives every create body a minimal object of its kind (with ``generateName``),
every merge and JSON patch body a label patch, and every DeleteOptions body a DeleteOptions.
Fuzzers (tests/fuzz) rely on them to get past create; here each is sent, in both content
types the document offers, to a server of its own (the examples create cluster-scoped objects
that the shared server's tests should not see).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest
import yaml

from app.api import openapi
from app.registry import ALL_KINDS, group_versions, served_kinds
from devtools.server import ServerProcess
from tests.contract import check_object

JSON = "application/json"
YAML = "application/yaml"


def _documents() -> list[dict[str, Any]]:
    return [openapi.openapi_v3_document(g, v) for g, v in group_versions()]


DEPRECATION_WARNINGS = {(k.api_version, k.kind): k.deprecation_warning for k in ALL_KINDS if k.deprecation_warning}


def _creates() -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """(collection path, its create, its item's path entry or None for a kind that is only
    created, a review) for every kind (not pods/binding)."""
    found = []
    for doc in _documents():
        for path, item in doc["paths"].items():
            post = item.get("post")
            if post and "{name}" not in path:
                found.append((path, post, doc["paths"].get(f"{path}/{{name}}")))
    return found


def test_every_create_has_an_example_of_its_kind() -> None:
    creates = _creates()
    assert {op["x-kubernetes-group-version-kind"]["kind"] for _, op, _ in creates} == {k.kind for k in served_kinds()}
    for path, op, _ in creates:
        gvk = op["x-kubernetes-group-version-kind"]
        content = op["requestBody"]["content"]
        example = content[JSON]["example"]
        assert content[YAML]["example"] == example, path
        api_version = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
        assert (example["apiVersion"], example["kind"]) == (api_version, gvk["kind"]), path
        assert example["metadata"] == {"generateName": "example-"}, path
        check_object(example, f"example of POST {path}")


def test_patch_and_delete_examples() -> None:
    for doc in _documents():
        for path, item in doc["paths"].items():
            patch = item.get("patch")
            if patch:
                content = patch["requestBody"]["content"]
                assert content["application/merge-patch+json"]["example"] == {"metadata": {"labels": {"example": "true"}}}
                assert content["application/strategic-merge-patch+json"]["example"] == {"metadata": {"labels": {"example": "true"}}}
                assert content["application/json-patch+json"]["example"][0]["op"] == "add"
                assert "example" not in content["application/apply-patch+yaml"], path  # an apply patch names its object
            delete = item.get("delete")
            if delete:
                example = delete["requestBody"]["content"][JSON]["example"]
                check_object(example, f"example of DELETE {path}")


@pytest.fixture(scope="module")
def examples_server(start_server: Callable[..., ServerProcess]) -> Iterator[httpx.Client]:
    server = start_server()
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        yield client


def _send(client: httpx.Client, method: str, path: str, body: Any, content_type: str) -> httpx.Response:
    content = yaml.safe_dump(body).encode() if content_type == YAML else orjson.dumps(body)
    return client.request(method, path, content=content, headers={"Content-Type": content_type})


@pytest.mark.parametrize("content_type", [JSON, YAML])
def test_examples_create_patch_and_delete(examples_server: httpx.Client, content_type: str) -> None:
    """Each create example twice (two names), then its patch examples, then delete with the DeleteOptions example."""
    namespace = f"ex-{uuid.uuid4().hex[:8]}"
    response = examples_server.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    assert response.status_code == 201, response.text
    for template, op, item_ops in _creates():
        path = template.replace("{namespace}", namespace)
        example = op["requestBody"]["content"][content_type]["example"]
        if example["kind"] == "Event":  # valid in its involved object's namespace, "default"
            as_is = _send(examples_server, "POST", template.replace("{namespace}", "default"), example, content_type)
            assert as_is.status_code == 201, as_is.text
            involved = "regarding" if "regarding" in example else "involvedObject"  # events.k8s.io / core
            example = {**example, involved: {**example[involved], "namespace": namespace}}
        if example["kind"] == "LocalSubjectAccessReview":  # its spec names the namespace it asks about, "default"
            path = template.replace("{namespace}", "default")
        if item_ops is None:  # a review: answered, not stored
            answered = _send(examples_server, "POST", f"{path}?fieldValidation=Strict", example, content_type)
            assert answered.status_code == 201, f"POST {path}: {answered.text}"
            assert "status" in answered.json(), answered.text
            continue
        names = []
        for _ in range(2):
            created = _send(examples_server, "POST", f"{path}?fieldValidation=Strict", example, content_type)
            assert created.status_code == 201, f"POST {path}: {created.text}"
            # No warning but the one a deprecated version gets on every request (v1 Endpoints).
            deprecated = DEPRECATION_WARNINGS.get((example["apiVersion"], example["kind"]))
            assert created.headers.get("warning") == (f'299 - "{deprecated}"' if deprecated else None), f"POST {path}"
            names.append(created.json()["metadata"]["name"])
        assert names[0] != names[1]
        item = f"{path}/{names[0]}"
        patches = item_ops["patch"]["requestBody"]["content"]
        for patch_type in ("application/merge-patch+json", "application/json-patch+json"):
            patched = examples_server.patch(item, content=orjson.dumps(patches[patch_type]["example"]), headers={"Content-Type": patch_type})
            assert patched.status_code == 200, f"PATCH {item} ({patch_type}): {patched.text}"
            assert patched.json()["metadata"]["labels"]["example"] == "true"
        delete_options = item_ops["delete"]["requestBody"]["content"][content_type]["example"]
        deleted = _send(examples_server, "DELETE", item, delete_options, content_type)
        assert deleted.status_code == 200, f"DELETE {item}: {deleted.text}"
