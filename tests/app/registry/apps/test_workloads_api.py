"""The workload kinds (apps/v1 Deployment, ReplicaSet, StatefulSet, DaemonSet, ControllerRevision;
batch/v1 Job) over HTTP on both backends: what a create stores (upstream's defaults and status),
their columns and field selectors, /status, the autoscaling/v1 Scale at /scale (what `kubectl
scale` and autoscalers use), validation answers with field paths, and that a refused write
changes nothing."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from devtools.server import ServerProcess
from tests.helpers import assert_status

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
MERGE = {"Content-Type": "application/merge-patch+json"}
APPS = "/apis/apps/v1"
BATCH = "/apis/batch/v1"
TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}
SELECTOR = {"matchLabels": {"app": "web"}}
JOB_TEMPLATE = {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}


@dataclass(frozen=True)
class Kind:
    base: str
    plural: str
    spec: dict[str, Any]
    # kubectl get -o wide's columns, as upstream's printers name them
    columns: tuple[str, ...]
    # the status a fresh object has (None: the kind has none)
    status: dict[str, Any] | None
    scale: bool = False

    def __str__(self) -> str:
        return self.plural

    def path(self, ns: str, name: str = "") -> str:
        return f"{self.base}/namespaces/{ns}/{self.plural}" + (f"/{name}" if name else "")

    def body(self, name: str) -> dict[str, Any]:
        if self.plural == "controllerrevisions":
            return {"metadata": {"name": name}, **copy.deepcopy(self.spec)}
        return {"metadata": {"name": name}, "spec": copy.deepcopy(self.spec)}


WORKLOAD = {"selector": SELECTOR, "template": TEMPLATE}
KINDS = [
    Kind(APPS, "deployments", WORKLOAD, ("Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"), {}, scale=True),
    Kind(APPS, "replicasets", {"replicas": 0, **WORKLOAD}, ("Name", "Desired", "Current", "Ready", "Age", "Containers", "Images", "Selector"), {"replicas": 0}, scale=True),
    Kind(APPS, "statefulsets", {"replicas": 0, **WORKLOAD}, ("Name", "Ready", "Age", "Containers", "Images"), {"replicas": 0, "availableReplicas": 0}, scale=True),
    Kind(APPS, "daemonsets", WORKLOAD,
         ("Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age", "Containers", "Images", "Selector"),
         {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0}),
    Kind(APPS, "controllerrevisions", {"data": {"spec": {"template": TEMPLATE}}, "revision": 1}, ("Name", "Controller", "Revision", "Age"), None),
    Kind(BATCH, "jobs", {"suspend": True, "template": JOB_TEMPLATE}, ("Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector"), {}),
]  # fmt: skip
SCALED = [k for k in KINDS if k.scale]


def _name() -> str:
    return f"w-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_create_stores_defaults_and_status_and_prints_columns(api: httpx.Client, ns: str, kind: Kind) -> None:
    name = _name()
    created = api.post(kind.path(ns), json=kind.body(name))
    assert created.status_code == 201, created.text
    obj = created.json()
    assert obj.get("status") == kind.status
    assert (obj["metadata"].get("generation") == 1) == (kind.plural != "controllerrevisions")
    table = api.get(kind.path(ns, name), headers={"Accept": TABLE}, params={"includeObject": "None"}).json()
    assert tuple(c["name"] for c in table["columnDefinitions"]) == kind.columns
    assert all(c["description"] for c in table["columnDefinitions"])
    assert table["rows"][0]["cells"][0] == name
    listed = api.get(kind.path(ns), params={"fieldSelector": f"metadata.name={name}"}).json()
    assert [i["metadata"]["name"] for i in listed["items"]] == [name]
    assert api.delete(kind.path(ns, name), params={"propagationPolicy": "Background"}).status_code == 200
    assert_status(api.get(kind.path(ns, name)), 404, "NotFound")


def test_defaults_of_a_deployment(api: httpx.Client, ns: str) -> None:
    spec = api.post(KINDS[0].path(ns), json=KINDS[0].body("web")).json()["spec"]
    assert spec["replicas"] == 1 and spec["revisionHistoryLimit"] == 10 and spec["progressDeadlineSeconds"] == 600
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert spec["template"]["spec"]["restartPolicy"] == "Always" and spec["template"]["spec"]["terminationGracePeriodSeconds"] == 30
    row = api.get(KINDS[0].path(ns, "web"), headers={"Accept": TABLE}).json()["rows"][0]["cells"]
    assert row[1:4] == ["0/1", 0, 0]


def test_a_job_gets_its_selector_and_orphans_its_pods_by_default(api: httpx.Client, ns: str) -> None:
    jobs = KINDS[-1]
    job = api.post(jobs.path(ns), json=jobs.body("pi")).json()
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert labels["batch.kubernetes.io/job-name"] == "pi" and labels["controller-uid"] == uid
    assert api.get(jobs.path(ns, "pi"), headers={"Accept": TABLE}).json()["rows"][0]["cells"][1:4] == ["Running", "0/1", ""]
    # batch/v1 Jobs orphan their pods unless told otherwise (upstream's DefaultGarbageCollectionPolicy).
    deleting = api.delete(jobs.path(ns, "pi")).json()
    assert deleting["metadata"]["finalizers"] == ["orphan"] and deleting["metadata"]["deletionTimestamp"]
    # Another kind deletes at once without a policy.
    api.post(KINDS[1].path(ns), json=KINDS[1].body("rs"))
    assert api.delete(KINDS[1].path(ns, "rs")).json()["metadata"].get("finalizers") is None


@pytest.mark.parametrize("kind", SCALED, ids=str)
def test_scale_subresource(api: httpx.Client, ns: str, kind: Kind) -> None:
    name = _name()
    obj = api.post(kind.path(ns), json=kind.body(name)).json()
    scale_path = kind.path(ns, name) + "/scale"
    scale = api.get(scale_path).json()
    replicas = obj["spec"]["replicas"]
    assert scale == {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {k: obj["metadata"][k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")},
        "spec": {"replicas": replicas} if replicas else {},
        "status": {"replicas": 0, "selector": "app=web"},
    }
    # kubectl scale's merge patch
    patched = api.patch(scale_path, json={"spec": {"replicas": 3}}, headers=MERGE)
    assert patched.status_code == 200, patched.text
    assert patched.json()["spec"] == {"replicas": 3}
    stored = api.get(kind.path(ns, name)).json()
    assert stored["spec"]["replicas"] == 3 and stored["metadata"]["generation"] == 2
    assert stored["metadata"]["resourceVersion"] == patched.json()["metadata"]["resourceVersion"]
    assert {"manager": "python-httpx", "subresource": "scale"}.items() <= stored["metadata"]["managedFields"][-1].items()
    # a PUT with kubectl scale --resource-version's precondition
    stale = {**scale, "spec": {"replicas": 1}}
    assert_status(api.put(scale_path, json=stale), 409, "Conflict")
    fresh = {**patched.json(), "spec": {"replicas": 2}}
    assert api.put(scale_path, json=fresh).json()["spec"] == {"replicas": 2}
    assert api.patch(scale_path, json=[{"op": "replace", "path": "/spec/replicas", "value": 4}], headers={"Content-Type": "application/json-patch+json"}).json()["spec"] == {"replicas": 4}
    assert api.patch(scale_path, json={"spec": {"replicas": 0}}, headers={"Content-Type": "application/strategic-merge-patch+json"}).json()["spec"] == {}
    # ValidateScale: replicas below zero, as a Scale.autoscaling error; the object stays as it was
    before = api.get(kind.path(ns, name)).json()
    invalid = assert_status(api.patch(scale_path, json={"spec": {"replicas": -1}}, headers=MERGE), 422, "Invalid")
    assert invalid["message"] == f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0'
    assert invalid["details"]["group"] == "autoscaling" and invalid["details"]["kind"] == "Scale"
    assert api.get(kind.path(ns, name)).json() == before
    wrong_name = {**api.get(scale_path).json(), "metadata": {"name": "other"}}
    assert_status(api.put(scale_path, json=wrong_name), 400, "BadRequest")
    assert_status(api.get(kind.path(ns, "missing") + "/scale"), 404, "NotFound")
    assert_status(api.patch(scale_path, content=b"spec:\n  replicas: 1\n", headers={"Content-Type": "application/apply-patch+yaml"}), 415, "UnsupportedMediaType")


def test_only_replicated_kinds_have_scale(api: httpx.Client, ns: str) -> None:
    resources = {r["name"]: r for r in api.get(APPS).json()["resources"]}
    for plural in ("deployments", "replicasets", "statefulsets"):
        scale = resources[f"{plural}/scale"]
        assert (scale["group"], scale["version"], scale["kind"], sorted(scale["verbs"])) == ("autoscaling", "v1", "Scale", ["get", "patch", "update"])
    assert "daemonsets/scale" not in resources and "daemonsets/status" in resources
    assert {r["name"] for r in api.get(BATCH).json()["resources"]} == {"jobs", "jobs/status"}
    api.post(KINDS[3].path(ns), json=KINDS[3].body("ds"))
    assert_status(api.get(KINDS[3].path(ns, "ds") + "/scale"), 404, "NotFound")


def test_status_subresource_and_main_resource_keep_each_others_fields(api: httpx.Client, ns: str) -> None:
    replicasets = KINDS[1]
    obj = api.post(replicasets.path(ns), json=replicasets.body("rs")).json()
    status = {"replicas": 2, "readyReplicas": 2, "availableReplicas": 1, "observedGeneration": 1}
    written = api.put(replicasets.path(ns, "rs") + "/status", json={**obj, "status": status, "spec": {**obj["spec"], "replicas": 9}})
    assert written.status_code == 200, written.text
    assert written.json()["status"] == status and written.json()["spec"]["replicas"] == 0
    updated = api.patch(replicasets.path(ns, "rs"), json={"spec": {"replicas": 5}, "status": {"replicas": 7}}, headers=MERGE).json()
    assert updated["status"] == status and updated["spec"]["replicas"] == 5
    # Zero counters are left out (omitempty), replicas is always there, as upstream serialises them.
    zeroed = api.patch(replicasets.path(ns, "rs") + "/status", json={"status": {"replicas": None, "readyReplicas": 0, "availableReplicas": 0}}, headers=MERGE).json()
    assert zeroed["status"] == {"replicas": 0, "observedGeneration": 1}
    bad = assert_status(api.patch(replicasets.path(ns, "rs") + "/status", json={"status": {"availableReplicas": 3}}, headers=MERGE), 422, "Invalid")
    assert sorted(c["field"] for c in bad["details"]["causes"]) == ["status.availableReplicas", "status.availableReplicas"]


def test_refused_writes_change_nothing(api: httpx.Client, ns: str) -> None:
    deployments = KINDS[0]
    stored = api.post(deployments.path(ns), json=deployments.body("web")).json()
    refusals = [
        ({"spec": {"selector": {"matchLabels": {"app": "other"}}}}, "spec.selector"),
        ({"spec": {"strategy": {"type": "Recreate"}}}, "spec.strategy.rollingUpdate"),
        ({"spec": {"template": {"spec": {"restartPolicy": "Never"}}}}, "spec.template.spec.restartPolicy"),
        ({"spec": {"replicas": -2, "minReadySeconds": 30, "progressDeadlineSeconds": 20}}, "spec.replicas"),
    ]
    for patch, field in refusals:
        body = assert_status(api.patch(deployments.path(ns, "web"), json=patch, headers=MERGE), 422, "Invalid")
        assert field in [c["field"] for c in body["details"]["causes"]], body
        assert body["details"]["kind"] == "Deployment" and body["details"]["group"] == "apps"
    assert api.get(deployments.path(ns, "web")).json() == stored
    # An annotation moves the generation (the controller copies annotations to the ReplicaSets).
    annotated = api.patch(deployments.path(ns, "web"), json={"metadata": {"annotations": {"note": "x"}}}, headers=MERGE).json()
    assert annotated["metadata"]["generation"] == 2


def test_invalid_creates_name_their_fields(api: httpx.Client, ns: str) -> None:
    cases: list[tuple[Kind, dict[str, Any], list[str]]] = [
        (KINDS[1], {"replicas": -1, "selector": {}, "template": TEMPLATE},
         ['spec.replicas: Invalid value: -1: must be greater than or equal to 0', "spec.selector: Invalid value: {}: empty selector is invalid for deployment"]),
        (KINDS[2], {"selector": SELECTOR, "template": TEMPLATE, "podManagementPolicy": "Random"},
         ["spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'"]),
        (KINDS[3], {"selector": SELECTOR, "template": TEMPLATE, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}}},
         ["spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when maxUnavailable is non-zero"]),
        (KINDS[5], {"template": {"spec": {"containers": [{"name": "main", "image": "pause"}]}}},
         ['spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"']),
        (KINDS[4], {"revision": 1}, ["data: Required value: data is mandatory"]),
    ]  # fmt: skip
    for kind, spec, messages in cases:
        body = {"metadata": {"name": "bad"}, **spec} if kind.plural == "controllerrevisions" else {"metadata": {"name": "bad"}, "spec": spec}
        answer = assert_status(api.post(kind.path(ns), json=body), 422, "Invalid")
        assert [f"{c['field']}: {c['message']}" for c in answer["details"]["causes"]] == messages
        assert_status(api.get(kind.path(ns, "bad")), 404, "NotFound")


def test_privileged_pods_and_templates_need_allow_privileged(api: httpx.Client, ns: str, start_server: Callable[..., ServerProcess]) -> None:
    """kube-apiserver refuses privileged containers unless started with --allow-privileged=true
    (what clusters for DRA drivers do: their kubelet plugins run privileged)."""
    privileged = {"name": "main", "image": "registry.k8s.io/pause:3.10", "securityContext": {"privileged": True}}
    pod = {"metadata": {"name": "plugin"}, "spec": {"containers": [privileged]}}
    replica_set = {"metadata": {"name": "plugin"}, "spec": {"selector": SELECTOR, "template": {**TEMPLATE, "spec": {"containers": [privileged]}}}}
    answer = assert_status(api.post(f"/api/v1/namespaces/{ns}/pods", json=pod), 422, "Invalid")
    assert answer["message"] == 'Pod "plugin" is invalid: spec.containers[0].securityContext.privileged: Forbidden: disallowed by cluster policy'
    answer = assert_status(api.post(f"{APPS}/namespaces/{ns}/replicasets", json=replica_set), 422, "Invalid")
    assert answer["details"]["causes"] == [
        {"reason": "FieldValueForbidden", "message": "Forbidden: disallowed by cluster policy", "field": "spec.template.spec.containers[0].securityContext.privileged"}
    ]
    allowing = start_server("--allow-privileged=true")
    with httpx.Client(base_url=allowing.url, timeout=30.0) as client:
        assert client.post("/api/v1/namespaces", json={"metadata": {"name": ns}}).status_code == 201
        assert client.post(f"/api/v1/namespaces/{ns}/pods", json=pod).status_code == 201
        assert client.post(f"{APPS}/namespaces/{ns}/replicasets", json=replica_set).status_code == 201


def test_field_selectors(api: httpx.Client, ns: str) -> None:
    replicasets, jobs = KINDS[1], KINDS[-1]
    for name, replicas in (("none", 0), ("two", 2)):
        api.post(replicasets.path(ns), json=replicasets.body(name))
        api.patch(replicasets.path(ns, name) + "/status", json={"status": {"replicas": replicas}}, headers=MERGE)
    found = api.get(replicasets.path(ns), params={"fieldSelector": "status.replicas=2"}).json()["items"]
    assert [i["metadata"]["name"] for i in found] == ["two"]
    api.post(jobs.path(ns), json=jobs.body("j"))
    assert [i["metadata"]["name"] for i in api.get(jobs.path(ns), params={"fieldSelector": "status.successful=0"}).json()["items"]] == ["j"]
    refused = assert_status(api.get(KINDS[0].path(ns), params={"fieldSelector": "status.replicas=1"}), 400, "BadRequest")
    assert refused["message"] == '"status.replicas" is not a known field selector: only "metadata.name", "metadata.namespace"'
