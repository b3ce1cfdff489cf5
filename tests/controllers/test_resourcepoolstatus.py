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


# ---- the controller process ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def serving(start_server: Callable[..., ServerProcess], backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    if backend != "sqlite":
        pytest.skip("the controller reads through the API; the backend adds nothing here")
    gates = ("--feature-gates", "DRAResourcePoolStatus=true")
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
