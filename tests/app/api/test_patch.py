"""JSON patch, merge patch and strategic merge patch against upstream behaviour."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.api import schemas
from app.api.patch import apply_json_patch, apply_merge_patch, apply_strategic_merge_patch
from kube.errors import ApiError

POD_SCHEMA = schemas.schema_for_kind("v1", "Pod")
CLAIM_SCHEMA = schemas.schema_for_kind("resource.k8s.io/v1", "ResourceClaim")


def pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app": "web", "tier": "front"},
            "finalizers": ["example.com/a", "example.com/b"],
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "nginx:1",
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                },
                {"name": "sidecar", "image": "busybox", "args": ["sleep", "1d"]},
            ],
            "volumes": [{"name": "data", "emptyDir": {}}],
            "nodeSelector": {"disk": "ssd"},
        },
    }


def claim() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu", "namespace": "default", "labels": {"a": "b"}},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "r1", "exactly": {"deviceClassName": "gpu"}},
                    {"name": "r2", "exactly": {"deviceClassName": "gpu", "count": 2}},
                ]
            }
        },
    }


# ---------------------------------------------------------------------------------------------- JSON patch

JSON_PATCH_CASES: list[tuple[str, Any, Any]] = [
    (
        "add label with escaped key",
        [{"op": "add", "path": "/metadata/labels/example.com~1role", "value": "db"}],
        lambda d: d["metadata"]["labels"]["example.com/role"] == "db",
    ),
    (
        "append container with dash index",
        [{"op": "add", "path": "/spec/containers/-", "value": {"name": "new", "image": "x"}}],
        lambda d: [c["name"] for c in d["spec"]["containers"]] == ["app", "sidecar", "new"],
    ),
    (
        "insert at index shifts the rest",
        [{"op": "add", "path": "/spec/containers/0", "value": {"name": "first", "image": "x"}}],
        lambda d: [c["name"] for c in d["spec"]["containers"]] == ["first", "app", "sidecar"],
    ),
    (
        "remove env entry",
        [{"op": "remove", "path": "/spec/containers/0/env/0"}],
        lambda d: d["spec"]["containers"][0]["env"] == [{"name": "B", "value": "2"}],
    ),
    (
        "replace image after passing test",
        [
            {"op": "test", "path": "/spec/containers/0/image", "value": "nginx:1"},
            {"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:2"},
        ],
        lambda d: d["spec"]["containers"][0]["image"] == "nginx:2",
    ),
    (
        "replace of a missing member adds it (evanphx v4 behaviour)",
        [{"op": "replace", "path": "/metadata/annotations", "value": {"x": "y"}}],
        lambda d: d["metadata"]["annotations"] == {"x": "y"},
    ),
    (
        "move label",
        [{"op": "move", "from": "/metadata/labels/tier", "path": "/metadata/labels/layer"}],
        lambda d: d["metadata"]["labels"] == {"app": "web", "layer": "front"},
    ),
    (
        "copy list element",
        [{"op": "copy", "from": "/spec/containers/1", "path": "/spec/containers/-"}],
        lambda d: (
            d["spec"]["containers"][2] == d["spec"]["containers"][1]
            and d["spec"]["containers"][2] is not d["spec"]["containers"][1]
        ),
    ),
    (
        "negative index removes from the end",
        [{"op": "remove", "path": "/metadata/finalizers/-1"}],
        lambda d: d["metadata"]["finalizers"] == ["example.com/a"],
    ),
    ("null patch is a no-op", None, lambda d: d == pod()),
]


@pytest.mark.parametrize(("name", "ops", "check"), JSON_PATCH_CASES, ids=[c[0] for c in JSON_PATCH_CASES])
def test_json_patch(name: str, ops: Any, check: Any) -> None:
    original = pod()
    result = apply_json_patch(original, ops)
    assert check(result)
    assert original == pod(), "input must not be modified"


JSON_PATCH_FAILURES: list[tuple[str, Any, int, str]] = [
    ("failing test", [{"op": "test", "path": "/metadata/name", "value": "other"}], 422, "Invalid"),
    ("missing intermediate path", [{"op": "add", "path": "/spec/nope/x", "value": 1}], 422, "Invalid"),
    ("remove missing key", [{"op": "remove", "path": "/metadata/annotations"}], 422, "Invalid"),
    ("index out of range", [{"op": "replace", "path": "/spec/containers/9/image", "value": "x"}], 422, "Invalid"),
    ("unknown op", [{"op": "frobnicate", "path": "/metadata/name"}], 422, "Invalid"),
    ("root path", [{"op": "replace", "path": "", "value": {}}], 422, "Invalid"),
    ("document is an object", {"op": "add"}, 400, "BadRequest"),
    ("operation is a string", ["add"], 400, "BadRequest"),
]


@pytest.mark.parametrize(
    ("name", "ops", "code", "reason"), JSON_PATCH_FAILURES, ids=[c[0] for c in JSON_PATCH_FAILURES]
)
def test_json_patch_errors(name: str, ops: Any, code: int, reason: str) -> None:
    with pytest.raises(ApiError) as info:
        apply_json_patch(pod(), ops)
    assert info.value.code == code
    assert info.value.reason == reason


def test_json_patch_apply_failure_has_upstream_shape() -> None:
    with pytest.raises(ApiError) as info:
        apply_json_patch(pod(), [{"op": "test", "path": "/metadata/name", "value": "x"}])
    status = info.value.status()
    assert status["message"] == "the server rejected our request due to an error in our request"
    assert status["details"] == {}
    assert "testing value /metadata/name failed" in str(info.value.__cause__)


def test_json_patch_decode_error_message() -> None:
    with pytest.raises(ApiError) as info:
        apply_json_patch(pod(), {"op": "add"})
    assert info.value.message == "json: cannot unmarshal object into Go value of type jsonpatch.Patch"


def test_json_patch_too_many_operations() -> None:
    ops = [{"op": "test", "path": "/metadata/name", "value": "web"}] * 10001
    with pytest.raises(ApiError) as info:
        apply_json_patch(pod(), ops)
    assert info.value.code == 413


# --------------------------------------------------------------------------------------------- merge patch

MERGE_CASES: list[tuple[str, Any, Any]] = [
    ("set and delete labels", {"metadata": {"labels": {"tier": None, "new": "x"}}}, {"app": "web", "new": "x"}),
    ("lists are replaced", {"metadata": {"finalizers": ["z"]}}, ["z"]),
    ("added subtree loses nulls", {"metadata": {"annotations": {"a": "1", "b": None}}}, {"a": "1"}),
]


@pytest.mark.parametrize(("name", "patch", "expected"), MERGE_CASES, ids=[c[0] for c in MERGE_CASES])
def test_merge_patch(name: str, patch: Any, expected: Any) -> None:
    original = pod()
    result = apply_merge_patch(original, patch)
    key = next(iter(patch["metadata"]))
    assert result["metadata"][key] == expected
    assert original == pod()


def test_merge_patch_replaces_claim_requests_atomically() -> None:
    result = apply_merge_patch(claim(), {"spec": {"devices": {"requests": [{"name": "only"}]}}})
    assert result["spec"]["devices"]["requests"] == [{"name": "only"}]


@pytest.mark.parametrize("patch", [None, "x", 3])
def test_merge_patch_rejects_non_objects(patch: Any) -> None:
    with pytest.raises(ApiError) as info:
        apply_merge_patch(pod(), patch)
    assert (info.value.code, info.value.reason, info.value.message) == (400, "BadRequest", "Invalid JSON Patch")


# --------------------------------------------------------------------------------- strategic merge patch


def names(items: list[dict[str, Any]]) -> list[str]:
    return [i["name"] for i in items]


SMP_CASES: list[tuple[str, dict[str, Any], Any]] = [
    (
        "patching an existing container merges by name",
        {"spec": {"containers": [{"name": "sidecar", "image": "busybox:2"}]}},
        lambda d: (
            names(d["spec"]["containers"]) == ["app", "sidecar"]
            and d["spec"]["containers"][1] == {"name": "sidecar", "image": "busybox:2", "args": ["sleep", "1d"]}
        ),
    ),
    (
        "a new container goes before the untouched ones",
        {"spec": {"containers": [{"name": "new", "image": "x"}]}},
        lambda d: names(d["spec"]["containers"]) == ["new", "app", "sidecar"],
    ),
    (
        "env merges by name inside a container",
        {"spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}]}]}},
        lambda d: (
            d["spec"]["containers"][0]["env"]
            == [{"name": "A", "value": "1"}, {"name": "B", "value": "20"}, {"name": "C", "value": "3"}]
        ),
    ),
    (
        "ports merge by containerPort",
        {"spec": {"containers": [{"name": "app", "ports": [{"containerPort": 443}]}]}},
        lambda d: [p["containerPort"] for p in d["spec"]["containers"][0]["ports"]] == [443, 80],
    ),
    (
        "$patch delete removes a list item",
        {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}},
        lambda d: names(d["spec"]["containers"]) == ["app"],
    ),
    (
        "$patch replace on a list",
        {"spec": {"containers": [{"name": "only", "image": "x"}, {"$patch": "replace"}]}},
        lambda d: d["spec"]["containers"] == [{"name": "only", "image": "x"}],
    ),
    (
        "$patch replace on a map",
        {"metadata": {"labels": {"$patch": "replace", "only": "1"}}},
        lambda d: d["metadata"]["labels"] == {"only": "1"},
    ),
    (
        "$patch delete on a map leaves an empty map",
        {"spec": {"nodeSelector": {"$patch": "delete"}}},
        lambda d: d["spec"]["nodeSelector"] == {},
    ),
    (
        "null deletes a field",
        {"spec": {"nodeSelector": None}, "metadata": {"labels": {"tier": None}}},
        lambda d: "nodeSelector" not in d["spec"] and d["metadata"]["labels"] == {"app": "web"},
    ),
    (
        "finalizers merge as a set",
        {"metadata": {"finalizers": ["example.com/b", "example.com/c"]}},
        lambda d: sorted(d["metadata"]["finalizers"]) == ["example.com/a", "example.com/b", "example.com/c"],
    ),
    (
        "$deleteFromPrimitiveList",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a"]}},
        lambda d: d["metadata"]["finalizers"] == ["example.com/b"],
    ),
    (
        "$setElementOrder reorders containers",
        {
            "spec": {
                "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}],
                "containers": [{"name": "app", "image": "nginx:2"}],
            }
        },
        lambda d: (
            names(d["spec"]["containers"]) == ["sidecar", "app"] and d["spec"]["containers"][1]["image"] == "nginx:2"
        ),
    ),
    (
        "$retainKeys drops unlisted volume sources",
        {"spec": {"volumes": [{"name": "data", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/d"}}]}},
        lambda d: d["spec"]["volumes"] == [{"name": "data", "hostPath": {"path": "/d"}}],
    ),
    (
        "atomic list without patch strategy is replaced",
        {"spec": {"containers": [{"name": "sidecar", "args": ["true"]}]}},
        lambda d: d["spec"]["containers"][1]["args"] == ["true"],
    ),
    (
        "added subtree drops nulls and directives",
        {"spec": {"securityContext": {"runAsUser": 1, "fsGroup": None}, "hostname": "h"}},
        lambda d: d["spec"]["securityContext"] == {"runAsUser": 1} and d["spec"]["hostname"] == "h",
    ),
]


@pytest.mark.parametrize(("name", "patch", "check"), SMP_CASES, ids=[c[0] for c in SMP_CASES])
def test_strategic_merge_patch_pod(name: str, patch: dict[str, Any], check: Any) -> None:
    original = pod()
    frozen = copy.deepcopy(patch)
    result = apply_strategic_merge_patch(original, patch, POD_SCHEMA)
    assert check(result), result
    assert original == pod()
    assert patch == frozen, "patch must not be modified"


def test_strategic_merge_patch_resource_claim_lists_are_atomic() -> None:
    patch = {"spec": {"devices": {"requests": [{"name": "r2", "exactly": {"deviceClassName": "x"}}]}}}
    result = apply_strategic_merge_patch(claim(), patch, CLAIM_SCHEMA)
    assert result["spec"]["devices"]["requests"] == [{"name": "r2", "exactly": {"deviceClassName": "x"}}]
    assert result == apply_merge_patch(claim(), patch)


def test_strategic_merge_patch_without_schema_merges_maps() -> None:
    result = apply_strategic_merge_patch(claim(), {"metadata": {"labels": {"c": "d"}}}, None)
    assert result["metadata"]["labels"] == {"a": "b", "c": "d"}


SMP_FAILURES: list[tuple[str, Any, int, str]] = [
    ("patch is a list", [{"a": 1}], 400, "json: cannot unmarshal array into Go value of type map[string]interface {}"),
    ("bad retainKeys", {"spec": {"$retainKeys": "name"}}, 400, "invalid patch format of retainKeys"),
    (
        "key outside retainKeys",
        {"spec": {"$retainKeys": ["hostname"], "nodeName": "n"}},
        400,
        "invalid patch format of retainKeys",
    ),
    (
        "bad setElementOrder key",
        {"spec": {"$setElementOrder": []}},
        400,
        "invalid patch format of setElementOrder list",
    ),
    (
        "bad deleteFromPrimitiveList key",
        {"metadata": {"$deleteFromPrimitiveList": ["x"]}},
        400,
        "invalid patch format of primitive list",
    ),
    (
        "missing merge key",
        {"spec": {"containers": [{"image": "x"}]}},
        400,
        "map: map[image:x] does not contain declared merge key: name",
    ),
    (
        "unknown $patch",
        {"metadata": {"labels": {"$patch": "frob"}}},
        400,
        "unknown patch type: frob in map: map[$patch:frob]",
    ),
    (
        "mixed element types",
        {"metadata": {"finalizers": [1]}},
        400,
        "list element types are not identical: [[example.com/a example.com/b] [1]]",
    ),
]


@pytest.mark.parametrize(("name", "patch", "code", "message"), SMP_FAILURES, ids=[c[0] for c in SMP_FAILURES])
def test_strategic_merge_patch_errors(name: str, patch: Any, code: int, message: str) -> None:
    with pytest.raises(ApiError) as info:
        apply_strategic_merge_patch(pod(), patch, POD_SCHEMA)
    assert info.value.code == code
    assert info.value.message == message


def test_strategic_merge_patch_list_of_lists() -> None:
    doc = pod()
    doc["metadata"]["finalizers"] = []
    with pytest.raises(ApiError) as info:
        apply_strategic_merge_patch(doc, {"metadata": {"finalizers": [["x"]]}}, POD_SCHEMA)
    assert (info.value.code, info.value.reason) == (422, "Invalid")
    assert str(info.value.__cause__) == "lists of lists are not supported"


@pytest.mark.parametrize("patch_type", ["json", "merge", "strategic"])
def test_patches_copy_the_document_unless_the_caller_owns_it(patch_type: str) -> None:
    doc: dict[str, Any] = {"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    original = copy.deepcopy(doc)
    patch: Any = [{"op": "add", "path": "/metadata/labels/y", "value": "2"}] if patch_type == "json" else {"metadata": {"labels": {"y": "2"}}}

    def run(owned: bool) -> dict[str, Any]:
        if patch_type == "json":
            return apply_json_patch(doc, patch, owned=owned)
        if patch_type == "merge":
            return apply_merge_patch(doc, patch, owned=owned)
        return apply_strategic_merge_patch(doc, patch, POD_SCHEMA, owned=owned)

    copied = run(False)
    assert doc == original and copied is not doc
    assert copied["metadata"]["labels"] == {"x": "1", "y": "2"}
    changed = run(True)
    assert changed is doc and doc["metadata"]["labels"] == {"x": "1", "y": "2"}
