"""The five ``[Conformance]`` CRUD tests of upstream's DRA e2e suite (test/e2e/dra/dra.go, "CRUD
Tests"), walked over HTTP as upstream's ``TestResource`` (test/e2e/framework/conformance/
conformance.go) walks them: discovery, create, get, update, status update and read, every patch
type on the main resource and on /status (each on a fresh object), list with a label selector in
the namespace and across namespaces, deletecollection, and the watch events of all of it.

Objects go through the Go type on their way out of the test as they do in upstream's (it turns
them into Go structs and back before sending): ``go_typed`` does that with the Go types' schema,
so a body carries what encoding/json writes, ``"status": {}`` included.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest

from app import protobuf
from tests.helpers import RESOURCE, watch_lines

Obj = dict[str, Any]
LABEL = "e2e-test.kubernetes.io"
TEST_LABEL = {"metadata": {"labels": {"test.dra.example.com": "test"}}}
CONDITION_TIME = "2026-01-02T03:04:05Z"


def go_typed(obj: Obj) -> Obj:
    """``obj`` as it comes out of its Go type (what upstream's test sends)."""
    return protobuf.decode_object(protobuf.encode_object(obj))


def add_test_label(obj: Obj) -> Obj:
    obj.setdefault("metadata", {}).setdefault("labels", {})["test.dra.example.com"] = "test"
    return obj


def _set_cel(obj: Obj) -> Obj:
    obj["spec"]["selectors"][0]["cel"]["expression"] = "1 == 0"
    return obj


def _no_execute(obj: Obj) -> Obj:
    obj["spec"]["taint"]["effect"] = "NoExecute"
    return obj


def _condition(obj: Obj) -> Obj:
    condition = {"type": "Testing", "status": "True", "lastTransitionTime": CONDITION_TIME, "reason": "E2E_test_running", "message": "This condition can be ignored."}
    obj.setdefault("status", {}).setdefault("conditions", []).append(condition)
    return obj


def _allocate(obj: Obj) -> Obj:
    obj.setdefault("status", {})["allocation"] = {}
    return obj


def _one_device(obj: Obj) -> Obj:
    obj["spec"]["devices"] = [{"name": "device-0"}]
    return obj


@dataclass
class Case:
    """One ``ResourceTestcase`` of dra.go."""

    plural: str
    kind: str
    namespaced: bool
    initial: Obj
    update_spec: Callable[[Obj], Obj]
    update_status: Callable[[Obj], Obj] | None = None
    # patch type (Content-Type suffix) -> body; a JSON patch is sent as written, the others get
    # the existing object's identity added (upstream's createPatchObject).
    spec_patches: dict[str, str] = field(default_factory=dict)
    status_patches: dict[str, str] = field(default_factory=dict)


CLAIM_SPEC = {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "dra.example.com"}}]}}
LABEL_PATCH = orjson.dumps(TEST_LABEL).decode()
ALLOCATION_PATCH = '{"status": {"allocation": {}}}'

CASES = [
    Case(
        "deviceclasses", "DeviceClass", False,
        {"spec": {"selectors": [{"cel": {"expression": "false"}}]}},
        _set_cel,
        spec_patches={"strategic-merge-patch+json": '{"spec": {"selectors": [{"cel": {"expression": "1 == 0"}}]}}'},
    ),
    Case(
        "devicetaintrules", "DeviceTaintRule", False,
        {"spec": {"taint": {"key": "testing", "effect": "None"}}},
        _no_execute,
        _condition,
        spec_patches={"strategic-merge-patch+json": '{"spec": {"taint": {"effect": "NoExecute"}}}'},
        status_patches={
            "strategic-merge-patch+json": orjson.dumps({"status": {"conditions": [_condition({})["status"]["conditions"][0]]}}).decode(),
        },
    ),
    Case(
        "resourceclaims", "ResourceClaim", True,
        {"spec": CLAIM_SPEC},
        add_test_label,
        _allocate,
        spec_patches={
            "apply-patch+yaml": LABEL_PATCH,
            "strategic-merge-patch+json": LABEL_PATCH,
            "merge-patch+json": LABEL_PATCH,
            "json-patch+json": '[{"op": "add", "path": "/metadata/labels/test.dra.example.com", "value": "test"}]',
        },
        status_patches={
            "apply-patch+yaml": ALLOCATION_PATCH,
            "strategic-merge-patch+json": ALLOCATION_PATCH,
            "merge-patch+json": ALLOCATION_PATCH,
            "json-patch+json": '[{"op": "add", "path": "/status/allocation", "value": {}}]',
        },
    ),
    Case(
        "resourceclaimtemplates", "ResourceClaimTemplate", True,
        {"spec": {"spec": CLAIM_SPEC}},
        add_test_label,
        spec_patches={"strategic-merge-patch+json": LABEL_PATCH},
    ),
    Case(
        "resourceslices", "ResourceSlice", False,
        {"spec": {"driver": "dra.example.com", "pool": {"name": "cluster", "generation": 1, "resourceSliceCount": 1}, "nodeName": "no-such-node"}},
        _one_device,
        spec_patches={"strategic-merge-patch+json": '{"spec": {"devices": [{"name": "device-0"}]}}'},
    ),
]  # fmt: skip


class Walk:
    """TestResource's steps for one case, with what it checks after each."""

    def __init__(self, api: httpx.Client, ns: str, case: Case) -> None:
        self.api = api
        self.case = case
        self.selector = f"{LABEL}={ns}"
        self.namespace = ns if case.namespaced else ""
        self.collection = f"{RESOURCE}/namespaces/{ns}/{case.plural}" if case.namespaced else f"{RESOURCE}/{case.plural}"
        self.everywhere = f"{RESOURCE}/{case.plural}"
        initial = go_typed({"apiVersion": "resource.k8s.io/v1", "kind": case.kind, **copy.deepcopy(case.initial)})
        initial["metadata"] = {"name": "test" if case.namespaced else f"test-{ns}", "labels": {LABEL: ns}}
        if case.namespaced:
            initial["metadata"]["namespace"] = ns
        self.initial = initial
        self.name = initial["metadata"]["name"]
        self.path = f"{self.collection}/{self.name}"

    def check(self, what: str, response: httpx.Response, code: int = 200) -> Obj:
        assert response.status_code == code, f"{what}: {response.status_code} {response.text}"
        obj: Obj = response.json()
        assert (obj["metadata"]["name"], obj["metadata"].get("namespace", "")) == (self.name, self.namespace), what
        assert obj["metadata"]["resourceVersion"].isdigit(), what
        return obj

    def create(self, what: str, strict: bool) -> Obj:
        params = {"fieldValidation": "Strict"} if strict else {}
        return self.check(what, self.api.post(self.collection, json=self.initial, params=params), 201)

    def update(self, existing: Obj) -> Obj:
        return self.check("update", self.api.put(self.path, json=go_typed(self.case.update_spec(go_typed(existing)))))

    def delete(self) -> None:
        assert self.api.delete(self.path).status_code == 200
        assert self.api.get(self.path).status_code == 404

    def patch(self, what: str, patch_type: str, text: str, existing: Obj, subresource: str = "") -> Obj:
        if patch_type == "json-patch+json":
            body = text.encode()
        else:
            patch = orjson.loads(text)
            meta = patch.setdefault("metadata", {})
            for key in ("name", "namespace", "uid"):
                if existing["metadata"].get(key):
                    meta[key] = existing["metadata"][key]
            patch["apiVersion"], patch["kind"] = existing["apiVersion"], existing["kind"]
            body = orjson.dumps(patch)
        params = {"fieldValidation": "Strict"}
        if patch_type == "apply-patch+yaml":
            params |= {"fieldManager": "test-apply", "force": "true"}
        path = f"{self.path}/{subresource}" if subresource else self.path
        return self.check(what, self.api.patch(path, content=body, params=params, headers={"Content-Type": f"application/{patch_type}"}))

    def run(self) -> None:
        api, case = self.api, self.case
        resources = api.get(RESOURCE).json()["resources"]
        assert case.plural in [r["name"] for r in resources]
        start = api.get(self.everywhere, params={"labelSelector": self.selector}).json()["metadata"]["resourceVersion"]

        existing = self.create("create", strict=True)
        created_version = int(existing["metadata"]["resourceVersion"])
        existing = self.check("get", api.get(self.path))
        existing = self.update(existing)
        assert int(existing["metadata"]["resourceVersion"]) > created_version
        assert existing["metadata"]["labels"][LABEL] == self.selector.split("=")[1]
        if case.update_status is not None:
            body = go_typed(case.update_status(go_typed(existing)))
            existing = self.check("update status", api.put(f"{self.path}/status", json=body))
            self.check("get status", api.get(f"{self.path}/status"))

        for patch_type, text in case.spec_patches.items():
            self.delete()
            existing = self.create(f"create again for {patch_type}", strict=False)
            existing = self.patch(f"patch {patch_type}", patch_type, text, existing)
            assert existing["metadata"]["labels"][LABEL]
        for patch_type, text in case.status_patches.items():
            self.delete()
            existing = self.create(f"create again for status {patch_type}", strict=False)
            existing = self.update(existing)
            existing = self.patch(f"patch {patch_type} status", patch_type, text, existing, "status")

        items = api.get(self.collection, params={"labelSelector": self.selector}).json()["items"]
        assert [i["metadata"]["name"] for i in items] == [self.name]
        if case.namespaced:
            items = api.get(self.everywhere, params={"labelSelector": self.selector}).json()["items"]
            assert [i["metadata"]["name"] for i in items] == [self.name]
        assert api.delete(self.collection, params={"labelSelector": self.selector}).status_code == 200
        assert api.get(self.path).status_code == 404

        # The informers' view: one ordered stream of this object's events, in the namespace and across.
        recreations = len(case.spec_patches) + len(case.status_patches)
        expected = rf"^ADDED,(MODIFIED,)+(DELETED,ADDED,(MODIFIED,)+){{{recreations}}}DELETED,$"
        paths = [self.everywhere] + ([self.collection] if case.namespaced else [])
        for path in paths:
            events = watch_lines(api, path, {"labelSelector": self.selector, "resourceVersion": start, "timeoutSeconds": "2"}, limit=1000)
            types = "".join(f"{e['type']}," for e in events)
            assert re.match(expected, types), f"{path}: {types}"
            versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
            assert versions == sorted(versions)
            assert {e["object"]["metadata"]["name"] for e in events} == {self.name}


@pytest.mark.parametrize("case", CASES, ids=[c.kind for c in CASES])
def test_conformance_crud_sequence(api: httpx.Client, ns: str, case: Case) -> None:
    Walk(api, ns, case).run()
