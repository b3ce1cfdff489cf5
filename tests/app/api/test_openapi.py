"""The OpenAPI documents: what kubectl needs, valid structure, resolvable refs, truthful schemas."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from app.api import openapi
from app.registry import group_versions, served_kinds
from app.registry.base import KindStrategy

GROUP_VERSIONS = group_versions()
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
PATCH_TYPES = {
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
}


def _gv_id(gv: tuple[str, str]) -> str:
    return openapi.v3_path_key(*gv)


def _walk(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{path}/{i}")


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method in METHODS:
                yield path, method, op, item


def _schemas_v3(node: dict[str, Any], where: str) -> Iterator[tuple[str, Any]]:
    """Every schema object reachable inside one schema (properties, items, allOf...)."""
    yield where, node
    for key in ("properties", "patternProperties"):
        for name, sub in (node.get(key) or {}).items():
            yield from _schemas_v3(sub, f"{where}.{name}")
    for key in ("items", "additionalProperties", "not"):
        if isinstance(node.get(key), dict):
            yield from _schemas_v3(node[key], f"{where}[{key}]")
    for key in ("allOf", "oneOf", "anyOf"):
        for i, sub in enumerate(node.get(key) or []):
            yield from _schemas_v3(sub, f"{where}.{key}[{i}]")


# ---- v3 ---------------------------------------------------------------------------


def test_index_lists_every_group_version_with_document_hash() -> None:
    index = openapi.openapi_v3_index()
    assert set(index["paths"]) == {
        "api/v1",
        "apis/resource.k8s.io/v1",
        "apis/coordination.k8s.io/v1",
        "apis/rbac.authorization.k8s.io/v1",
        "apis/authentication.k8s.io/v1",
        "apis/authorization.k8s.io/v1",
        "apis/scheduling.k8s.io/v1",
        "apis/apps/v1",
        "apis/batch/v1",
        "apis/policy/v1",
        "apis/storage.k8s.io/v1",
        "apis/discovery.k8s.io/v1",
        "apis/events.k8s.io/v1",
        "apis/admissionregistration.k8s.io/v1",
    }
    for group, version in GROUP_VERSIONS:
        key = openapi.v3_path_key(group, version)
        url = index["paths"][key]["serverRelativeURL"]
        digest = openapi.openapi_v3(group, version).hash
        assert url == f"/openapi/v3/{key}?hash={digest}"
        assert openapi.v3_group_version(key) == (group, version)
        assert openapi.v3_group_version(f"/{key}/") == (group, version)
    assert openapi.v3_group_version("apis/networking.k8s.io/v1") is None


def test_index_hash_mixes_in_base_source() -> None:
    plain = openapi.openapi_v3_index()
    assert openapi.openapi_v3_index("v1.37.0") == openapi.openapi_v3_index("v1.37.0")
    assert openapi.openapi_v3_index("v1.37.0") != plain
    assert openapi.openapi_v3_index("v1.37.1") != openapi.openapi_v3_index("v1.37.0")


def test_documents_are_cached_and_serialized() -> None:
    doc = openapi.openapi_v3_document("resource.k8s.io", "v1")
    assert openapi.openapi_v3_document("resource.k8s.io", "v1") is doc
    body = openapi.openapi_v3_bytes("resource.k8s.io", "v1")
    assert body is not None
    assert json.loads(body) == doc
    etag = openapi.openapi_v3_etag("resource.k8s.io", "v1")
    assert etag is not None
    assert re.fullmatch(r'"[0-9A-F]{128}"', etag)
    assert openapi.openapi_v2_document() is openapi.openapi_v2_document()
    assert json.loads(openapi.openapi_v2_bytes()) == openapi.openapi_v2_document()
    assert openapi.openapi_v2_etag() != etag


def test_unserved_group_version() -> None:
    with pytest.raises(KeyError):
        openapi.openapi_v3_document("networking.k8s.io", "v1")
    assert openapi.openapi_v3_bytes("networking.k8s.io", "v1") is None
    assert openapi.openapi_v3_etag("resource.k8s.io", "v1beta1") is None


@pytest.mark.parametrize("kind", [k for k in served_kinds() if "patch" in k.verbs], ids=lambda k: k.kind)
def test_kubectl_finds_patch_with_field_validation(kind: KindStrategy) -> None:
    """Without this kubectl falls back to protobuf /openapi/v2 and fails."""
    doc = openapi.openapi_v3_document(kind.group, kind.version)
    gvk = {"group": kind.group, "version": kind.version, "kind": kind.kind}
    found = [
        op
        for _path, method, op, _item in _operations(doc)
        if method == "patch" and op.get("x-kubernetes-group-version-kind") == gvk
    ]
    assert found, f"no PATCH operation for {gvk}"
    assert all(any(p["name"] == "fieldValidation" and p["in"] == "query" for p in op["parameters"]) for op in found)


@pytest.mark.parametrize("kind", served_kinds(), ids=lambda k: k.kind)
def test_kubectl_explain_finds_kind_schema(kind: KindStrategy) -> None:
    schemas = openapi.openapi_v3_document(kind.group, kind.version)["components"]["schemas"]
    gvk = {"group": kind.group, "version": kind.version, "kind": kind.kind}
    matches = [name for name, s in schemas.items() if gvk in (s.get("x-kubernetes-group-version-kind") or [])]
    assert len(matches) == 1
    schema = schemas[matches[0]]
    assert schema["type"] == "object"
    assert schema["description"]
    assert {"apiVersion", "kind", "metadata"} <= set(schema["properties"])
    assert schema["properties"]["metadata"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    ]
    assert schema["properties"]["metadata"]["description"]


@pytest.mark.parametrize("gv", GROUP_VERSIONS, ids=_gv_id)
def test_v3_refs_resolve(gv: tuple[str, str]) -> None:
    doc = openapi.openapi_v3_document(*gv)
    schemas = doc["components"]["schemas"]
    refs = [node["$ref"] for _path, node in _walk(doc) if isinstance(node, dict) and isinstance(node.get("$ref"), str)]
    assert refs
    for ref in refs:
        assert ref.startswith("#/components/schemas/"), ref
        assert ref.removeprefix("#/components/schemas/") in schemas, ref


@pytest.mark.parametrize("gv", GROUP_VERSIONS, ids=_gv_id)
def test_v3_document_structure(gv: tuple[str, str]) -> None:
    doc = openapi.openapi_v3_document(*gv)
    assert set(doc) <= {"openapi", "info", "paths", "components", "security", "servers", "tags", "externalDocs"}
    assert re.fullmatch(r"3\.0\.\d+", doc["openapi"])
    assert doc["info"]["title"] and doc["info"]["version"]
    assert doc["paths"]
    operation_ids: list[str] = []
    for path, item in doc["paths"].items():
        assert path.startswith("/")
        assert set(item) <= METHODS | {"parameters", "summary", "description"}
        for param in item.get("parameters", []):
            _check_parameter_v3(param)
    for path, method, op, item in _operations(doc):
        where = f"{method.upper()} {path}"
        operation_ids.append(op["operationId"])
        assert op["tags"] and op["description"], where
        assert op["x-kubernetes-action"] in {"get", "list", "put", "patch", "post", "delete", "deletecollection"}
        gvk = op["x-kubernetes-group-version-kind"]
        assert isinstance(gvk, dict) and set(gvk) == {"group", "version", "kind"}, where
        params = item.get("parameters", []) + op.get("parameters", [])
        for param in op.get("parameters", []):
            _check_parameter_v3(param)
        keys = [(p["name"], p["in"]) for p in params]
        assert len(keys) == len(set(keys)), where
        templated = set(re.findall(r"{([^}]+)}", path))
        assert {p["name"] for p in params if p["in"] == "path"} == templated, where
        assert all(p["required"] is True for p in params if p["in"] == "path"), where
        if "requestBody" in op:
            assert method in {"post", "put", "patch", "delete"}, where
            assert op["requestBody"]["content"], where
            for media in op["requestBody"]["content"].values():
                assert "schema" in media
        if method == "patch":
            assert set(op["requestBody"]["content"]) == PATCH_TYPES
            assert op["requestBody"]["required"] is True
        assert op["responses"], where
        for code, response in op["responses"].items():
            assert code == "default" or re.fullmatch(r"[1-5]\d\d", code), where
            assert response["description"], where
            for media in response.get("content", {}).values():
                assert "schema" in media
        default = op["responses"]["default"]["content"]["application/json"]["schema"]
        assert default == {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Status"}
    assert len(operation_ids) == len(set(operation_ids))
    assert doc["components"]["securitySchemes"]["BearerToken"]["type"] == "apiKey"


def _check_parameter_v3(param: dict[str, Any]) -> None:
    assert param["in"] in {"query", "header", "path", "cookie"}
    assert param["name"]
    assert param["schema"]["type"] in {"string", "integer", "boolean"}
    if param["in"] == "path":
        assert param["required"] is True


@pytest.mark.parametrize("gv", GROUP_VERSIONS, ids=_gv_id)
def test_v3_schemas_are_openapi_30(gv: tuple[str, str]) -> None:
    """No JSON Schema 2020-12 leftovers: single types, nullable flags, no $ref siblings."""
    schemas = openapi.openapi_v3_document(*gv)["components"]["schemas"]
    allowed_types = {"string", "integer", "number", "boolean", "object", "array"}
    for name, schema in schemas.items():
        for where, node in _schemas_v3(schema, name):
            assert not {"$defs", "$schema", "$id", "const", "prefixItems"} & set(node), where
            if "type" in node:
                assert node["type"] in allowed_types, where
            if "nullable" in node:
                assert node["nullable"] is True and "type" in node, where
            if "$ref" in node:
                assert set(node) == {"$ref"}, where
            if node.get("type") == "array":
                assert "items" in node, where
            for key in ("required", "enum"):
                if key in node:
                    assert isinstance(node[key], list) and node[key], where


def test_v3_operation_ids_and_actions_follow_upstream() -> None:
    resource = openapi.openapi_v3_document("resource.k8s.io", "v1")["paths"]
    claims = "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
    assert resource[claims]["post"]["operationId"] == "createResourceV1NamespacedResourceClaim"
    assert resource[claims]["get"]["operationId"] == "listResourceV1NamespacedResourceClaim"
    assert resource[claims]["delete"]["operationId"] == "deleteResourceV1CollectionNamespacedResourceClaim"
    assert resource[claims]["delete"]["x-kubernetes-action"] == "deletecollection"
    assert resource[claims + "/{name}"]["put"]["operationId"] == "replaceResourceV1NamespacedResourceClaim"
    assert resource[claims + "/{name}/status"]["patch"]["operationId"] == "patchResourceV1NamespacedResourceClaimStatus"
    everywhere = resource["/apis/resource.k8s.io/v1/resourceclaims"]["get"]
    assert everywhere["operationId"] == "listResourceV1ResourceClaimForAllNamespaces"
    assert everywhere["tags"] == ["resource_v1"]
    slices = resource["/apis/resource.k8s.io/v1/resourceslices/{name}"]
    assert slices["delete"]["operationId"] == "deleteResourceV1ResourceSlice"

    core = openapi.openapi_v3_document("", "v1")["paths"]
    binding = core["/api/v1/namespaces/{namespace}/pods/{name}/binding"]["post"]
    assert binding["operationId"] == "createCoreV1NamespacedPodBinding"
    assert binding["x-kubernetes-group-version-kind"] == {"group": "", "version": "v1", "kind": "Binding"}
    assert binding["tags"] == ["core_v1"]
    finalize = core["/api/v1/namespaces/{name}/finalize"]["put"]
    assert finalize["operationId"] == "replaceCoreV1NamespaceFinalize"
    assert "delete" not in core["/api/v1/namespaces"]  # upstream namespaces have no deletecollection
    assert "/api/v1/pods" in core and "/api/v1/events" in core
    assert "/api/v1/nodes/{name}/status" in core

    leases = openapi.openapi_v3_document("coordination.k8s.io", "v1")["paths"]
    lease = leases["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"]["patch"]
    assert lease["operationId"] == "patchCoordinationV1NamespacedLease"


def test_v3_parameters_and_content_types() -> None:
    paths = openapi.openapi_v3_document("resource.k8s.io", "v1")["paths"]
    collection = paths["/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"]
    list_params = {p["name"] for p in collection["get"]["parameters"]}
    assert list_params == {
        "allowWatchBookmarks",
        "continue",
        "fieldSelector",
        "labelSelector",
        "limit",
        "resourceVersion",
        "resourceVersionMatch",
        "sendInitialEvents",
        "timeoutSeconds",
        "watch",
    }
    ok = collection["get"]["responses"]["200"]["content"]
    assert ok["application/json"]["schema"]["$ref"].endswith("ResourceClaimList")
    assert ok["application/json;stream=watch"]["schema"]["$ref"].endswith("meta.v1.WatchEvent")
    assert "application/yaml" in ok
    assert {p["name"] for p in collection["post"]["parameters"]} == {"dryRun", "fieldManager", "fieldValidation"}
    assert collection["post"]["requestBody"]["required"] is True
    assert set(collection["post"]["responses"]) == {"200", "201", "202", "default"}
    item = paths["/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"]
    assert {p["name"] for p in item["patch"]["parameters"]} == {"dryRun", "fieldManager", "fieldValidation", "force"}
    assert {p["name"] for p in item["delete"]["parameters"]} == {
        "dryRun",
        "gracePeriodSeconds",
        "orphanDependents",
        "propagationPolicy",
    }
    assert item["delete"]["requestBody"]["required"] is False
    assert item["delete"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "resource.v1.ResourceClaim"
    )
    assert [p["name"] for p in item["parameters"]] == ["name", "namespace", "pretty"]
    json_patch = item["patch"]["requestBody"]["content"]["application/json-patch+json"]["schema"]
    assert json_patch["type"] == "array"
    # DeviceTaintRule v1 answers a delete with a Status once it is gone, not the object...
    rule = paths["/apis/resource.k8s.io/v1/devicetaintrules/{name}"]["delete"]
    ok_schemas = rule["responses"]["200"]["content"]["application/json"]["schema"]["anyOf"]
    assert [s["$ref"].rsplit(".", 2)[-1] for s in ok_schemas] == ["Status", "DeviceTaintRule"]
    # ...but, as upstream, with the object while finalizers keep it (e.g. propagationPolicy=Orphan).
    assert rule["responses"]["202"]["content"]["application/json"]["schema"]["$ref"].endswith("v1.DeviceTaintRule")
    deletecollection = collection["delete"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert {s["$ref"].rsplit(".", 1)[-1] for s in deletecollection["anyOf"]} == {"Status", "ResourceClaimList"}


def test_v3_shared_definitions_present_and_trimmed() -> None:
    schemas = openapi.openapi_v3_document("resource.k8s.io", "v1")["components"]["schemas"]
    meta = "io.k8s.apimachinery.pkg.apis.meta.v1."
    for name in ("Status", "DeleteOptions", "APIResourceList", "WatchEvent", "Patch", "ObjectMeta", "ListMeta"):
        assert meta + name in schemas
    assert "io.k8s.api.core.v1.Binding" not in schemas
    assert "io.k8s.api.core.v1.Binding" in openapi.openapi_v3_document("", "v1")["components"]["schemas"]
    served = {(g, v) for g, v in GROUP_VERSIONS}
    for gvk in schemas[meta + "DeleteOptions"]["x-kubernetes-group-version-kind"]:
        assert (gvk["group"], gvk["version"]) in served
    assert set(schemas[meta + "DeleteOptions"]["properties"]["apiVersion"]["enum"]) == {
        "v1",
        "resource.k8s.io/v1",
        "coordination.k8s.io/v1",
        "rbac.authorization.k8s.io/v1",
        "authentication.k8s.io/v1",
        "authorization.k8s.io/v1",
        "scheduling.k8s.io/v1",
        "apps/v1",
        "batch/v1",
        "policy/v1",
        "storage.k8s.io/v1",
        "discovery.k8s.io/v1",
        "events.k8s.io/v1",
        "admissionregistration.k8s.io/v1",
    }
    assert schemas["io.k8s.api.resource.v1.ResourceClaimList"]["required"] == ["items"]
    quantity = schemas["io.k8s.apimachinery.pkg.api.resource.Quantity"]
    assert quantity["oneOf"] == [{"type": "string"}, {"type": "number"}]


def _json_schema_view(doc: dict[str, Any]) -> dict[str, Any]:
    """The v3 schemas as JSON Schema (nullable -> type lists), to validate sample objects."""

    def convert(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: convert(v) for k, v in node.items() if k != "nullable"}
            if node.get("nullable") and "type" in node:
                out["type"] = [node["type"], "null"]
            return out
        if isinstance(node, list):
            return [convert(v) for v in node]
        return node

    return {"components": convert(doc["components"])}


def _validator(doc: dict[str, Any], name: str) -> jsonschema.protocols.Validator:
    root = _json_schema_view(doc)
    root["$ref"] = f"#/components/schemas/{name}"
    return jsonschema.Draft202012Validator(root)


def test_v3_schemas_accept_real_objects_and_reject_broken_ones() -> None:
    doc = openapi.openapi_v3_document("resource.k8s.io", "v1")
    validator = _validator(doc, "io.k8s.api.resource.v1.ResourceClaim")
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "c",
            "namespace": "default",
            "resourceVersion": "3",
            "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"a": "b"},
        },
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {"deviceClassName": "gpu.example.com", "count": 1, "allocationMode": "ExactCount"},
                    }
                ]
            }
        },
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "p", "device": "d0"}]}
            },
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}],
        },
    }
    assert list(validator.iter_errors(claim)) == []
    broken = json.loads(json.dumps(claim))
    del broken["spec"]["devices"]["requests"][0]["name"]
    assert list(validator.iter_errors(broken))
    wrong_kind = dict(claim, kind="Pod")
    assert list(validator.iter_errors(wrong_kind))

    slices = _validator(doc, "io.k8s.api.resource.v1.ResourceSliceList")
    assert (
        list(
            slices.iter_errors(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSliceList",
                    "metadata": {"resourceVersion": "9"},
                    "items": [],
                }
            )
        )
        == []
    )
    assert list(slices.iter_errors({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSliceList", "metadata": {}}))

    status = _validator(doc, "io.k8s.apimachinery.pkg.apis.meta.v1.Status")
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "x",
        "reason": "NotFound",
        "details": {"name": "x", "group": "resource.k8s.io", "kind": "resourceclaims"},
        "code": 404,
    }
    assert list(status.iter_errors(body)) == []

    core = openapi.openapi_v3_document("", "v1")
    pod = _validator(core, "io.k8s.api.core.v1.Pod")
    assert (
        list(
            pod.iter_errors(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "p"},
                    "spec": {
                        "containers": [
                            {
                                "name": "c",
                                "image": "i",
                                "ports": [{"containerPort": 80}],
                                "resources": {"limits": {"cpu": "1", "memory": 5}},
                            }
                        ]
                    },
                }
            )
        )
        == []
    )


# ---- v2 ---------------------------------------------------------------------------


def test_v2_document() -> None:
    doc = openapi.openapi_v2_document()
    assert doc["swagger"] == "2.0"
    definitions = doc["definitions"]
    v3_paths: set[str] = set()
    v3_schemas: set[str] = set()
    for gv in GROUP_VERSIONS:
        v3 = openapi.openapi_v3_document(*gv)
        v3_paths |= set(v3["paths"])
        v3_schemas |= set(v3["components"]["schemas"])
    assert set(doc["paths"]) == v3_paths
    assert set(definitions) == v3_schemas
    for _path, node in _walk(doc):
        if isinstance(node, dict):
            assert not {"nullable", "oneOf", "anyOf", "requestBody", "$defs"} & set(node), _path
            if isinstance(node.get("$ref"), str):
                assert node["$ref"].removeprefix("#/definitions/") in definitions, node["$ref"]
            if "type" in node and not _path.endswith("/properties"):
                assert isinstance(node["type"], str), _path
    ids = [op["operationId"] for _p, _m, op, _i in _operations(doc)]
    assert len(ids) == len(set(ids))
    for path, method, op, item in _operations(doc):
        params = item.get("parameters", []) + op.get("parameters", [])
        assert {p["name"] for p in params if p["in"] == "path"} == set(re.findall(r"{([^}]+)}", path))
        bodies = [p for p in params if p["in"] == "body"]
        assert len(bodies) <= 1
        for p in params:
            assert ("schema" in p) == (p["in"] == "body")
        if method == "patch":
            assert set(op["consumes"]) == PATCH_TYPES
            assert any(p["name"] == "fieldValidation" for p in params)
        assert op["produces"] and op["responses"]["default"]["schema"]["$ref"].endswith("meta.v1.Status")
        assert isinstance(op["x-kubernetes-group-version-kind"], dict)
    assert definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"
    assert definitions["io.k8s.apimachinery.pkg.api.resource.Quantity"]["type"] == "string"
    claim = definitions["io.k8s.api.resource.v1.ResourceClaim"]
    assert claim["type"] == "object"
    assert claim["properties"]["metadata"]["$ref"] == "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
