"""PodTemplate (core/v1): a stored pod template, defaulted, validated and dropped as a workload's
template is (upstream's podTemplateStrategy), with kubectl's columns."""

from __future__ import annotations

import httpx

from tests.helpers import assert_status

TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}


def template(name: str = "web", **spec: object) -> dict[str, object]:
    containers = [{"name": "main", "image": "nginx:1.27"}, {"name": "log", "image": "busybox"}]
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name},
            "template": {"metadata": {"labels": {"app": "web", "tier": "front"}}, "spec": {"containers": containers, **spec}}}  # fmt: skip


def test_a_template_is_stored_defaulted_and_its_generation_follows_the_template(api: httpx.Client, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/podtemplates"
    created = api.post(path, json=template())
    assert created.status_code == 201, created.text
    body = created.json()
    spec = body["template"]["spec"]
    assert (body["metadata"]["generation"], spec["restartPolicy"], spec["schedulerName"]) == (1, "Always", "default-scheduler")
    assert spec["containers"][0]["terminationMessagePolicy"] == "File"
    relabelled = api.patch(f"{path}/web", json={"metadata": {"labels": {"x": "y"}}}, headers={"Content-Type": "application/merge-patch+json"})
    assert relabelled.json()["metadata"]["generation"] == 1  # metadata alone leaves it
    changed = api.patch(f"{path}/web", json={"template": {"spec": {"restartPolicy": "Never"}}}, headers={"Content-Type": "application/merge-patch+json"})
    assert (changed.status_code, changed.json()["metadata"]["generation"]) == (200, 2), changed.text
    table = api.get(path, headers=TABLE).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Containers", "Images", "Pod Labels"]
    assert table["rows"][0]["cells"] == ["web", "main,log", "nginx:1.27,busybox", "app=web,tier=front"]


def test_an_invalid_template_is_refused_whole_with_its_field_paths(api: httpx.Client, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/podtemplates"
    bad = template(restartPolicy="Sometimes")
    bad["template"]["spec"]["containers"][1]["name"] = "Log_1"  # type: ignore[index]
    status = assert_status(api.post(path, json=bad), 422, "Invalid")
    fields = {c["field"] for c in status["details"]["causes"]}
    assert {"template.spec.restartPolicy", "template.spec.containers[1].name"} <= fields, status
    assert status["message"].startswith('PodTemplate "web" is invalid: ')
    assert api.get(f"{path}/web").status_code == 404
    assert api.post(path, json=template()).status_code == 201
    emptied = api.patch(f"{path}/web", json={"template": {"spec": {"containers": []}}}, headers={"Content-Type": "application/merge-patch+json"})
    assert "template.spec.containers: Required value" in assert_status(emptied, 422, "Invalid")["message"]
    assert len(api.get(f"{path}/web").json()["template"]["spec"]["containers"]) == 2  # nothing half-applied
