"""Every object the server returns must validate against the official v1.37 schema.

The schema is the strict one shipped by ``kubernetes-validate==1.37.0`` (unknown fields
are errors). The project's two proposal fields (behind their alpha gates) are the only
allowed additions; they are removed before validating.
"""

from __future__ import annotations

import functools
import importlib.resources
from typing import Any

import orjson
from jsonschema import Draft202012Validator

from app import protobuf

# Fields the official schema lacks because they come from this project's proposals.
PROPOSAL_FIELDS: dict[str, list[tuple[str, ...]]] = {
    "ResourceClaim": [("spec", "reservedFor"), ("status", "allocation", "reservedForAnyPod")],
}
# Kinds answered by the server that are not objects of a served kind.
META_KINDS = {
    "Status": "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
    "Table": None,  # meta.k8s.io Table rows embed partial objects; checked by the table tests
    # Not in the OpenAPI documents: only metadata, checked against the full object by their test.
    "PartialObjectMetadata": None,
    "PartialObjectMetadataList": None,
    "APIGroupDiscoveryList": None,
    "APIVersions": "io.k8s.apimachinery.pkg.apis.meta.v1.APIVersions",
    "APIGroupList": "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroupList",
    "APIGroup": "io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup",
    "APIResourceList": "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList",
}


@functools.cache
def _definitions() -> dict[str, Any]:
    base = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema" / "v1.37.0-local-strict"
    return orjson.loads((base / "_definitions.json").read_bytes())  # type: ignore[no-any-return]


@functools.cache
def _by_kind() -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for name, schema in _definitions()["$defs"].items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            api_version = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
            out.setdefault((api_version, gvk["kind"]), name)
    return out


@functools.cache
def _validator(definition: str) -> Draft202012Validator:
    schema = dict(_definitions())
    schema["$ref"] = f"#/$defs/{definition}"
    return Draft202012Validator(schema)


def _strip_proposals(obj: dict[str, Any]) -> dict[str, Any]:
    paths = PROPOSAL_FIELDS.get(obj.get("kind", ""))
    if not paths:
        return obj
    obj = orjson.loads(orjson.dumps(obj))
    for path in paths:
        node: Any = obj
        for step in path[:-1]:
            node = node.get(step) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return obj


class ContractViolation(AssertionError):
    pass


def check_object(obj: Any, where: str = "") -> None:
    """Raise ContractViolation when ``obj`` (an object, list or Status) breaks the official schema."""
    if not isinstance(obj, dict) or "kind" not in obj:
        return
    kind = obj["kind"]
    api_version = obj.get("apiVersion", "")
    if kind in META_KINDS:
        definition = META_KINDS[kind]
    else:
        definition = _by_kind().get((api_version, kind))
        if definition is None:
            raise ContractViolation(f"{where}: no official schema for {api_version} {kind}")
    if definition is None:
        return
    errors = sorted(_validator(definition).iter_errors(_strip_proposals(obj)), key=lambda e: list(e.path))
    if errors:
        detail = "; ".join(f"{'/'.join(str(p) for p in e.path)}: {e.message[:200]}" for e in errors[:5])
        raise ContractViolation(f"{where}: {api_version} {kind} breaks the v1.37 schema: {detail}")


def check_response_body(content: bytes, content_type: str, where: str) -> None:
    if content and content_type == protobuf.CONTENT_TYPE:
        check_object(protobuf.decode_object(content), where)
        return
    if not content or "json" not in content_type:
        return
    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError:
        return
    check_object(body, where)
