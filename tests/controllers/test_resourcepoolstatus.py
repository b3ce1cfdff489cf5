"""The ResourcePoolStatusRequest controller: what it answers (pure ``pool_status``), and the
controller process answering a request on a server that serves them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from controllers.resourcepoolstatus import _expired, pool_status
from devtools.server import ServerProcess
from kube.features import Gate, gates_flag
from kube.objects import Obj
from tests.controllers.test_resourceclaim import ControllerProcess
from tests.processes import eventually

DRIVER = "gpu.example.com"


def _slice(pool: str, devices: list[Obj], generation: int = 1, count: int = 1, node: str | None = "node-1", driver: str = DRIVER) -> Obj:
    spec: Obj = {"driver": driver, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count}, "devices": devices}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": f"{pool}-{generation}"}, "spec": spec}


def _devices(*names: str, taints: dict[str, str] | None = None) -> list[Obj]:
    return [{"name": n, **({"taints": [{"key": "k", "effect": taints[n]}]} if taints and n in taints else {})} for n in names]


def _claim(*results: tuple[str, str, bool]) -> Obj:
    entries = [{"request": "r", "driver": DRIVER, "pool": pool, "device": device, **({"adminAccess": True} if admin else {})} for pool, device, admin in results]
    return {"status": {"allocation": {"devices": {"results": entries}}}}


def _request(**spec: Any) -> Obj:
    return {"metadata": {"name": "r"}, "spec": {"driver": DRIVER, "limit": 100, **spec}}


def _answer(status: Obj) -> list[Obj]:
    return status.get("pools") or []


def test_counts_devices_allocated_unavailable_and_available() -> None:
    slices = [_slice("a", _devices("d0", "d1", "d2", "d3", taints={"d2": "NoSchedule", "d3": "None"}))]
    # d0 twice (shared) counts once; admin access does not count.
    claims = [_claim(("a", "d0", False)), _claim(("a", "d0", False)), _claim(("a", "d1", True))]
    rules = [{"spec": {"deviceSelector": {"driver": DRIVER, "device": "d3"}, "taint": {"effect": "NoExecute"}}}]
    status = pool_status(_request(), slices, claims, rules)
    assert status["poolCount"] == 1
    assert _answer(status) == [
        {"driver": DRIVER, "poolName": "a", "generation": 1, "nodeName": "node-1", "resourceSliceCount": 1,
         "totalDevices": 4, "allocatedDevices": 1, "availableDevices": 1, "unavailableDevices": 2},
    ]  # fmt: skip
    condition = status["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"], condition["message"]) == (
        "Complete", "True", "CalculationComplete", "Calculated status for 1 pools",
    )  # fmt: skip


def test_rules_that_select_nothing_or_do_not_taint_leave_devices_available() -> None:
    slices = [_slice("a", _devices("d0"))]
    rules = [{"spec": {"taint": {"effect": "NoSchedule"}}}, {"spec": {"deviceSelector": {"driver": DRIVER}, "taint": {"effect": "None"}}},
             {"spec": {"deviceSelector": {"driver": DRIVER, "pool": "other"}, "taint": {"effect": "NoSchedule"}}}]  # fmt: skip
    assert _answer(pool_status(_request(), slices, [], rules))[0]["unavailableDevices"] == 0


def test_only_the_newest_generation_counts_and_an_incomplete_pool_says_so() -> None:
    slices = [
        _slice("a", _devices("old"), generation=1),
        _slice("a", _devices("new0", "new1"), generation=2),
        _slice("b", _devices("x"), generation=3, count=2),
    ]
    a, b = _answer(pool_status(_request(), slices, [], []))
    assert (a["generation"], a["totalDevices"]) == (2, 2)
    assert b == {"driver": DRIVER, "poolName": "b", "generation": 3, "nodeName": "node-1",
                 "validationError": f"PoolIncomplete: pool {DRIVER}/b is incomplete: observed 1/2 slices at generation 3"}  # fmt: skip


def test_pools_are_filtered_sorted_and_cut_at_the_limit() -> None:
    slices = [_slice(p, _devices("d"), node=None) for p in ("c", "a", "b")] + [_slice("z", _devices("d"), driver="other.example.com")]
    status = pool_status(_request(limit=2), slices, [], [])
    assert status["poolCount"] == 3
    assert [p["poolName"] for p in _answer(status)] == ["a", "b"]
    assert "nodeName" not in _answer(status)[0]
    only_b = pool_status(_request(poolName="b"), slices, [], [])
    assert (only_b["poolCount"], [p["poolName"] for p in _answer(only_b)]) == (1, ["b"])
    none = pool_status(_request(driver="absent.example.com"), slices, [], [])
    assert none["poolCount"] == 0 and "pools" not in none


def test_a_pool_spread_over_nodes_names_no_node() -> None:
    slices = [_slice("a", _devices("d0"), count=2, node="n1"), {**_slice("a", _devices("d1"), count=2, node="n2"), "metadata": {"name": "a-2nd"}}]
    (pool,) = _answer(pool_status(_request(), slices, [], []))
    assert "nodeName" not in pool and pool["resourceSliceCount"] == 2


def test_answered_requests_expire_after_an_hour_pending_ones_after_a_day() -> None:
    now = datetime(2026, 1, 2, tzinfo=UTC)

    def at(delta: timedelta) -> str:
        return (now - delta).strftime("%Y-%m-%dT%H:%M:%SZ")

    answered: dict[str, Any] = {"metadata": {"creationTimestamp": at(timedelta(days=3))}, "status": {"conditions": [{"type": "Complete", "lastTransitionTime": at(timedelta(minutes=59))}]}}
    assert not _expired(answered, now)
    answered["status"]["conditions"][0]["lastTransitionTime"] = at(timedelta(minutes=61))
    assert _expired(answered, now)
    assert not _expired({"metadata": {"creationTimestamp": at(timedelta(hours=23))}}, now)
    assert _expired({"metadata": {"creationTimestamp": at(timedelta(hours=25))}}, now)


# ---- the partition summary ------------------------------------------------------------------------

PROFILE = "dra.e2e.example.com/profile"


def _partition(name: str, profile: str | None, memory: str, counter_set: str = "gpu-0", attribute: str = PROFILE) -> Obj:
    device: Obj = {"name": name, "consumesCounters": [{"counterSet": counter_set, "counters": {"memory": {"value": memory}}}]}
    if profile is not None:
        device["attributes"] = {attribute: {"string": profile}}
    return device


def _partitioned_pool(devices: list[Obj], typed: bool = True, counters: Obj | None = None, pool: str = "partitioned") -> list[Obj]:
    """upstream's e2e PartitionableResources: a slice of shared counters and a slice of devices
    consuming them, which names the partition type attribute when ``typed``."""
    shared = {"driver": DRIVER, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 2}, "nodeSelector": {},
              "sharedCounters": [{"name": "gpu-0", "counters": counters or {"memory": {"value": "8"}}}]}  # fmt: skip
    with_devices: Obj = {"driver": DRIVER, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 2}, "nodeSelector": {}, "devices": devices}
    if typed:
        with_devices["partitionTypeAttribute"] = PROFILE
    return [{"metadata": {"name": f"{pool}-counters"}, "spec": shared}, {"metadata": {"name": f"{pool}-devices"}, "spec": with_devices}]


E2E_PARTITIONS = [_partition("full", "Full", "8"), _partition("half-a", "Half", "4"), _partition("half-b", "Half", "4")]


def _summary(*entries: tuple[str, int, int], attribute: str = PROFILE) -> list[Obj]:
    return [{"attribute": attribute, "type": t, "total": total, "allocatable": allocatable} for t, total, allocatable in entries]


def _only_pool(status: Obj) -> Obj:
    (pool,) = _answer(status)
    return pool


def test_the_e2e_partitionable_pool_reports_each_type() -> None:
    pool = _only_pool(pool_status(_request(), _partitioned_pool(E2E_PARTITIONS), [], []))
    assert pool == {
        "driver": DRIVER, "poolName": "partitioned", "generation": 1, "resourceSliceCount": 2, "totalDevices": 3,
        "allocatedDevices": 0, "availableDevices": 3, "unavailableDevices": 0,
        "partitionSummary": _summary(("Full", 1, 1), ("Half", 2, 2)),
    }  # fmt: skip


def test_the_e2e_pool_without_a_partition_type_reports_no_summary() -> None:
    pool = _only_pool(pool_status(_request(), _partitioned_pool(E2E_PARTITIONS, typed=False), [], []))
    assert "partitionSummary" not in pool and "validationError" not in pool and pool["totalDevices"] == 3


def test_allocated_partitions_use_up_the_counters_each_type_is_measured_against() -> None:
    slices = _partitioned_pool(E2E_PARTITIONS)
    # half-a holds 4 of the 8: no room for Full, room for the one free Half.
    one_half = _only_pool(pool_status(_request(), slices, [_claim(("partitioned", "half-a", False))], []))
    assert one_half["partitionSummary"] == _summary(("Full", 1, 0), ("Half", 2, 1))
    assert (one_half["allocatedDevices"], one_half["availableDevices"]) == (1, 2)
    # The Full partition holds everything.
    full = _only_pool(pool_status(_request(), slices, [_claim(("partitioned", "full", False))], []))
    assert full["partitionSummary"] == _summary(("Full", 1, 0), ("Half", 2, 0))
    # Admin access uses nothing; one device shared by two claims uses its counters once.
    admin = _only_pool(pool_status(_request(), slices, [_claim(("partitioned", "full", True))], []))
    assert admin["partitionSummary"] == _summary(("Full", 1, 1), ("Half", 2, 2))
    twice = [_claim(("partitioned", "half-a", False)), _claim(("partitioned", "half-a", False))]
    assert _only_pool(pool_status(_request(), slices, twice, []))["partitionSummary"] == _summary(("Full", 1, 0), ("Half", 2, 1))


def test_taints_leave_partitions_allocatable_as_upstream_counts_them() -> None:
    devices = [{**_partition("full", "Full", "8"), "taints": [{"key": "k", "effect": "NoSchedule"}]}, *E2E_PARTITIONS[1:]]
    rules = [{"spec": {"deviceSelector": {"driver": DRIVER, "device": "half-a"}, "taint": {"effect": "NoExecute"}}}]
    pool = _only_pool(pool_status(_request(), _partitioned_pool(devices), [], rules))
    assert (pool["unavailableDevices"], pool["availableDevices"]) == (2, 1)
    assert pool["partitionSummary"] == _summary(("Full", 1, 1), ("Half", 2, 2))


def test_free_devices_and_every_counter_set_bound_what_fits() -> None:
    # 80 of memory would fit ten, but there are three devices.
    three = [_partition(f"full-{i}", "Full", "8") for i in range(3)]
    pool = _only_pool(pool_status(_request(), _partitioned_pool(three, counters={"memory": {"value": "80"}}), [], []))
    assert pool["partitionSummary"] == _summary(("Full", 3, 3))
    # Two counter sets: memory has room for two, cores for one.
    devices = [
        {"name": f"full-{i}", "attributes": {PROFILE: {"string": "Full"}},
         "consumesCounters": [{"counterSet": "mem", "counters": {"memory": {"value": "80Gi"}}}, {"counterSet": "cores", "counters": {"sm": {"value": "8"}}}]}
        for i in range(2)
    ]  # fmt: skip
    slices = _partitioned_pool(devices)
    slices[0]["spec"]["sharedCounters"] = [{"name": "mem", "counters": {"memory": {"value": "160Gi"}}}, {"name": "cores", "counters": {"sm": {"value": "8"}}}]
    assert _only_pool(pool_status(_request(), slices, [], []))["partitionSummary"] == _summary(("Full", 2, 1))


def test_the_requests_default_attribute_groups_a_pool_whose_slices_name_none() -> None:
    untyped = _partitioned_pool(E2E_PARTITIONS, typed=False)
    pool = _only_pool(pool_status(_request(defaultPartitionTypeAttribute=PROFILE), untyped, [], []))
    assert pool["partitionSummary"] == _summary(("Full", 1, 1), ("Half", 2, 2))
    # A slice's own attribute wins, and then the default applies to no device of the pool.
    shape = "dra.e2e.example.com/shape"
    devices = [{**d, "attributes": {**d["attributes"], shape: {"string": "Small"}}} for d in E2E_PARTITIONS]
    typed = _partitioned_pool(devices)
    pool = _only_pool(pool_status(_request(defaultPartitionTypeAttribute=shape), typed, [], []))
    assert pool["partitionSummary"] == _summary(("Full", 1, 1), ("Half", 2, 2))


def test_an_attribute_in_the_drivers_domain_may_be_written_without_it() -> None:
    attribute = f"{DRIVER}/profile"
    devices = [_partition("full", "Full", "8", attribute="profile"), _partition("half", "Half", "4", attribute="profile")]
    # The qualified spelling wins over the bare one.
    devices[1]["attributes"][attribute] = {"string": "Explicit"}
    slices = _partitioned_pool(devices)
    slices[1]["spec"]["partitionTypeAttribute"] = attribute
    pool = _only_pool(pool_status(_request(), slices, [], []))
    assert pool["partitionSummary"] == _summary(("Explicit", 1, 1), ("Full", 1, 1), attribute=attribute)


def test_slices_naming_different_attributes_are_summarised_apart() -> None:
    shape = "dra.e2e.example.com/shape"
    slices = _partitioned_pool([_partition("full", "Full", "8")])
    slices[1]["spec"]["pool"]["resourceSliceCount"] = 3
    slices[0]["spec"]["pool"]["resourceSliceCount"] = 3
    other = {**slices[1], "metadata": {"name": "partitioned-shapes"}, "spec": {**slices[1]["spec"], "partitionTypeAttribute": shape,
             "devices": [_partition("small", "Small", "2", attribute=shape)]}}  # fmt: skip
    pool = _only_pool(pool_status(_request(), [*slices, other], [], []))
    assert pool["partitionSummary"] == [*_summary(("Full", 1, 1)), *_summary(("Small", 1, 1), attribute=shape)]


@pytest.mark.parametrize(
    ("devices", "counters", "error"),
    [
        ([_partition("full", "Full", "8"), _partition("mystery", None, "4")], True,
         f'PartitionTypeMissing: device "mystery" in pool {DRIVER}/partitioned does not carry partition type attribute "{PROFILE}"'),
        ([{**_partition("full", "Full", "8"), "attributes": {PROFILE: {"int": 1}}}], True,
         f'PartitionTypeMissing: device "full" in pool {DRIVER}/partitioned does not carry partition type attribute "{PROFILE}"'),
        ([_partition("half-a", "Half", "4"), _partition("half-b", "Half", "5")], True,
         f'PartitionCostMismatch: devices of partition type "Half" in pool {DRIVER}/partitioned consume different counters'),
        (E2E_PARTITIONS, False, f"PartitionTypeMissing: pool {DRIVER}/partitioned declares partitionTypeAttribute but publishes no sharedCounters"),
        ([_partition(f"d{i}", f"type-{i:02}", "1") for i in range(33)], True,
         f"PartitionSummaryOverCap: pool {DRIVER}/partitioned has 33 partition types, exceeding the maximum of 32"),
    ],
    ids=["missing-attribute", "not-a-string", "cost-mismatch", "no-counters", "over-cap"],
)  # fmt: skip
def test_a_pool_that_cannot_be_summarised_says_why_and_keeps_its_counts(devices: list[Obj], counters: bool, error: str) -> None:
    slices = _partitioned_pool(devices)
    if not counters:
        slices = [slices[1]]
        slices[0]["spec"]["pool"]["resourceSliceCount"] = 1
    status = pool_status(_request(), slices, [], [])
    pool = _only_pool(status)
    assert pool["validationError"] == error
    assert "partitionSummary" not in pool and pool["totalDevices"] == len(devices)
    assert status["conditions"][0]["message"] == "Calculated status for 1 pools (1 incomplete)"


# ---- the shareable summary -----------------------------------------------------------------------


def _shareable(name: str, **capacity: str) -> Obj:
    return {"name": name, "allowMultipleAllocations": True, "capacity": {key: {"value": value} for key, value in capacity.items()}}


def _consuming(pool: str, device: str, admin: bool = False, **consumed: str) -> Obj:
    claim = _claim((pool, device, admin))
    claim["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] = consumed
    return claim


def test_the_e2e_shareable_pool_reports_its_capacity() -> None:
    slices = [_slice("shareable", [_shareable(f"shared-{i}", memory="16") for i in range(2)], node=None)]
    pool = _only_pool(pool_status(_request(), slices, [], []))
    assert pool["shareableSummary"] == {
        "fullyAvailableDevices": 2, "partiallyAvailableDevices": 0,
        "capacity": [{"name": "memory", "total": "32", "consumed": "0", "available": "32"}],
    }  # fmt: skip
    assert "validationError" not in pool and "partitionSummary" not in pool


def test_shared_devices_in_use_are_partially_available_and_their_consumption_adds_up() -> None:
    devices = [_shareable("shared-0", memory="40Gi", cores="4"), _shareable("shared-1", memory="40Gi", cores="4"), {"name": "plain"}]
    claims = [
        _consuming("a", "shared-0", memory="6Gi", cores="1"),
        _consuming("a", "shared-0", memory="4Gi"),
        _consuming("a", "shared-1", admin=True, memory="80Gi"),  # admin access consumes nothing
        _claim(("a", "plain", False)),
    ]
    pool = _only_pool(pool_status(_request(), [_slice("a", devices)], claims, []))
    assert pool["shareableSummary"] == {
        "fullyAvailableDevices": 1, "partiallyAvailableDevices": 1,
        "capacity": [
            {"name": "cores", "total": "8", "consumed": "1", "available": "7"},
            {"name": "memory", "total": "80Gi", "consumed": "10Gi", "available": "70Gi"},
        ],
    }  # fmt: skip
    assert (pool["allocatedDevices"], pool["availableDevices"]) == (2, 1)


def test_what_is_left_is_never_negative_and_a_device_without_capacity_still_counts() -> None:
    pool = _only_pool(pool_status(_request(), [_slice("a", [_shareable("s0", memory="1Gi")])], [_consuming("a", "s0", memory="2Gi")], []))
    assert pool["shareableSummary"]["capacity"] == [{"name": "memory", "total": "1Gi", "consumed": "2Gi", "available": "0"}]
    bare = _only_pool(pool_status(_request(), [_slice("a", [_shareable("s0")])], [], []))
    assert bare["shareableSummary"] == {"fullyAvailableDevices": 1, "partiallyAvailableDevices": 0}
    assert "shareableSummary" not in _only_pool(pool_status(_request(), [_slice("a", _devices("d0"))], [], []))


def test_too_many_capacities_are_an_error_but_keep_the_partition_summary_apart() -> None:
    many = _shareable("s0", **{f"c{i:02}": "1" for i in range(33)})
    pool = _only_pool(pool_status(_request(), [_slice("a", [many])], [], []))
    assert pool["validationError"] == f"ShareableSummaryOverCap: pool {DRIVER}/a has 33 shareable capacity keys, exceeding the maximum of 32"
    assert "shareableSummary" not in pool
    # A partition and shareable device gives both summaries; a partition fault leaves the shareable one.
    hybrid = {**_partition("full", "Full", "8"), "allowMultipleAllocations": True, "capacity": {"memory": {"value": "8"}}}
    both = _only_pool(pool_status(_request(), _partitioned_pool([hybrid]), [], []))
    assert both["partitionSummary"] == _summary(("Full", 1, 1))
    assert both["shareableSummary"]["fullyAvailableDevices"] == 1
    broken = _only_pool(pool_status(_request(), _partitioned_pool([hybrid, _partition("mystery", None, "4")]), [], []))
    assert broken["validationError"].startswith("PartitionTypeMissing:") and "partitionSummary" not in broken
    assert broken["shareableSummary"]["fullyAvailableDevices"] == 1


# ---- the controller process ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def serving(start_server: Callable[..., ServerProcess], backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    if backend != "sqlite":
        pytest.skip("the controller reads through the API; the backend adds nothing here")
    gates = ("--feature-gates", gates_flag({Gate.DRAResourcePoolStatus: True, Gate.DRAPartitionableDevicesType: True}))
    server = start_server("--runtime-config", "resource.k8s.io/v1alpha3=true", *gates)
    controller = ControllerProcess(server.url, tmp_path_factory.mktemp("pool-status") / "controller.log", *gates).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30.0) as client:
            yield client
    finally:
        controller.stop()


def test_the_controller_answers_a_request_once(serving: httpx.Client) -> None:
    driver = "pools.example.com"
    for pool in ("p1", "p2"):
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", **_slice(pool, _devices("d0", "d1"), driver=driver)}
        body["metadata"]["name"] = f"rpsr-{pool}"
        assert serving.post("/apis/resource.k8s.io/v1/resourceslices", json=body).status_code == 201
    request = {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "ResourcePoolStatusRequest", "metadata": {"name": "how-full"}, "spec": {"driver": driver, "limit": 1}}
    assert serving.post("/apis/resource.k8s.io/v1alpha3/resourcepoolstatusrequests", json=request).status_code == 201

    def answered() -> Obj | None:
        got = serving.get("/apis/resource.k8s.io/v1alpha3/resourcepoolstatusrequests/how-full").json()
        return got.get("status")

    status = eventually(answered, "the request's status", timeout=30)
    assert status["poolCount"] == 2
    assert [(p["poolName"], p["totalDevices"], p["availableDevices"]) for p in status["pools"]] == [("p1", 2, 2)]
    assert status["conditions"][0]["type"] == "Complete"


def test_the_controller_answers_with_the_summaries_upstreams_e2e_expects(serving: httpx.Client) -> None:
    driver = "views.example.com"
    slices = [*_partitioned_pool(E2E_PARTITIONS), _slice("shareable", [_shareable(f"shared-{i}", memory="16") for i in range(2)], node=None)]
    for body in slices:
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", **body, "spec": {**body["spec"], "driver": driver}}
        body["metadata"] = {"name": f"views-{body['metadata']['name']}"}
        if "nodeName" not in body["spec"]:
            body["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]}]}]}
        created = serving.post("/apis/resource.k8s.io/v1/resourceslices", json=body)
        assert created.status_code == 201, created.text
    request = {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "ResourcePoolStatusRequest", "metadata": {"name": "views"}, "spec": {"driver": driver}}
    assert serving.post("/apis/resource.k8s.io/v1alpha3/resourcepoolstatusrequests", json=request).status_code == 201

    def answered() -> Obj | None:
        return serving.get("/apis/resource.k8s.io/v1alpha3/resourcepoolstatusrequests/views").json().get("status")

    partitioned, shareable = eventually(answered, "the request's status", timeout=30)["pools"]
    assert partitioned["partitionSummary"] == _summary(("Full", 1, 1), ("Half", 2, 2))
    assert shareable["shareableSummary"] == {
        "fullyAvailableDevices": 2, "partiallyAvailableDevices": 0,
        "capacity": [{"name": "memory", "total": "32", "consumed": "0", "available": "32"}],
    }  # fmt: skip
