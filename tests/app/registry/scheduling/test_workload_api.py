"""The Workload API (scheduling.k8s.io/v1beta1 Workload and PodGroup, pod.spec.schedulingGroup) over
HTTP: served only with GenericWorkload, stored and watched like every kind, validated as v1.37 does,
and the PodGroup resource claims only with DRAWorkloadResourceClaims."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from devtools.server import ServerProcess
from kube.features import Gate, gates_flag
from kube.objects import Obj
from tests.contract import check_response_body
from tests.helpers import assert_status, new_namespace, pod, watch_lines

SCHEDULING = "/apis/scheduling.k8s.io/v1beta1"
BOTH_GATES = gates_flag({Gate.GenericWorkload: True, Gate.DRAWorkloadResourceClaims: True})
# Like every beta API since v1.24, the version is off until --runtime-config enables it, besides the gate.
RUNTIME_CONFIG = ("--runtime-config", "scheduling.k8s.io/v1beta1=true")


def _client(server: ServerProcess) -> httpx.Client:
    def hook(response: httpx.Response) -> None:
        if response.request.url.params.get("watch") not in ("true", "1"):
            response.read()
            check_response_body(response.content, response.headers.get("content-type", ""), response.request.url.path)

    return httpx.Client(base_url=server.url, timeout=30.0, event_hooks={"response": [hook]})


@pytest.fixture(scope="module")
def gated(start_server: Callable[..., ServerProcess]) -> Iterator[httpx.Client]:
    """A server with both gates on."""
    with _client(start_server(*RUNTIME_CONFIG, "--feature-gates", BOTH_GATES)) as client:
        yield client


@pytest.fixture(scope="module")
def stored_under_the_gate(start_server: Callable[..., ServerProcess]) -> tuple[str, str]:
    """A database where a server with both gates stored a PodGroup with claims and their status
    (the server stopped since): its URL, and the PodGroup's namespace."""
    gate_on = start_server(*RUNTIME_CONFIG, "--feature-gates", BOTH_GATES)
    with _client(gate_on) as client:
        ns = new_namespace(client)
        response = client.post(podgroups(ns), json=pod_group("group", resourceClaims=CLAIMS))
        assert response.status_code == 201, response.text
        status = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "x"}]}
        response = client.patch(podgroups(ns, "group") + "/status", json={"status": status}, headers={"Content-Type": "application/merge-patch+json"})
        assert response.status_code == 200, response.text
    gate_on.stop()
    return gate_on.database_url, ns


@pytest.fixture(scope="module")
def workload_only(start_server: Callable[..., ServerProcess], stored_under_the_gate: tuple[str, str]) -> Iterator[httpx.Client]:
    """A server with GenericWorkload but without DRAWorkloadResourceClaims, on the database of ``stored_under_the_gate``."""
    database_url, _ = stored_under_the_gate
    with _client(start_server(*RUNTIME_CONFIG, "--feature-gates", gates_flag({Gate.GenericWorkload: True}), database_url=database_url, migrate_first=False)) as client:
        yield client


def workloads(ns: str, name: str = "") -> str:
    return f"{SCHEDULING}/namespaces/{ns}/workloads" + (f"/{name}" if name else "")


def podgroups(ns: str, name: str = "") -> str:
    return f"{SCHEDULING}/namespaces/{ns}/podgroups" + (f"/{name}" if name else "")


def workload(name: str, **template: Any) -> Obj:
    entry = {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}, **template}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": name}, "spec": {"podGroupTemplates": [entry]}}


def pod_group(name: str, **spec: Any) -> Obj:
    body: Obj = {"schedulingPolicy": {"basic": {}}, **spec}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name}, "spec": body}


def causes(response: httpx.Response) -> set[tuple[str, str, str]]:
    status = assert_status(response, 422, "Invalid")
    return {(c["field"], c["reason"], c["message"]) for c in status["details"]["causes"]}


CLAIMS = [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]


# ---- served only with the gate ----------------------------------------------------------------------


def test_not_served_without_generic_workload(api: httpx.Client, ns: str) -> None:
    assert api.get("/apis/scheduling.k8s.io/v1beta1").status_code == 404
    assert api.get(workloads(ns)).status_code == 404
    groups = {g["name"]: g for g in api.get("/apis").json()["groups"]}
    assert "scheduling.k8s.io/v1beta1" not in [v["groupVersion"] for v in groups.get("scheduling.k8s.io", {}).get("versions", [])]
    assert api.get("/openapi/v3/apis/scheduling.k8s.io/v1beta1").status_code == 404
    # Without the gate, the pod's schedulingGroup is dropped (it is not in use on a new pod).
    body = pod("grouped", schedulingGroup={"podGroupName": "group"})
    response = api.post(f"/api/v1/namespaces/{ns}/pods", json=body)
    assert response.status_code == 201, response.text
    assert "schedulingGroup" not in response.json()["spec"]


@pytest.mark.parametrize(
    "flags",
    [("--feature-gates", BOTH_GATES), RUNTIME_CONFIG],
    ids=["gates-without-runtime-config", "runtime-config-without-gate"],
)
def test_served_only_with_the_version_and_the_gate(start_server: Callable[..., ServerProcess], flags: tuple[str, ...]) -> None:
    with _client(start_server(*flags)) as client:
        assert client.get(SCHEDULING).status_code == 404
        assert client.get(f"{SCHEDULING}/namespaces/default/podgroups").status_code == 404


def test_discovery_openapi_and_printing(gated: httpx.Client) -> None:
    resources = {r["name"]: r for r in gated.get(SCHEDULING).json()["resources"]}
    assert set(resources) == {"workloads", "podgroups", "podgroups/status"}
    assert resources["podgroups"]["namespaced"] and resources["podgroups"]["kind"] == "PodGroup"
    assert resources["workloads"]["verbs"] == ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    document = gated.get("/openapi/v3/apis/scheduling.k8s.io/v1beta1").json()
    assert "io.k8s.api.scheduling.v1beta1.PodGroup" in document["components"]["schemas"]
    assert f"{SCHEDULING}/namespaces/{{namespace}}/podgroups/{{name}}/status" in document["paths"]
    ns = new_namespace(gated)
    assert gated.post(workloads(ns), json=workload("train")).status_code == 201
    table = gated.get(workloads(ns), headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Age"]
    assert table["rows"][0]["cells"][0] == "train"


# ---- stored and watched like every kind -----------------------------------------------------------------


def test_pod_group_lifecycle_watch_and_protection_finalizer(gated: httpx.Client) -> None:
    ns = new_namespace(gated)
    created = gated.post(podgroups(ns), json=pod_group("group", resourceClaims=CLAIMS))
    assert created.status_code == 201, created.text
    body = created.json()
    # Defaulted disruption mode and the finalizer that keeps the group while pods name it.
    assert body["spec"]["disruptionMode"] == {"single": {}}
    assert body["metadata"]["finalizers"] == ["scheduling.k8s.io/podgroup-protection"]
    assert body["spec"]["resourceClaims"] == CLAIMS
    rv = body["metadata"]["resourceVersion"]
    status = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "group-gpu-abcde"}]}
    response = gated.patch(podgroups(ns, "group") + "/status", json={"status": status}, headers={"Content-Type": "application/merge-patch+json"})
    assert response.status_code == 200, response.text
    events = watch_lines(gated, podgroups(ns), {"resourceVersion": rv}, 1)
    assert events[0]["type"] == "MODIFIED"
    assert events[0]["object"]["status"] == status
    # Deleting waits for the finalizer; removing it lets the group go.
    deleted = gated.delete(podgroups(ns, "group"))
    assert deleted.status_code == 200 and deleted.json()["metadata"].get("deletionTimestamp")
    patch = [{"op": "remove", "path": "/metadata/finalizers"}]
    response = gated.patch(podgroups(ns, "group"), json=patch, headers={"Content-Type": "application/json-patch+json"})
    assert response.status_code == 200, response.text
    assert gated.get(podgroups(ns, "group")).status_code == 404


def test_gang_min_count_may_change_but_not_the_policy_or_claims(gated: httpx.Client) -> None:
    ns = new_namespace(gated)
    body = pod_group("gang", schedulingPolicy={"gang": {"minCount": 2}}, resourceClaims=CLAIMS)
    stored = gated.post(podgroups(ns), json=body).json()
    stored["spec"]["schedulingPolicy"]["gang"]["minCount"] = 3
    response = gated.put(podgroups(ns, "gang"), json=stored)
    assert response.status_code == 200, response.text
    changed = copy.deepcopy(response.json())
    changed["spec"]["schedulingPolicy"] = {"basic": {}}
    changed["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "other"}]
    assert causes(gated.put(podgroups(ns, "gang"), json=changed)) == {
        ("spec.schedulingPolicy.basic", "FieldValueInvalid", 'Invalid value: {}: field is immutable'),
        ("spec.schedulingPolicy.gang", "FieldValueForbidden", "Forbidden: field cannot be unset once created"),
        ("spec.resourceClaims", "FieldValueInvalid", 'Invalid value: [{"name":"gpu","resourceClaimName":"other"}]: field is immutable'),
    }


# ---- validation ----------------------------------------------------------------------------------------------


def test_workload_validation(gated: httpx.Client) -> None:
    ns = new_namespace(gated)
    bad = workload(
        "bad",
        schedulingPolicy={"gang": {"minCount": -1}},
        resourceClaims=[{"name": "gpu"}, {"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}],
    )
    bad["spec"]["podGroupTemplates"].append({"name": "Bad_Name", "schedulingPolicy": {}, "priority": 5})
    assert causes(gated.post(workloads(ns), json=bad)) == {
        ("spec.podGroupTemplates[0].schedulingPolicy.gang.minCount", "FieldValueInvalid", "Invalid value: -1: must be greater than or equal to 1"),
        ("spec.podGroupTemplates[0].resourceClaims[0]", "FieldValueInvalid", 'Invalid value: "": must specify one of: `resourceClaimName`, `resourceClaimTemplateName`'),
        (
            "spec.podGroupTemplates[0].resourceClaims[1]",
            "FieldValueInvalid",
            'Invalid value: "{`resourceClaimName`, `resourceClaimTemplateName`}": exactly one of `resourceClaimName`, `resourceClaimTemplateName` is required, but multiple fields are set',
        ),
        ("spec.podGroupTemplates[0].resourceClaims[1]", "FieldValueDuplicate", 'Duplicate value: {"name":"gpu","resourceClaimName":"a","resourceClaimTemplateName":"b"}'),
        ("spec.podGroupTemplates[1].name", "FieldValueInvalid", next(iter(_label_message("Bad_Name")))),
        ("spec.podGroupTemplates[1].schedulingPolicy", "FieldValueInvalid", 'Invalid value: "": must specify one of: `basic`, `gang`'),
        ("spec", "FieldValueInvalid", "Invalid value: null: detected multiple priority configurations"),
    }
    empty = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload", "metadata": {"name": "empty"}, "spec": {}}
    assert causes(gated.post(workloads(ns), json=empty)) == {
        ("spec", "FieldValueInvalid", 'Invalid value: "": must specify one of: `podGroupTemplates`, `compositePodGroupTemplates`')
    }
    # Templates can be neither added nor removed.
    stored = gated.post(workloads(ns), json=workload("fixed")).json()
    stored["spec"]["podGroupTemplates"].append({"name": "more", "schedulingPolicy": {"basic": {}}})
    assert causes(gated.put(workloads(ns, "fixed"), json=stored)) == {
        ("spec.podGroupTemplates[1]", "FieldValueForbidden", "Forbidden: adding items is not allowed")
    }


def _label_message(value: str) -> set[str]:
    from app.registry.objectmeta import dns1123_label_problems

    return {f'Invalid value: "{value}": {p}' for p in dns1123_label_problems(value)}


def test_pod_group_validation(gated: httpx.Client) -> None:
    ns = new_namespace(gated)
    bad = pod_group(
        "bad",
        schedulingPolicy={"gang": {"minCount": 0}, "basic": {}},
        workloadRef={"workloadName": "train"},
        resourceClaims=[{"name": str(i), "resourceClaimName": f"c{i}"} for i in range(5)],
        parentCompositePodGroupName="parent",
    )
    assert causes(gated.post(podgroups(ns), json=bad)) == {
        ("spec.schedulingPolicy", "FieldValueInvalid", 'Invalid value: "{`basic`, `gang`}": exactly one of `basic`, `gang` is required, but multiple fields are set'),
        ("spec.workloadRef.templateName", "FieldValueRequired", "Required value"),
        ("spec.resourceClaims", "FieldValueTooMany", "Too many: 5: must have at most 4 items"),
        ("spec.parentCompositePodGroupName", "FieldValueForbidden", "Forbidden: disabled by feature gate CompositePodGroup"),
    }
    gang = pod_group("gang", schedulingPolicy={"gang": {}})
    assert causes(gated.post(podgroups(ns), json=gang)) == {("spec.schedulingPolicy.gang.minCount", "FieldValueRequired", "Required value")}
    # A status entry must name one of the spec's claims.
    assert gated.post(podgroups(ns), json=pod_group("ok", resourceClaims=CLAIMS)).status_code == 201
    status = {"resourceClaimStatuses": [{"name": "other", "resourceClaimName": "x"}]}
    response = gated.patch(podgroups(ns, "ok") + "/status", json={"status": status}, headers={"Content-Type": "application/merge-patch+json"})
    assert causes(response) == {
        ("status.resourceClaimStatuses[0].name", "FieldValueInvalid", 'Invalid value: "other": must match the name of an entry in `spec.resourceClaims`')
    }


def test_pod_scheduling_group(gated: httpx.Client) -> None:
    ns = new_namespace(gated)
    # The group need not exist; the name is kept as given and cannot change.
    response = gated.post(f"/api/v1/namespaces/{ns}/pods", json=pod("member", schedulingGroup={"podGroupName": "not-yet"}))
    assert response.status_code == 201, response.text
    stored = response.json()
    assert stored["spec"]["schedulingGroup"] == {"podGroupName": "not-yet"}
    stored["spec"]["schedulingGroup"] = {"podGroupName": "other"}
    status = assert_status(gated.put(f"/api/v1/namespaces/{ns}/pods/member", json=stored), 422, "Invalid")
    assert status["details"]["causes"][0]["field"] == "spec"
    assert "pod updates may not change fields other than" in status["details"]["causes"][0]["message"]
    bad = pod("bad", schedulingGroup={"podGroupName": "Not_A_Name"})
    assert {f for f, _, _ in causes(gated.post(f"/api/v1/namespaces/{ns}/pods", json=bad))} == {"spec.schedulingGroup.podGroupName"}
    empty = pod("empty", schedulingGroup={})
    assert causes(gated.post(f"/api/v1/namespaces/{ns}/pods", json=empty)) == {
        ("spec.schedulingGroup", "FieldValueInvalid", 'Invalid value: "": must specify one of: `podGroupName`')
    }


# ---- DRAWorkloadResourceClaims --------------------------------------------------------------------------


def test_resource_claims_need_their_gate_and_stay_once_stored(workload_only: httpx.Client, gated: httpx.Client) -> None:
    ns = new_namespace(workload_only)
    response = workload_only.post(podgroups(ns), json=pod_group("group", resourceClaims=CLAIMS))
    assert response.status_code == 201, response.text
    assert "resourceClaims" not in response.json()["spec"]
    response = workload_only.post(workloads(ns), json=workload("train", resourceClaims=CLAIMS))
    assert response.status_code == 201, response.text
    assert "resourceClaims" not in response.json()["spec"]["podGroupTemplates"][0]
    status = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "x"}]}
    response = workload_only.patch(podgroups(ns, "group") + "/status", json={"status": status}, headers={"Content-Type": "application/merge-patch+json"})
    assert response.status_code == 200 and "resourceClaimStatuses" not in (response.json().get("status") or {}), response.text


def test_resource_claims_stored_under_the_gate_stay_when_it_is_turned_off(workload_only: httpx.Client, stored_under_the_gate: tuple[str, str]) -> None:
    """The "stay once stored" half: the server restarted without DRAWorkloadResourceClaims on the
    same database keeps the claims of a PodGroup stored under the gate through its updates."""
    _, ns = stored_under_the_gate
    client = workload_only
    stored = client.get(podgroups(ns, "group")).json()
    stored["metadata"]["labels"] = {"round": "1"}
    response = client.put(podgroups(ns, "group"), json=stored)
    assert response.status_code == 200, response.text
    assert response.json()["spec"]["resourceClaims"] == CLAIMS
    status = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "y"}]}
    response = client.patch(podgroups(ns, "group") + "/status", json={"status": status}, headers={"Content-Type": "application/merge-patch+json"})
    assert response.status_code == 200, response.text
    assert response.json()["status"]["resourceClaimStatuses"] == status["resourceClaimStatuses"]
