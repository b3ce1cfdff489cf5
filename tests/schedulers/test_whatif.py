"""What-if capacity on a private copy of the scheduler's cache: copies placed as the scheduler
would place them, the reasons for the nodes that take none, nodes removed and added, drain plans."""

from __future__ import annotations

from typing import Any

import pytest

from schedulers.cycle import SchedulingCycle
from schedulers.whatif import WhatIf
from tests.schedulers.cluster import CLASS, DRIVER, NS, Cluster, pod
from tests.schedulers.test_allocator import ADMIN_NS, CASES, Case

Obj = dict[str, Any]


def template(name: str = "one-gpu", count: int = 1) -> Obj:
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS, "count": count}}]}}},
    }


def templated_pod(name: str = "train", entry: str = "gpu", tmpl: str = "one-gpu", **spec: Any) -> Obj:
    body = pod(name, **spec)
    body["spec"]["resourceClaims"] = [{"name": entry, "resourceClaimTemplateName": tmpl}]
    return body


def whatif(cluster: Cluster) -> WhatIf:
    return WhatIf(cluster.cache, SchedulingCycle(cluster.cache))


async def test_copies_fill_the_devices_one_after_another() -> None:
    cluster = Cluster()
    await cluster.topology({"a": 2, "b": 3, "none": 0})
    answer = whatif(cluster).fit(templated_pod(), {"one-gpu": template()}, 100)
    assert answer["total"] == 5
    assert answer["nodes"] == [
        {"name": "a", "count": 2, "devices": [[f"{DRIVER}/a/dev-0"], [f"{DRIVER}/a/dev-1"]]},
        {"name": "b", "count": 3, "devices": [[f"{DRIVER}/b/dev-0"], [f"{DRIVER}/b/dev-1"], [f"{DRIVER}/b/dev-2"]]},
    ]
    assert answer["unfit"] == [
        {"name": "none", "reason": "claim default/train-whatif-5-gpu, request gpu: no device of class gpu on the node"}
    ]


# --- the allocator's table, asked through fit ----------------------------------------------------


async def _case_cluster(case: Case) -> Cluster:
    cluster = Cluster(features=case.features)
    cache = cluster.cache
    for obj in case.classes:
        await cluster.put(cache.classes, obj)
    for obj in case.slices:
        await cluster.put(cache.slices, obj)
    for obj in case.rules:
        await cluster.put(cache.taint_rules, obj)
    # The table's cases without namespaces leave admin access unchecked; the scheduler always checks
    # it, so their namespace carries the admin-access label.
    for name, labels in (ADMIN_NS if case.namespaces is None else case.namespaces).items():
        await cluster.put(cache.namespaces, {"metadata": {"name": name, "labels": labels}})
    await cluster.put(cache.nodes, case.node)
    for obj in case.allocated:
        await cluster.put(cache.claims, obj)
    for obj in case.in_flight.values():
        cache.assume_allocation(obj, obj["status"]["allocation"], "uid-someone-else")
    for obj in case.claims:
        await cluster.put(cache.claims, obj)
    return cluster


def _case_pod(case: Case) -> Obj:
    names = [c["metadata"]["name"] for c in case.claims]
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "containers": [{"name": "main", "image": "pause"}],
            "resourceClaims": [{"name": n, "resourceClaimName": n} for n in names],
        },
    }


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_allocator_table_through_fit(case: Case) -> None:
    """Every case of the allocator's table, asked as "how many pods naming these claims fit": the
    first copy gets the same node and devices as the allocator gives, and none fits where it fails."""
    cluster = await _case_cluster(case)
    answer = whatif(cluster).fit(_case_pod(case), {}, 1)
    node_name = case.node["metadata"]["name"]
    if isinstance(case.expect, list):
        expected = [f"{r['driver']}/{r['pool']}/{r['device']}" for a in case.expect for r in a["devices"]["results"]]
        assert answer["total"] == 1
        assert answer["nodes"] == [{"name": node_name, "count": 1, "devices": [expected]}]
    else:
        assert answer["total"] == 0 and answer["nodes"] == []
        assert [u["name"] for u in answer["unfit"]] == [node_name] and answer["unfit"][0]["reason"]
