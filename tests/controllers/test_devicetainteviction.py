"""Device taint eviction by the controller process, against a real server.

Pods here are bound to a node by hand and use claims whose allocation the test writes, so
only the controller acts. Each test uses its own driver name (slices and rules are cluster
scoped), and every "stays" check runs after a control pod on the same taint source has been
evicted: that proves the controller saw the taint, so no sleeping is needed to prove a negative.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from devtools.server import ServerProcess
from kube.features import Gate, gates_flag
from kube.timeutil import parse_time
from tests.controllers.test_resourceclaim import ControllerProcess
from tests.processes import eventually

RESOURCE = "/apis/resource.k8s.io/v1"
STATUS_PERIOD = "1"  # --device-taint-rule-status-period: upstream's 10 s would only slow the tests


@pytest.fixture(scope="module")
def controller(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    log = tmp_path_factory.mktemp("taint-controller") / "controller.log"
    proc = ControllerProcess(server.url, log, "--device-taint-rule-status-period", STATUS_PERIOD).start()
    yield proc
    proc.stop()


def now_seconds() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def taint(effect: str = "NoExecute", key: str = "example.com/unhealthy", time_added: str | None = None) -> dict[str, Any]:
    t = {"key": key, "value": "yes", "effect": effect}
    if time_added:
        t["timeAdded"] = time_added
    return t


class Devices:
    """One driver, one pool and its slice, and pods using claims allocated from it."""

    def __init__(self, api: httpx.Client, ns: str, count: int, pool: str = "pool-a") -> None:
        self.api = api
        self.ns = ns
        self.driver = f"gpu.{ns}.example.com"
        self.pool = pool
        self.slice_name = f"{ns}-{pool}"
        self.devices: list[dict[str, Any]] = [{"name": f"dev-{i}"} for i in range(count)]
        response = api.post(f"{RESOURCE}/resourceslices", json=self._slice())
        assert response.status_code == 201, response.text
        self.slice = response.json()

    def _slice(self) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": self.slice_name},
            "spec": {
                "driver": self.driver,
                "pool": {"name": self.pool, "generation": 1, "resourceSliceCount": 1},
                "nodeName": "node-1",
                "devices": self.devices,
            },
        }

    def set_taints(self, taints: dict[int, list[dict[str, Any]]]) -> None:
        """Replace the taints of the given devices (others keep theirs)."""
        for index, device_taints in taints.items():
            device: dict[str, Any] = {"name": f"dev-{index}"}
            if device_taints:
                device["taints"] = device_taints
            self.devices[index] = device
        body = {**self._slice(), "metadata": self.slice["metadata"]}
        response = self.api.put(f"{RESOURCE}/resourceslices/{self.slice_name}", json=body)
        assert response.status_code == 200, response.text
        self.slice = response.json()

    def pod_using(self, name: str, device: int, tolerations: list[dict[str, Any]] | None = None, finalizer: bool = False) -> dict[str, Any]:
        """A pod bound to node-1 using claim ``<name>`` allocated device ``dev-<device>``, reserved for the pod."""
        meta: dict[str, Any] = {"name": name}
        if finalizer:
            meta["finalizers"] = ["example.com/keep"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "nodeName": "node-1",
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
            },
        }
        response = self.api.post(f"/api/v1/namespaces/{self.ns}/pods", json=pod)
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        request: dict[str, Any] = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
        if tolerations:
            request["exactly"]["tolerations"] = tolerations
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [request]}},
        }
        response = self.api.post(f"{RESOURCE}/namespaces/{self.ns}/resourceclaims", json=claim)
        assert response.status_code == 201, response.text
        result: dict[str, Any] = {"request": "gpu", "driver": self.driver, "pool": self.pool, "device": f"dev-{device}"}
        if tolerations:
            result["tolerations"] = tolerations
        body = response.json()
        body["status"] = {
            "allocation": {"devices": {"results": [result]}},
            "reservedFor": [{"resource": "pods", "name": name, "uid": created["metadata"]["uid"]}],
        }
        response = self.api.put(f"{RESOURCE}/namespaces/{self.ns}/resourceclaims/{name}/status", json=body)
        assert response.status_code == 200, response.text
        return created

    def pod(self, name: str) -> dict[str, Any] | None:
        response = self.api.get(f"/api/v1/namespaces/{self.ns}/pods/{name}")
        if response.status_code == 404:
            return None
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    def gone(self, name: str) -> bool:
        return self.pod(name) is None

    def events(self, pod: str, message: str) -> list[dict[str, Any]]:
        items = self.api.get(f"/api/v1/namespaces/{self.ns}/events").json()["items"]
        return [e for e in items if e["involvedObject"].get("name") == pod and e.get("reason") == "DeviceTaintManagerEviction" and e.get("message") == message]

    def cleanup(self) -> None:
        self.api.delete(f"{RESOURCE}/resourceslices/{self.slice_name}")


@pytest.fixture
def devices(api: httpx.Client, ns: str) -> Iterator[Callable[..., Devices]]:
    made: list[Devices] = []

    def make(count: int, pool: str = "pool-a") -> Devices:
        made.append(Devices(api, ns, count, pool))
        return made[-1]

    yield make
    for d in made:
        d.cleanup()


def rule(api: httpx.Client, name: str, selector: dict[str, Any] | None, taint: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name}, "spec": {"taint": taint}}
    if selector is not None:
        body["spec"]["deviceSelector"] = selector
    response = api.post(f"{RESOURCE}/devicetaintrules", json=body)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def condition(api: httpx.Client, name: str) -> dict[str, Any] | None:
    status = api.get(f"{RESOURCE}/devicetaintrules/{name}").json().get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == "EvictionInProgress"), None)


NO_EXECUTE_TOLERATION = {"key": "example.com/unhealthy", "operator": "Exists", "effect": "NoExecute"}


def test_no_execute_slice_taint_evicts_untolerating_pod(api: httpx.Client, devices: Callable[..., Devices], controller: ControllerProcess) -> None:
    d = devices(2)
    # The finalizer keeps the deleted pod visible, so the condition set before deletion can be read.
    victim = d.pod_using("victim", 0, finalizer=True)
    d.pod_using("bystander", 1)
    d.set_taints({0: [taint()]})

    def deleted() -> dict[str, Any] | None:
        pod = d.pod("victim")
        return pod if pod and pod["metadata"].get("deletionTimestamp") else None

    pod = eventually(deleted, "victim deleted")
    assert {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "DeletionByDeviceTaintManager",
        "message": "Device Taint manager: deleting due to NoExecute taint",
    }.items() <= next(c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget").items()
    [event] = eventually(lambda: d.events("victim", "Marking for deletion"), "eviction event")
    assert event["type"] == "Normal" and event["involvedObject"]["uid"] == victim["metadata"]["uid"]
    assert event["source"]["component"] == "device-taint-eviction-controller"
    assert d.pod("bystander") is not None  # a device without taints

    patch = {"metadata": {"finalizers": None}}
    api.patch(f"/api/v1/namespaces/{d.ns}/pods/victim", json=patch, headers={"Content-Type": "application/merge-patch+json"})
    eventually(lambda: d.gone("victim"), "victim gone")


def test_toleration_without_seconds_keeps_pod(devices: Callable[..., Devices], controller: ControllerProcess) -> None:
    d = devices(2)
    d.pod_using("tolerant", 0, tolerations=[NO_EXECUTE_TOLERATION])
    d.pod_using("control", 1)
    d.set_taints({0: [taint()], 1: [taint()]})
    eventually(lambda: d.gone("control"), "untolerating control pod evicted")
    assert d.pod("tolerant") is not None
    assert not d.events("tolerant", "Marking for deletion")


def test_toleration_seconds_delays_eviction(devices: Callable[..., Devices], controller: ControllerProcess) -> None:
    d = devices(2)
    seconds = 2
    d.pod_using("patient", 0, tolerations=[{**NO_EXECUTE_TOLERATION, "tolerationSeconds": seconds}])
    d.pod_using("control", 1)
    added = now_seconds()
    d.set_taints({0: [taint(time_added=added)], 1: [taint(time_added=added)]})
    eventually(lambda: d.gone("control"), "untolerating control pod evicted")
    assert d.pod("patient") is not None, "evicted before its tolerationSeconds ran out"
    eventually(lambda: d.gone("patient"), "tolerating pod evicted after tolerationSeconds")
    [event] = d.events("patient", "Marking for deletion")
    # Counted from the taint's timeAdded (both times have whole seconds).
    evicted_at, taint_time = parse_time(event["firstTimestamp"]), parse_time(added)
    assert evicted_at is not None and taint_time is not None
    assert (evicted_at - taint_time).total_seconds() >= seconds


def test_device_taint_rule_evicts_and_reports_progress(api: httpx.Client, devices: Callable[..., Devices], controller: ControllerProcess) -> None:
    d = devices(2)
    d.pod_using("first", 0)
    d.pod_using("second", 1, tolerations=[{**NO_EXECUTE_TOLERATION, "tolerationSeconds": 4}])
    other_pool = devices(1, pool="pool-b")
    other_pool.pod_using("outside", 0)  # not selected by the NoExecute rule
    name = f"{d.ns}-evict"
    rule(api, name, {"driver": d.driver, "pool": d.pool}, taint())
    rule(api, f"{d.ns}-other", {"driver": d.driver, "pool": other_pool.pool}, taint(effect="NoSchedule"))
    try:
        eventually(lambda: d.gone("first"), "untolerating pod evicted by the rule")
        # In progress: one pod still waits for its toleration to run out, one is gone.
        progress = eventually(
            lambda: (c := condition(api, name)) and c["message"] == "1 pod needs to be evicted in 1 namespace. 1 pod evicted since starting the controller." and c,
            "status shows progress",
        )
        assert progress["status"] == "True" and progress["reason"] == "PodsPendingEviction" and progress["observedGeneration"] == 1
        assert d.pod("second") is not None
        eventually(lambda: d.gone("second"), "tolerating pod evicted after tolerationSeconds")
        done = eventually(lambda: (c := condition(api, name)) and c["status"] == "False" and c, "status shows completion")
        assert done["reason"] == "Completed"
        assert done["message"] == "2 pods evicted since starting the controller."
        assert d.events("first", "Marking for deletion") and d.events("second", "Marking for deletion")
        assert d.pod("outside") is not None
        # A rule without NoExecute evicts nothing, and says so.
        other = eventually(lambda: condition(api, f"{d.ns}-other"), "status of the NoSchedule rule")
        assert (other["status"], other["reason"], other["message"]) == ("False", "OtherEffect", "Eviction only happens for the NoExecute effect.")
    finally:
        api.delete(f"{RESOURCE}/devicetaintrules/{name}")
        api.delete(f"{RESOURCE}/devicetaintrules/{d.ns}-other")


def test_none_effect_rule_previews_eviction(api: httpx.Client, devices: Callable[..., Devices], controller: ControllerProcess) -> None:
    d = devices(3)
    d.pod_using("would-go", 0)
    d.pod_using("tolerant", 1, tolerations=[NO_EXECUTE_TOLERATION])
    name = f"{d.ns}-preview"
    rule(api, name, {"driver": d.driver}, taint(effect="None"))
    try:
        preview = eventually(lambda: condition(api, name), "preview status")
        assert (preview["status"], preview["reason"]) == ("False", "NoEffect")
        assert preview["message"] == (
            "3 published devices selected. 2 allocated devices selected. 1 pod would be evicted in 1 namespace "
            "if the effect was NoExecute. This information will not be updated again. Recreate the DeviceTaintRule to trigger an update."
        )
        assert d.pod("would-go") is not None and d.pod("tolerant") is not None
    finally:
        api.delete(f"{RESOURCE}/devicetaintrules/{name}")


def test_no_schedule_and_none_taints_do_not_evict(devices: Callable[..., Devices], controller: ControllerProcess) -> None:
    d = devices(3)
    d.pod_using("no-schedule", 0)
    d.pod_using("none", 1)
    d.pod_using("control", 2)
    d.set_taints({0: [taint(effect="NoSchedule")], 1: [taint(effect="None")], 2: [taint()]})
    eventually(lambda: d.gone("control"), "NoExecute control pod evicted")
    assert d.pod("no-schedule") is not None and d.pod("none") is not None


def test_taint_removed_before_deadline_cancels_eviction(devices: Callable[..., Devices], controller: ControllerProcess) -> None:
    d = devices(2)
    seconds = 3
    d.pod_using("spared", 0, tolerations=[{**NO_EXECUTE_TOLERATION, "tolerationSeconds": seconds}])
    d.pod_using("control", 1)
    added = now_seconds()
    d.set_taints({0: [taint(time_added=added)], 1: [taint(time_added=added)]})
    eventually(lambda: d.gone("control"), "untolerating control pod evicted")
    d.set_taints({0: []})
    eventually(lambda: d.events("spared", "Cancelling deletion"), "cancel event")
    taint_time = parse_time(added)
    assert taint_time is not None
    deadline = taint_time.timestamp() + seconds + 1.5
    while time.time() < deadline:  # past the old deadline, the pod must still be there
        assert d.pod("spared") is not None, "evicted although the taint was removed"
        time.sleep(0.2)
    assert not d.events("spared", "Marking for deletion")


def test_feature_gates(start_server: Callable[..., ServerProcess], tmp_path_factory: pytest.TempPathFactory) -> None:
    """DRADeviceTaintRules off: rules are ignored (no eviction, no status); DRADeviceTaints off: no eviction at all."""
    server = start_server()
    logs = tmp_path_factory.mktemp("taint-gates")
    with httpx.Client(base_url=server.url, timeout=30.0) as api:
        ns = "gates"
        assert api.post("/api/v1/namespaces", json={"metadata": {"name": ns}}).status_code == 201
        d = Devices(api, ns, 3)
        d.pod_using("by-rule", 0)
        d.pod_using("by-slice", 1)
        rule(api, "gates-rule", {"driver": d.driver, "device": "dev-0"}, taint())

        no_rules = ControllerProcess(server.url, logs / "no-rules.log", "--feature-gates", gates_flag({Gate.DRADeviceTaintRules: False})).start()
        try:
            d.set_taints({1: [taint()]})
            eventually(lambda: d.gone("by-slice"), "slice taint still evicts")
            assert d.pod("by-rule") is not None
            assert condition(api, "gates-rule") is None
        finally:
            no_rules.stop()

        no_taints = ControllerProcess(server.url, logs / "no-taints.log", "--feature-gates", gates_flag({Gate.DRADeviceTaints: False})).start()
        try:
            d.pod_using("tainted", 2)
            d.set_taints({2: [taint()]})
            # Proof of life: the same process creates a claim from a template for a new pod.
            template = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": "t"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}},
            }
            assert api.post(f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates", json=template).status_code == 201
            probe = {"metadata": {"name": "probe"}, "spec": {"containers": [{"name": "c", "image": "i"}], "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]}}
            assert api.post(f"/api/v1/namespaces/{ns}/pods", json=probe).status_code == 201
            eventually(lambda: api.get(f"/api/v1/namespaces/{ns}/pods/probe").json().get("status", {}).get("resourceClaimStatuses"), "controller running")
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                assert d.pod("tainted") is not None and d.pod("by-rule") is not None
                time.sleep(0.2)
            assert not d.events("tainted", "Marking for deletion")
        finally:
            no_taints.stop()
