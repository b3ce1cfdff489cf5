"""The allocator table of ``tests/schedulers/test_allocator.py`` run through upstream's
kube-scheduler v1.37.2 on this server: each case's node, classes, slices, taint rules, claims
(already allocated ones through ``/status``) and a pod using the case's claims are created through
the API, and upstream's scheduler must reach the case's outcome: the same devices for every claim,
or the pod left unscheduled.

Cases that the API cannot express are not run: claims in flight inside a scheduler, allocator
features other than the defaults, and objects the server refuses (a count past the claim limit,
an unknown allocation mode). The count of cases run is checked, so the table cannot shrink
silently.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator

import httpx
import pytest

from kube.objects import Obj
from schedulers.allocator import AllocatorFeatures
from tests.interop.golang import needs_go
from tests.interop.mixed import MixedStack, mixed_stack
from tests.processes import eventually
from tests.schedulers.test_allocator import CASES, Case

pytestmark = [needs_go, pytest.mark.slow, pytest.mark.timeout(1800)]

RESOURCE = "/apis/resource.k8s.io/v1"
NS = "default"
# Fewer than this many cases run: the table or the API drifted (a refused object is a finding).
MINIMUM_RUN = 80


def expressible(case: Case) -> bool:
    return not case.in_flight and case.features == AllocatorFeatures() and case.timestamp is None


def _plain(obj: Obj) -> Obj:
    """An object as a client creates it: no uid, generation or status."""
    out = copy.deepcopy(obj)
    out["metadata"] = {k: v for k, v in out["metadata"].items() if k not in ("uid", "generation")}
    out.pop("status", None)
    return out


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MixedStack]:
    # No simulator (the cases' nodes are created by the test, nothing runs the pods) and no
    # controller (it would release the cases' allocated claims, which no pod reserved).
    with mixed_stack(tmp_path_factory.mktemp("upstream-allocator"), (), upstream_scheduler=True, controllers=False) as running:
        yield running


class Outcome:
    run = 0
    refused: list[str] = []


def _create(client: httpx.Client, path: str, obj: Obj) -> None:
    response = client.post(path, json=obj)
    if response.status_code != 201:
        raise _Refused(f"{obj.get('kind', path)} {obj['metadata'].get('name')}: {response.status_code} {response.json().get('message')}")


class _Refused(Exception):
    pass


def _setup(client: httpx.Client, case: Case) -> list[str]:
    """Create the case's objects; the claim names the pod uses."""
    node = _plain(case.node)
    node.update(apiVersion="v1", kind="Node")
    _create(client, "/api/v1/nodes", node)
    allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    status = {"capacity": allocatable, "allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}]}
    name = node["metadata"]["name"]
    stored = client.get(f"/api/v1/nodes/{name}").json()
    assert client.put(f"/api/v1/nodes/{name}/status", json={**stored, "status": status}).status_code == 200
    for namespace, labels in (case.namespaces or {}).items():
        current = client.get(f"/api/v1/namespaces/{namespace}").json()
        current["metadata"]["labels"] = {**current["metadata"].get("labels", {}), **labels}
        assert client.put(f"/api/v1/namespaces/{namespace}", json=current).status_code == 200
    for cls in case.classes:
        _create(client, f"{RESOURCE}/deviceclasses", _plain(cls))
    for rslice in case.slices:
        _create(client, f"{RESOURCE}/resourceslices", _plain(rslice))
    for rule in case.rules:
        _create(client, f"{RESOURCE}/devicetaintrules", _plain(rule))
    for claim in case.allocated:
        _create(client, f"{RESOURCE}/namespaces/{NS}/resourceclaims", _plain(claim))
        stored = client.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims/{claim['metadata']['name']}").json()
        stored["status"] = copy.deepcopy(claim["status"])
        response = client.put(f"{RESOURCE}/namespaces/{NS}/resourceclaims/{claim['metadata']['name']}/status", json=stored)
        if response.status_code != 200:
            raise _Refused(f"allocated claim {claim['metadata']['name']}: {response.json().get('message')}")
    if case.allocated:
        time.sleep(0.5)  # the scheduler's informers see the allocations before the pod asks
    names = []
    for claim in case.claims:
        _create(client, f"{RESOURCE}/namespaces/{NS}/resourceclaims", _plain(claim))
        names.append(claim["metadata"]["name"])
    return names


def _cleanup(client: httpx.Client, case: Case) -> None:
    client.delete(f"/api/v1/namespaces/{NS}/pods/case-pod", params={"gracePeriodSeconds": "0"})
    eventually(lambda: client.get(f"/api/v1/namespaces/{NS}/pods/case-pod").status_code == 404, "the case's pod gone")
    # The scheduler's finalizer on the claims it allocated is the claim controller's to remove;
    # with no controller here, the test removes it.
    for claim in client.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims").json()["items"]:
        if claim["metadata"].get("finalizers"):
            path = f"{RESOURCE}/namespaces/{NS}/resourceclaims/{claim['metadata']['name']}"
            client.patch(path, content=b'{"metadata":{"finalizers":null}}', headers={"content-type": "application/merge-patch+json"})
    client.request("DELETE", f"{RESOURCE}/namespaces/{NS}/resourceclaims")
    for plural in ("resourceslices", "deviceclasses", "devicetaintrules"):
        client.request("DELETE", f"{RESOURCE}/{plural}")
    client.request("DELETE", "/api/v1/nodes")
    for namespace, labels in (case.namespaces or {}).items():
        current = client.get(f"/api/v1/namespaces/{namespace}").json()
        current["metadata"]["labels"] = {k: v for k, v in current["metadata"].get("labels", {}).items() if k not in labels}
        client.put(f"/api/v1/namespaces/{namespace}", json=current)

    def empty() -> bool:
        lists = [f"{RESOURCE}/resourceslices", f"{RESOURCE}/deviceclasses", f"{RESOURCE}/namespaces/{NS}/resourceclaims", "/api/v1/nodes"]
        return all(not client.get(path).json()["items"] for path in lists)

    eventually(empty, "the case's objects gone")
    time.sleep(0.3)  # the scheduler's informers see the deletions


def _devices(allocation: Obj) -> list[tuple[str, str, str, str]]:
    return [(r["request"], r["driver"], r["pool"], r["device"]) for r in allocation["devices"]["results"]]


def _pod(claims: list[str]) -> Obj:
    refs = [{"name": f"c{i}", "resourceClaimName": name} for i, name in enumerate(claims)]
    container = {"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": r["name"]} for r in refs]}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "case-pod"}, "spec": {"containers": [container], "resourceClaims": refs}}


def _outcome(client: httpx.Client) -> Obj:
    def decided() -> Obj | None:
        pod = client.get(f"/api/v1/namespaces/{NS}/pods/case-pod").json()
        if pod["spec"].get("nodeName"):
            return pod
        for condition in pod.get("status", {}).get("conditions") or []:
            if condition["type"] == "PodScheduled" and condition["status"] == "False":
                return pod
        return None

    return eventually(decided, "kube-scheduler scheduled the pod or said why not", timeout=30)  # type: ignore[no-any-return]


@pytest.mark.parametrize("case", [c for c in CASES if expressible(c)], ids=lambda c: c.name)
def test_case(mixed: MixedStack, case: Case) -> None:
    client = mixed.client
    try:
        claims = _setup(client, case)
    except _Refused as refused:
        Outcome.refused.append(f"{case.name}: {refused}")
        _cleanup(client, case)
        pytest.skip(f"the API refuses this case's objects: {refused}")
    try:
        assert client.post(f"/api/v1/namespaces/{NS}/pods", json=_pod(claims)).status_code == 201
        pod = _outcome(client)
        Outcome.run += 1
        if isinstance(case.expect, list):
            assert pod["spec"].get("nodeName") == case.node["metadata"]["name"], pod.get("status")
            for name, expected in zip(claims, case.expect, strict=True):
                stored = client.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims/{name}").json()
                assert _devices(stored["status"]["allocation"]) == _devices(expected), name
        else:
            assert not pod["spec"].get("nodeName"), f"scheduled, but the case expects: {case.expect}"
    finally:
        _cleanup(client, case)


def test_the_table_ran(mixed: MixedStack) -> None:
    """Runs after the cases: enough ran, and kube-scheduler logged nothing this server caused
    (the allocator's own refusals, which the table asks for, are its verdicts, not findings)."""
    assert Outcome.run >= MINIMUM_RUN, (Outcome.run, Outcome.refused)
    assert [line for line in mixed.upstream_findings() if "DynamicResources\\\" filter plugin:" not in line] == []
