"""Discovery, OpenAPI, version, health, metrics, tables, and every patch flavour over HTTP."""

from __future__ import annotations

import httpx
import orjson

from kube.features import Gate
from tests.helpers import assert_status, claim, claims_path, pod

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"


def test_aggregated_discovery_content_type(api: httpx.Client) -> None:
    response = api.get("/apis", headers={"accept": f"{AGGREGATED},application/json"})
    assert response.headers["content-type"] == AGGREGATED
    groups = {g["metadata"]["name"]: g for g in response.json()["items"]}
    resources = {r["resource"]: r for r in groups["resource.k8s.io"]["versions"][0]["resources"]}
    assert set(resources) >= {"deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices", "devicetaintrules"}
    assert resources["resourceclaims"]["scope"] == "Namespaced"
    assert [s["subresource"] for s in resources["resourceclaims"]["subresources"]] == ["status"]
    core = api.get("/api", headers={"accept": AGGREGATED}).json()
    pods = next(r for r in core["items"][0]["versions"][0]["resources"] if r["resource"] == "pods")
    assert {s["subresource"] for s in pods["subresources"]} >= {"status", "binding"}
    legacy = api.get("/apis", headers={"accept": "application/json"}).json()
    assert legacy["kind"] == "APIGroupList"
    assert api.get("/apis/resource.k8s.io/v1").json()["kind"] == "APIResourceList"
    assert api.get("/api").json()["kind"] == "APIVersions"


def test_version_health_and_gates(api: httpx.Client) -> None:
    version = api.get("/version").json()
    assert version["major"] == "1" and version["minor"] == "37"
    for path in ("/healthz", "/livez", "/readyz"):
        assert api.get(path).text == "ok"
    gates = {g["name"]: g for g in api.get("/featuregates").json()["featureGates"]}
    assert gates[Gate.DynamicResourceAllocation]["enabled"] is True
    assert gates[Gate.DRAReservedForWorkloads]["enabled"] is False


def test_openapi_v3_advertises_field_validation(api: httpx.Client) -> None:
    index = api.get("/openapi/v3").json()
    url = index["paths"]["apis/resource.k8s.io/v1"]["serverRelativeURL"]
    assert "?hash=" in url
    document = api.get(url).json()
    patches = [
        op["patch"]
        for op in document["paths"].values()
        if "patch" in op and op["patch"].get("x-kubernetes-group-version-kind", {}).get("kind") == "ResourceClaim"
    ]
    assert any(any(p.get("name") == "fieldValidation" for p in op.get("parameters", [])) for op in patches) or any(
        any(p.get("name") == "fieldValidation" for p in path.get("parameters", []))
        for path in document["paths"].values()
        if "patch" in path and path["patch"].get("x-kubernetes-group-version-kind", {}).get("kind") == "ResourceClaim"
    )
    assert api.get("/openapi/v3/api/v1").status_code == 200
    assert api.get("/openapi/v3/apis/nothing.example.com/v1").status_code == 404


def test_metrics(api: httpx.Client, ns: str) -> None:
    api.get(claims_path(ns))
    text = api.get("/metrics").text
    assert 'apiserver_request_total{code="200",resource="resourceclaims",subresource="",verb="LIST"}' in text
    assert "apiserver_request_duration_seconds_bucket" in text
    assert "apiserver_storage_revision" in text
    assert "apiserver_registered_watchers" in text


def test_table_output(api: httpx.Client, ns: str) -> None:
    api.post(claims_path(ns), json=claim("tbl"))
    table = api.get(claims_path(ns), headers={"accept": TABLE}).json()
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "State", "Age"]
    row = table["rows"][0]
    assert row["cells"][:2] == ["tbl", "pending"]
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["namespace"] == ns
    single = api.get(claims_path(ns, "tbl"), headers={"accept": TABLE}).json()
    assert single["kind"] == "Table" and len(single["rows"]) == 1
    pods = f"/api/v1/namespaces/{ns}/pods"
    api.post(pods, json=pod("tp"))
    columns = [c["name"] for c in api.get(pods, headers={"accept": TABLE}).json()["columnDefinitions"]]
    assert columns[:5] == ["Name", "Ready", "Status", "Restarts", "Age"]


PARTIAL = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


def test_metadata_only_responses(api: httpx.Client, ns: str) -> None:
    created = api.post(claims_path(ns), json=claim("pom", labels={"a": "1"}), headers={"accept": PARTIAL})
    assert created.status_code == 201
    assert created.json() == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": api.get(claims_path(ns, "pom")).json()["metadata"]}
    single = api.get(claims_path(ns, "pom"), headers={"accept": f"{PARTIAL},application/json"}).json()
    assert single["kind"] == "PartialObjectMetadata" and single["metadata"]["labels"] == {"a": "1"}
    assert "spec" not in single
    listing = api.get(claims_path(ns), headers={"accept": f"{PARTIAL_LIST},application/json"}).json()
    assert listing["kind"] == "PartialObjectMetadataList" and listing["apiVersion"] == "meta.k8s.io/v1"
    assert listing["metadata"]["resourceVersion"].isdigit()
    assert [(i["kind"], i["metadata"]["name"]) for i in listing["items"]] == [("PartialObjectMetadata", "pom")]
    older = api.get(claims_path(ns), headers={"accept": PARTIAL_LIST.replace("v=v1", "v=v1beta1")}).json()
    assert older["apiVersion"] == "meta.k8s.io/v1beta1" and older["items"][0]["apiVersion"] == "meta.k8s.io/v1beta1"
    # An object conversion of a list, or a list conversion of an object: 406, as upstream.
    body = assert_status(api.get(claims_path(ns), headers={"accept": PARTIAL}), 406, "NotAcceptable")
    assert body["message"] == "you requested PartialObjectMetadata, but the requested object is a list (*resource.ResourceClaimList)"
    body = assert_status(api.get(f"/api/v1/namespaces/{ns}", headers={"accept": PARTIAL_LIST}), 406, "NotAcceptable")
    assert body["message"] == "you requested PartialObjectMetadataList, but the requested object is not a list (*core.Namespace)"
    assert_status(api.get(claims_path(ns, "absent"), headers={"accept": PARTIAL_LIST}), 404, "NotFound")  # the read comes first
    # A watch carries one object per event.
    rv = listing["metadata"]["resourceVersion"]
    api.patch(claims_path(ns, "pom"), json={"metadata": {"labels": {"a": "2"}}}, headers={"content-type": "application/merge-patch+json"})
    with api.stream("GET", claims_path(ns), params={"watch": "true", "resourceVersion": rv, "timeoutSeconds": "2"}, headers={"accept": PARTIAL}) as response:
        assert response.status_code == 200
        event = orjson.loads(next(line for line in response.iter_lines() if line))
    assert event["type"] == "MODIFIED"
    assert event["object"]["kind"] == "PartialObjectMetadata" and event["object"]["metadata"]["labels"] == {"a": "2"}
    assert "spec" not in event["object"]
    # deletecollection answers with the deleted objects, converted the same way.
    deleted = api.delete(claims_path(ns), headers={"accept": PARTIAL_LIST}).json()
    assert deleted["kind"] == "PartialObjectMetadataList" and [i["metadata"]["name"] for i in deleted["items"]] == ["pom"]


def test_json_patch(api: httpx.Client, ns: str) -> None:
    api.post(claims_path(ns), json=claim("jp", labels={"a": "1"}))
    ops = [{"op": "replace", "path": "/metadata/labels/a", "value": "2"}, {"op": "add", "path": "/metadata/labels/b", "value": "3"}]
    response = api.patch(claims_path(ns, "jp"), json=ops, headers={"content-type": "application/json-patch+json"})
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["labels"] == {"a": "2", "b": "3"}
    failing = [{"op": "test", "path": "/metadata/labels/a", "value": "nope"}]
    assert_status(api.patch(claims_path(ns, "jp"), json=failing, headers={"content-type": "application/json-patch+json"}), 422, "Invalid")


def test_strategic_merge_patch_merges_containers_by_name(api: httpx.Client, ns: str) -> None:
    pods = f"/api/v1/namespaces/{ns}/pods"
    body = pod("smp")
    body["spec"]["containers"].append({"name": "side", "image": "busybox"})
    api.post(pods, json=body)
    patch = {"metadata": {"labels": {"x": "y"}}, "spec": {"activeDeadlineSeconds": 30}}
    response = api.patch(f"{pods}/smp", json=patch, headers={"content-type": "application/strategic-merge-patch+json"})
    assert response.status_code == 200, response.text
    assert [c["name"] for c in response.json()["spec"]["containers"]] == ["main", "side"]
    status_patch = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    status = api.patch(f"{pods}/smp/status", json=status_patch, headers={"content-type": "application/strategic-merge-patch+json"})
    assert status.status_code == 200, status.text
    assert {c["type"] for c in status.json()["status"]["conditions"]} >= {"Ready"}
    # Strategic merge patch is accepted for resource.k8s.io kinds too (kubectl 1.37 sends it).
    api.post(claims_path(ns), json=claim("smp-claim"))
    response = api.patch(claims_path(ns, "smp-claim"), json={"metadata": {"annotations": {"a": "b"}}}, headers={"content-type": "application/strategic-merge-patch+json"})
    assert response.status_code == 200


def test_server_side_apply(api: httpx.Client, ns: str) -> None:
    applied = claim("ssa", labels={"owner": "alice"})
    create = api.patch(
        claims_path(ns, "ssa"), params={"fieldManager": "alice"}, json=applied, headers={"content-type": "application/apply-patch+yaml"}
    )
    assert create.status_code == 201, create.text
    managers = {m["manager"]: m for m in create.json()["metadata"]["managedFields"]}
    assert managers["alice"]["operation"] == "Apply"
    assert "f:labels" in managers["alice"]["fieldsV1"]["f:metadata"]
    other = claim("ssa", labels={"owner": "bob"})
    conflict = api.patch(claims_path(ns, "ssa"), params={"fieldManager": "bob"}, json=other, headers={"content-type": "application/apply-patch+yaml"})
    body = assert_status(conflict, 409, "Conflict")
    assert body["details"]["causes"][0]["field"] == ".metadata.labels.owner"
    forced = api.patch(
        claims_path(ns, "ssa"), params={"fieldManager": "bob", "force": "true"}, json=other, headers={"content-type": "application/apply-patch+yaml"}
    )
    assert forced.status_code == 200
    assert forced.json()["metadata"]["labels"]["owner"] == "bob"
    assert_status(api.patch(claims_path(ns, "ssa"), json=other, headers={"content-type": "application/apply-patch+yaml"}), 422, "Invalid")
