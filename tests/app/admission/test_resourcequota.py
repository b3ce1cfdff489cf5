"""ResourceQuota admission (upstream's ResourceQuota plugin, apiserver's
pkg/admission/plugin/resourcequota): what it refuses and with which words, that it charges a
quota's status before the object is written, that refused or dry-run writes charge nothing, and
that concurrent creates never take a namespace over its quota, on one server or two sharing
Postgres."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.admission.resourcequota import Quota, Refused, check_request
from app.api.generic import AdmittedWrite
from app.auth.system import ConfigurationError, enabled_admission_plugins
from app.config import Settings
from app.registry.core import pod as pod_kind
from app.registry.resource import resourceclaim
from devtools.server import ServerProcess
from kube.errors import ApiError
from kube.objects import Obj
from kube.quota.evaluators import CREATE, UPDATE, new_registry
from tests.conftest import Databases
from tests.helpers import assert_status, claim, claims_path, new_namespace, pod

COUNT = "count/resourceclaims.resource.k8s.io"
MERGE = {"Content-Type": "application/merge-patch+json"}


class NoObjects:
    def list(self, group: str, resource: str, namespace: str | None) -> list[Obj]:
        return []

    def get(self, group: str, resource: str, namespace: str, name: str) -> Obj | None:
        return None


def stored_quota(name: str, hard: dict[str, str], used: dict[str, str] | None = None, **spec: Any) -> Quota:
    obj = {"metadata": {"name": name, "namespace": "ns", "resourceVersion": "1"}, "spec": {"hard": hard, **spec},
           "status": {"hard": hard, "used": used if used is not None else dict.fromkeys(hard, "0")}}  # fmt: skip
    return Quota.of(obj)


def judge(quotas: list[Quota], obj: Obj, old: Obj | None = None, strategy: Any = pod_kind.STRATEGY) -> list[Quota]:
    write = AdmittedWrite(UPDATE if old is not None else CREATE, strategy, "ns", obj["metadata"]["name"], obj, old, "", False)
    evaluator = new_registry(NoObjects()).get_or_count(strategy.group, strategy.plural)
    return check_request(quotas, write, obj, old, evaluator)


def a_pod(name: str = "p", cpu: str | None = "1", limit: str | None = "1", **spec: Any) -> Obj:
    resources: Obj = {}
    if cpu:
        resources["requests"] = {"cpu": cpu}
    if limit:
        resources["limits"] = {"cpu": limit}
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"containers": [{"name": "main", "image": "i", "resources": resources}], **spec}}


# ---- the rule itself -----------------------------------------------------------------------------


def test_a_write_that_fits_is_charged_to_every_quota_that_limits_it() -> None:
    compute = stored_quota("compute", {"requests.cpu": "2", "limits.cpu": "4"}, {"requests.cpu": "500m", "limits.cpu": "1"})
    pods = stored_quota("pods", {"pods": "3"})
    claims = stored_quota("claims", {COUNT: "1"})
    after = judge([compute, pods, claims], a_pod())
    assert [q.used for q in after] == [
        {"requests.cpu": compute.used["requests.cpu"] + 1, "limits.cpu": compute.used["limits.cpu"] + 1},
        {"pods": pods.used["pods"] + 1},
        claims.used,
    ]
    assert after[2] is claims  # not a pod's business


def test_a_write_over_a_quota_is_refused_with_upstreams_words() -> None:
    quota = stored_quota("compute", {"requests.cpu": "2", "limits.cpu": "4", "pods": "9"}, {"requests.cpu": "1500m", "limits.cpu": "1", "pods": "1"})
    with pytest.raises(Refused) as refused:
        judge([quota], a_pod(cpu="1", limit="1"))
    assert str(refused.value) == "exceeded quota: compute, requested: requests.cpu=1, used: requests.cpu=1500m, limited: requests.cpu=2"


def test_a_quota_on_cpu_needs_every_container_to_ask_for_cpu() -> None:
    with pytest.raises(Refused) as refused:
        judge([stored_quota("compute", {"limits.cpu": "4", "requests.cpu": "4"})], a_pod(cpu=None, limit="1"))
    assert str(refused.value) == "failed quota: compute: must specify requests.cpu for: main"


def test_a_quota_whose_use_is_not_counted_yet_refuses_what_it_limits() -> None:
    quota = stored_quota("compute", {"pods": "2", "requests.cpu": "2"}, {"pods": "0"})
    with pytest.raises(Refused) as refused:
        judge([quota], a_pod())
    assert str(refused.value) == "status unknown for quota: compute, resources: pods,requests.cpu"
    # A quota the controller has not looked at (no status) limits nothing yet.
    fresh = Quota.of({"metadata": {"name": "fresh"}, "spec": {"hard": {"pods": "0"}}})
    assert judge([fresh], a_pod()) == [fresh]


def test_an_update_is_charged_only_what_it_adds() -> None:
    quota = stored_quota("compute", {"pods": "1", "requests.cpu": "2", "limits.cpu": "2"}, {"pods": "1", "requests.cpu": "1", "limits.cpu": "1"})
    old = a_pod()
    # The pod enters a scope (a deadline): judged again, and it uses nothing new.
    assert [q.used for q in judge([quota], a_pod(activeDeadlineSeconds=30), old)] == [quota.used]
    # A pod that changes nothing quota counts is not judged at all.
    assert judge([quota], a_pod(cpu="2", limit="2"), old) == [quota]


def test_scoped_quotas_limit_only_what_falls_under_their_scopes() -> None:
    terminating = stored_quota("terminating", {"pods": "0"}, scopes=["Terminating"])
    assert judge([terminating], a_pod()) == [terminating]
    with pytest.raises(Refused, match="exceeded quota: terminating, requested: pods=1, used: pods=0, limited: pods=0"):
        judge([terminating], a_pod(activeDeadlineSeconds=30))


def test_a_scope_selector_that_cannot_be_read_is_an_internal_error() -> None:
    quota = stored_quota("odd", {"pods": "9"}, scopeSelector={"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["not a value!"]}]})
    with pytest.raises(ApiError) as failed:
        judge([quota], a_pod(priorityClassName="high"))
    assert failed.value.code == 500
    assert failed.value.message.startswith("Internal error occurred: error matching scopes of quota odd, err: failed to parse and convert selector: ")


def test_claims_are_charged_per_device_class() -> None:
    quota = stored_quota("devices", {COUNT: "5", "gpu.deviceclass.resource.k8s.io/devices": "2"}, {COUNT: "0", "gpu.deviceclass.resource.k8s.io/devices": "1"})
    body = {"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": {"requests": [
        {"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}}]}}}  # fmt: skip
    with pytest.raises(Refused) as refused:
        judge([quota], body, strategy=resourceclaim.STRATEGY)
    assert str(refused.value) == (
        "exceeded quota: devices, requested: gpu.deviceclass.resource.k8s.io/devices=2, used: gpu.deviceclass.resource.k8s.io/devices=1, "
        "limited: gpu.deviceclass.resource.k8s.io/devices=2"
    )


def test_resource_quota_is_on_unless_disabled() -> None:
    assert enabled_admission_plugins(Settings()) == {"NodeRestriction", "ValidatingAdmissionPolicy", "ResourceQuota"}
    assert enabled_admission_plugins(Settings(admission_plugins="", disabled_admission_plugins="ResourceQuota")) == {"ValidatingAdmissionPolicy"}
    with pytest.raises(ConfigurationError, match=r"--disable-admission-plugins: unknown plugin\(s\) \['Quota'\]"):
        enabled_admission_plugins(Settings(disabled_admission_plugins="Quota"))


# ---- through the API -------------------------------------------------------------------------------


def make_quota(api: httpx.Client, ns: str, name: str, hard: dict[str, str], used: dict[str, str] | None = None) -> None:
    """A quota with its status filled in, as the controller would (no controller runs here)."""
    path = f"/api/v1/namespaces/{ns}/resourcequotas"
    created = api.post(path, json={"metadata": {"name": name}, "spec": {"hard": hard}})
    assert created.status_code == 201, created.text
    status = {"hard": hard, "used": used if used is not None else dict.fromkeys(hard, "0")}
    written = api.put(f"{path}/{name}/status", json={**created.json(), "status": status})
    assert written.status_code == 200, written.text


def used(api: httpx.Client, ns: str, name: str) -> dict[str, str]:
    got: dict[str, str] = api.get(f"/api/v1/namespaces/{ns}/resourcequotas/{name}").json()["status"]["used"]
    return got


def test_claims_over_the_count_are_refused_and_nothing_is_half_written(api: httpx.Client, ns: str) -> None:
    make_quota(api, ns, "object-count", {COUNT: "1"})
    first = api.post(claims_path(ns), json=claim("claim-0"))
    assert first.status_code == 201, first.text
    assert used(api, ns, "object-count") == {COUNT: "1"}
    # The managedFields say who charged the quota.
    managers = [m["manager"] for m in api.get(f"/api/v1/namespaces/{ns}/resourcequotas/object-count").json()["metadata"]["managedFields"]]
    assert "kube-apiserver" in managers
    second = api.post(claims_path(ns), json=claim(generate_name="claim-1-"))
    status = assert_status(second, 403, "Forbidden")
    name = status["details"]["name"]
    assert name.startswith("claim-1-")  # the generated name, as upstream names it
    assert status["message"] == (
        f'resourceclaims.resource.k8s.io "{name}" is forbidden: exceeded quota: object-count, requested: {COUNT}=1, used: {COUNT}=1, limited: {COUNT}=1'
    )
    assert status["details"]["group"] == "resource.k8s.io" and status["details"]["kind"] == "resourceclaims"
    assert [c["metadata"]["name"] for c in api.get(claims_path(ns)).json()["items"]] == ["claim-0"]
    assert used(api, ns, "object-count") == {COUNT: "1"}


def test_dry_runs_and_invalid_writes_charge_nothing(api: httpx.Client, ns: str) -> None:
    make_quota(api, ns, "pods", {"pods": "1", "count/pods": "5"})
    dry = api.post(f"/api/v1/namespaces/{ns}/pods", params={"dryRun": "All"}, json=pod("dry"))
    assert dry.status_code == 201, dry.text
    invalid = api.post(f"/api/v1/namespaces/{ns}/pods", json={**pod("bad"), "spec": {"containers": []}})
    assert_status(invalid, 422, "Invalid")
    assert used(api, ns, "pods") == {"count/pods": "0", "pods": "0"}
    assert api.post(f"/api/v1/namespaces/{ns}/pods", json=pod("one")).status_code == 201
    # A dry run over the quota is refused as the write would be.
    over = api.post(f"/api/v1/namespaces/{ns}/pods", params={"dryRun": "All"}, json=pod("two"))
    assert "exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1" in assert_status(over, 403, "Forbidden")["message"]
    assert used(api, ns, "pods") == {"count/pods": "1", "pods": "1"}


def test_a_pod_without_the_cpu_a_quota_limits_is_refused(api: httpx.Client, ns: str) -> None:
    make_quota(api, ns, "compute", {"requests.cpu": "1"})
    refused = api.post(f"/api/v1/namespaces/{ns}/pods", json=pod("p"))
    assert assert_status(refused, 403, "Forbidden")["message"] == 'pods "p" is forbidden: failed quota: compute: must specify requests.cpu for: main'


def test_updates_are_charged_what_they_add(api: httpx.Client, ns: str) -> None:
    make_quota(api, ns, "storage", {"requests.storage": "3Gi"})
    path = f"/api/v1/namespaces/{ns}/persistentvolumeclaims"
    body = {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    assert api.post(path, json=body).status_code == 201
    grown = api.patch(f"{path}/data", json={"spec": {"resources": {"requests": {"storage": "2Gi"}}}}, headers=MERGE)
    assert grown.status_code == 200, grown.text
    assert used(api, ns, "storage") == {"requests.storage": "2Gi"}
    too_big = api.patch(f"{path}/data", json={"spec": {"resources": {"requests": {"storage": "4Gi"}}}}, headers=MERGE)
    assert assert_status(too_big, 403, "Forbidden")["message"] == (
        'persistentvolumeclaims "data" is forbidden: exceeded quota: storage, requested: requests.storage=2Gi, used: requests.storage=2Gi, limited: requests.storage=3Gi'
    )
    assert api.get(f"{path}/data").json()["spec"]["resources"]["requests"]["storage"] == "2Gi"


async def _create_claims(urls: list[str], ns: str, count: int) -> list[httpx.Response]:
    clients = [httpx.AsyncClient(base_url=url, timeout=60) for url in urls]
    try:
        return await asyncio.gather(*(clients[i % len(clients)].post(claims_path(ns), json=claim(f"c-{i}")) for i in range(count)))
    finally:
        for client in clients:
            await client.aclose()


def _assert_never_over(api: httpx.Client, ns: str, responses: list[httpx.Response], limit: int) -> int:
    created = [r for r in responses if r.status_code == 201]
    for refused in (r for r in responses if r.status_code != 201):
        # Over the quota, or (two servers) charged by the other one too often in a row.
        assert refused.status_code in (403, 409), refused.text
        assert "exceeded quota: claims" in refused.text or refused.status_code == 409, refused.text
    stored = api.get(claims_path(ns)).json()["items"]
    assert len(created) == len(stored) <= limit
    assert used(api, ns, "claims") == {COUNT: str(len(stored))}
    return len(stored)


def test_concurrent_creates_never_overshoot(api: httpx.Client, ns: str, server: ServerProcess) -> None:
    make_quota(api, ns, "claims", {COUNT: "5"})
    responses = asyncio.run(_create_claims([server.url], ns, 24))
    assert _assert_never_over(api, ns, responses, 5) == 5


def test_concurrent_creates_on_two_servers_never_overshoot(backend: str, databases: Databases, start_server: Callable[..., ServerProcess]) -> None:
    if backend != "postgres":
        pytest.skip("several servers need Postgres")
    url = databases.migrated()
    first = start_server("--poll-interval", "0.2", database_url=url, migrate_first=False)
    second = start_server("--poll-interval", "0.2", database_url=url, migrate_first=False)
    with httpx.Client(base_url=first.url, timeout=30) as api:
        ns = new_namespace(api)
        make_quota(api, ns, "claims", {COUNT: "8"})
        responses = asyncio.run(_create_claims([first.url, second.url], ns, 40))
        created = _assert_never_over(api, ns, responses, 8)
        # Whatever lost a race in a row can still be created while the quota has room; then no more.
        for i in range(8 - created):
            assert api.post(claims_path(ns), json=claim(f"late-{i}")).status_code == 201
        assert_status(api.post(claims_path(ns), json=claim("one-too-many")), 403, "Forbidden")
        assert used(api, ns, "claims") == {COUNT: "8"}
