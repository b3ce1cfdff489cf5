"""Create, read, update, delete and metadata rules, on both storage backends."""

from __future__ import annotations

import httpx

from tests.helpers import RESOURCE, assert_status, claim, claims_path, device_class, pod


def test_create_sets_server_metadata(api: httpx.Client, ns: str) -> None:
    response = api.post(claims_path(ns), json=claim("c1"))
    assert response.status_code == 201, response.text
    meta = response.json()["metadata"]
    assert meta["name"] == "c1"
    assert meta["namespace"] == ns
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert meta["resourceVersion"].isdigit()
    assert meta["generation"] == 1
    got = api.get(claims_path(ns, "c1")).json()
    assert got["metadata"]["uid"] == meta["uid"]
    assert "status" not in got or got["status"] == {}


def test_create_without_content_type_is_json(api: httpx.Client, ns: str) -> None:
    import orjson

    response = api.post(claims_path(ns), content=orjson.dumps(claim("plain")), headers={"content-type": ""})
    assert response.status_code == 201, response.text


def test_not_found_and_already_exists(api: httpx.Client, ns: str) -> None:
    body = assert_status(api.get(claims_path(ns, "nope")), 404, "NotFound")
    assert body["message"] == 'resourceclaims.resource.k8s.io "nope" not found'
    assert body["details"] == {"name": "nope", "group": "resource.k8s.io", "kind": "resourceclaims"}
    assert api.post(claims_path(ns), json=claim("dup")).status_code == 201
    body = assert_status(api.post(claims_path(ns), json=claim("dup")), 409, "AlreadyExists")
    assert body["message"] == 'resourceclaims.resource.k8s.io "dup" already exists'


def test_generate_name(api: httpx.Client, ns: str) -> None:
    names = set()
    for _ in range(5):
        response = api.post(claims_path(ns), json=claim(generate_name="gen-"))
        assert response.status_code == 201, response.text
        names.add(response.json()["metadata"]["name"])
    assert len(names) == 5
    assert all(n.startswith("gen-") and len(n) == len("gen-") + 5 for n in names)


def test_name_required_and_format(api: httpx.Client, ns: str) -> None:
    body = assert_status(api.post(claims_path(ns), json=claim()), 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    body = assert_status(api.post(claims_path(ns), json=claim("Bad_Name")), 422, "Invalid")
    assert body["message"].startswith('ResourceClaim.resource.k8s.io "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"')


def test_namespace_must_exist(api: httpx.Client) -> None:
    body = assert_status(api.post(claims_path("does-not-exist"), json=claim("x")), 404, "NotFound")
    assert body["message"] == 'namespaces "does-not-exist" not found'


def test_update_optimistic_concurrency(api: httpx.Client, ns: str) -> None:
    created = api.post(claims_path(ns), json=claim("occ", labels={"a": "1"})).json()
    first = dict(created)
    first["metadata"] = {**created["metadata"], "labels": {"a": "2"}}
    updated = api.put(claims_path(ns, "occ"), json=first)
    assert updated.status_code == 200, updated.text
    assert int(updated.json()["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    stale = dict(created)
    stale["metadata"] = {**created["metadata"], "labels": {"a": "3"}}
    body = assert_status(api.put(claims_path(ns, "occ"), json=stale), 409, "Conflict")
    assert "the object has been modified" in body["message"]
    assert api.get(claims_path(ns, "occ")).json()["metadata"]["labels"] == {"a": "2"}


def test_noop_update_keeps_resource_version(api: httpx.Client, ns: str) -> None:
    created = api.post(claims_path(ns), json=claim("same")).json()
    again = api.put(claims_path(ns, "same"), json=created)
    assert again.status_code == 200
    assert again.json()["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_generation_moves_on_spec_change_only(api: httpx.Client) -> None:
    path = f"{RESOURCE}/deviceclasses"
    created = api.post(path, json=device_class("gen-class")).json()
    assert created["metadata"]["generation"] == 1
    labelled = api.patch(f"{path}/gen-class", json={"metadata": {"labels": {"x": "y"}}}, headers={"content-type": "application/merge-patch+json"}).json()
    assert labelled["metadata"]["generation"] == 1
    changed = api.patch(
        f"{path}/gen-class",
        json={"spec": {"selectors": [{"cel": {"expression": "true"}}]}},
        headers={"content-type": "application/merge-patch+json"},
    ).json()
    assert changed["metadata"]["generation"] == 2
    api.delete(f"{path}/gen-class")


def test_status_subresource_separation(api: httpx.Client, ns: str) -> None:
    created = api.post(claims_path(ns), json={**claim("st"), "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}}).json()
    assert not created.get("status")
    allocation = {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}]}}
    status = api.put(claims_path(ns, "st") + "/status", json={**created, "status": {"allocation": allocation}, "spec": {"devices": {"requests": []}}})
    assert status.status_code == 200, status.text
    body = status.json()
    assert body["status"]["allocation"] == allocation
    assert body["spec"] == created["spec"], "a status write must not change spec"
    main = api.put(claims_path(ns, "st"), json={**body, "status": {}})
    assert main.status_code == 200
    assert main.json()["status"]["allocation"] == allocation, "a main write must not change status"
    assert api.get(claims_path(ns, "st") + "/status").json()["status"]["allocation"] == allocation


def test_delete_returns_object_and_finalizers_hold_it(api: httpx.Client, ns: str) -> None:
    api.post(claims_path(ns), json=claim("gone"))
    deleted = api.delete(claims_path(ns, "gone"))
    assert deleted.status_code == 200
    assert deleted.json()["metadata"]["name"] == "gone"
    assert api.get(claims_path(ns, "gone")).status_code == 404

    held = claim("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    api.post(claims_path(ns), json=held)
    marked = api.delete(claims_path(ns, "held")).json()
    assert marked["metadata"]["deletionTimestamp"]
    still = api.get(claims_path(ns, "held"))
    assert still.status_code == 200
    release = api.patch(claims_path(ns, "held"), json={"metadata": {"finalizers": None}}, headers={"content-type": "application/merge-patch+json"})
    assert release.status_code == 200, release.text
    assert api.get(claims_path(ns, "held")).status_code == 404


def test_delete_with_orphan_dependents_false_answers_202_while_pending(api: httpx.Client, ns: str) -> None:
    held = claim("cascade")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    api.post(claims_path(ns), json=held)
    pending = api.request("DELETE", claims_path(ns, "cascade"), json={"orphanDependents": False})
    assert pending.status_code == 202, pending.text
    assert pending.json()["metadata"]["deletionTimestamp"]
    # Without the deprecated option (or when the object goes at once) it stays 200, as upstream.
    assert api.delete(claims_path(ns, "cascade")).status_code == 200
    api.post(claims_path(ns), json=claim("at-once"))
    assert api.delete(claims_path(ns, "at-once"), params={"orphanDependents": "false"}).status_code == 200
    assert api.get(claims_path(ns, "at-once")).status_code == 404


def test_delete_options_are_checked(api: httpx.Client, ns: str) -> None:
    api.post(claims_path(ns), json=claim("opts"))
    body = assert_status(api.request("DELETE", claims_path(ns, "opts"), json={"orphanDependents": "yes"}), 400, "BadRequest")
    assert body["message"] == "json: cannot unmarshal string into Go struct field DeleteOptions.orphanDependents of type bool"
    body = assert_status(
        api.request("DELETE", claims_path(ns, "opts"), json={"orphanDependents": True, "propagationPolicy": "Foreground"}), 422, "Invalid"
    )
    assert body["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Foreground": orphanDependents and deletionPropagation cannot be both set'
    )
    assert body["details"]["causes"][0]["field"] == "propagationPolicy"
    # In the query anything but "0" or "false" means true (upstream's optional-boolean decoding),
    # so these set it too.
    for value in ("maybe", ""):
        both = api.delete(claims_path(ns, "opts"), params={"orphanDependents": value, "propagationPolicy": "Bogus"})
        body = assert_status(both, 422, "Invalid")
        assert [c["message"] for c in body["details"]["causes"]] == [
            'Invalid value: "Bogus": orphanDependents and deletionPropagation cannot be both set',
            'Unsupported value: "Bogus": supported values: "Foreground", "Background", "Orphan", "nil"',
        ]
    assert api.get(claims_path(ns, "opts")).status_code == 200  # nothing was deleted


def test_finalizers_cannot_be_added_while_deleting(api: httpx.Client, ns: str) -> None:
    held = claim("no-new")
    held["metadata"]["finalizers"] = ["example.com/a"]
    api.post(claims_path(ns), json=held)
    api.delete(claims_path(ns, "no-new"))
    response = api.patch(
        claims_path(ns, "no-new"),
        json={"metadata": {"finalizers": ["example.com/a", "example.com/b"]}},
        headers={"content-type": "application/merge-patch+json"},
    )
    assert_status(response, 422, "Invalid")


def test_delete_preconditions(api: httpx.Client, ns: str) -> None:
    created = api.post(claims_path(ns), json=claim("pre")).json()
    response = api.request("DELETE", claims_path(ns, "pre"), json={"preconditions": {"uid": "wrong"}})
    assert_status(response, 409, "Conflict")
    response = api.request("DELETE", claims_path(ns, "pre"), json={"preconditions": {"uid": created["metadata"]["uid"]}})
    assert response.status_code == 200


def test_graceful_pod_deletion(api: httpx.Client, ns: str) -> None:
    pods = f"/api/v1/namespaces/{ns}/pods"
    api.post(pods, json=pod("bound", node="node-1"))
    marked = api.delete(f"{pods}/bound")
    assert marked.status_code == 200
    meta = marked.json()["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 30
    assert api.get(f"{pods}/bound").status_code == 200
    final = api.delete(f"{pods}/bound", params={"gracePeriodSeconds": "0"})
    assert final.status_code == 200
    assert api.get(f"{pods}/bound").status_code == 404
    # A pod that never reached a node goes at once.
    api.post(pods, json=pod("unbound"))
    api.delete(f"{pods}/unbound")
    assert api.get(f"{pods}/unbound").status_code == 404


def test_delete_options_come_from_the_body_or_else_the_query(api: httpx.Client, ns: str) -> None:
    pods = f"/api/v1/namespaces/{ns}/pods"
    api.post(pods, json=pod("opts-bound", node="node-1"))
    # A body, even an empty one, is the options: the query's gracePeriodSeconds is not read.
    marked = api.request("DELETE", f"{pods}/opts-bound", params={"gracePeriodSeconds": "0"}, json={})
    assert marked.status_code == 200
    assert marked.json()["metadata"]["deletionGracePeriodSeconds"] == 30
    assert api.get(f"{pods}/opts-bound").status_code == 200
    # Without a body the query is read.
    assert api.delete(f"{pods}/opts-bound", params={"gracePeriodSeconds": "0"}).status_code == 200
    assert api.get(f"{pods}/opts-bound").status_code == 404
    api.post(claims_path(ns), json=claim("opts-list"))
    body = assert_status(api.request("DELETE", claims_path(ns, "opts-list"), json=["Background"]), 400, "BadRequest")
    assert body["message"] == "json: cannot unmarshal array into Go value of type v1.DeleteOptions"


def test_dry_run_stores_nothing(api: httpx.Client, ns: str) -> None:
    response = api.post(claims_path(ns), params={"dryRun": "All"}, json=claim("dry"))
    assert response.status_code == 201
    assert response.json()["metadata"]["name"] == "dry"
    assert api.get(claims_path(ns, "dry")).status_code == 404
    api.post(claims_path(ns), json=claim("wet"))
    assert api.delete(claims_path(ns, "wet"), params={"dryRun": "All"}).status_code == 200
    assert api.get(claims_path(ns, "wet")).status_code == 200
    patched = api.patch(claims_path(ns, "wet"), params={"dryRun": "All"}, json={"metadata": {"labels": {"x": "1"}}}, headers={"content-type": "application/merge-patch+json"})
    assert patched.json()["metadata"]["labels"] == {"x": "1"}
    assert "labels" not in api.get(claims_path(ns, "wet")).json()["metadata"]


def test_deletecollection_by_label(api: httpx.Client, ns: str) -> None:
    for i in range(3):
        api.post(claims_path(ns), json=claim(f"dc-{i}", labels={"group": "a" if i < 2 else "b"}))
    response = api.delete(claims_path(ns), params={"labelSelector": "group=a"})
    assert response.status_code == 200, response.text
    remaining = [i["metadata"]["name"] for i in api.get(claims_path(ns)).json()["items"]]
    assert remaining == ["dc-2"]


def test_binding(api: httpx.Client, ns: str) -> None:
    pods = f"/api/v1/namespaces/{ns}/pods"
    api.post(pods, json=pod("to-bind"))
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "to-bind"}, "target": {"apiVersion": "v1", "kind": "Node", "name": "node-7"}}
    response = api.post(f"{pods}/to-bind/binding", json=binding)
    assert response.status_code == 201, response.text
    assert response.json()["status"] == "Success"
    bound = api.get(f"{pods}/to-bind").json()
    assert bound["spec"]["nodeName"] == "node-7"
    assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in bound["status"]["conditions"])
    body = assert_status(api.post(f"{pods}/to-bind/binding", json=binding), 409, "Conflict")
    assert 'is already assigned to node "node-7"' in body["message"]
    api.post(pods, json=pod("gated", gates=["example.com/wait"]))
    gated = {**binding, "metadata": {"name": "gated"}}
    body = assert_status(api.post(f"{pods}/gated/binding", json=gated), 409, "Conflict")
    assert "non-empty .spec.schedulingGates" in body["message"]
    assert_status(api.post(f"{pods}/missing/binding", json={**binding, "metadata": {"name": "missing"}}), 404, "NotFound")


def test_namespace_deletion_removes_contents(api: httpx.Client, ns: str) -> None:
    api.post(claims_path(ns), json=claim("inside"))
    api.post(f"/api/v1/namespaces/{ns}/pods", json=pod("p"))
    response = api.delete(f"/api/v1/namespaces/{ns}")
    assert response.status_code == 200
    assert response.json()["status"]["phase"] == "Terminating"
    body = assert_status(api.post(claims_path(ns), json=claim("late")), 403, "Forbidden")
    assert "being terminated" in body["message"]
    import time

    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and api.get(f"/api/v1/namespaces/{ns}").status_code == 200:
        time.sleep(0.1)
    assert api.get(f"/api/v1/namespaces/{ns}").status_code == 404
    assert api.get(claims_path(ns, "inside")).status_code == 404


def test_system_namespaces_exist(api: httpx.Client) -> None:
    names = {n["metadata"]["name"] for n in api.get("/api/v1/namespaces").json()["items"]}
    assert {"default", "kube-system", "kube-node-lease"} <= names
    default = api.get("/api/v1/namespaces/default").json()
    assert default["status"]["phase"] == "Active"
    assert default["metadata"]["labels"]["kubernetes.io/metadata.name"] == "default"


def test_cluster_scoped_kinds(api: httpx.Client) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "crud-node", "labels": {"kubernetes.io/hostname": "crud-node"}}}
    assert api.post("/api/v1/nodes", json=node).status_code == 201
    slice_ = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "crud-node-gpu"},
        "spec": {"driver": "gpu.example.com", "nodeName": "crud-node", "pool": {"name": "crud-node", "generation": 1, "resourceSliceCount": 1}, "devices": [{"name": "gpu-0"}]},
    }
    assert api.post(f"{RESOURCE}/resourceslices", json=slice_).status_code == 201
    listed = api.get(f"{RESOURCE}/resourceslices", params={"fieldSelector": "spec.nodeName=crud-node"}).json()
    assert [s["metadata"]["name"] for s in listed["items"]] == ["crud-node-gpu"]
    assert api.delete(f"{RESOURCE}/resourceslices/crud-node-gpu").status_code == 200
    assert api.delete("/api/v1/nodes/crud-node").status_code == 200


def test_lease_and_event(api: httpx.Client, ns: str) -> None:
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "holder"}, "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}}
    response = api.put(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/holder", json=lease)
    assert response.status_code == 201, "PUT creates a Lease (AllowCreateOnUpdate)"
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns},
        "reason": "Scheduled",
        "message": "hello",
        "type": "Normal",
    }
    assert api.post(f"/api/v1/namespaces/{ns}/events", json=event).status_code == 201
    found = api.get(f"/api/v1/namespaces/{ns}/events", params={"fieldSelector": "involvedObject.name=p,involvedObject.kind=Pod"}).json()
    assert [e["reason"] for e in found["items"]] == ["Scheduled"]
