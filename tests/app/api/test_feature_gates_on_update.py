"""A feature gate turned off after objects used its fields, over HTTP: the server restarted with the
gate off on the same database keeps a field an object stored while the gate was on through every
update of that object, and drops the field from an object that did not use it before (upstream's
"drop disabled fields unless the old object used them" rule, applied on update with the stored
object as the old one)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from devtools.server import ServerProcess
from kube.features import Gate, gates_flag

SLICES = "/apis/resource.k8s.io/v1/resourceslices"
KEY = "example.com/maintenance"
TAINT = {"key": KEY, "value": "soon", "effect": "NoSchedule"}

Obj = dict[str, Any]


def resource_slice(name: str, *devices: Obj) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": "gpu.example.com", "nodeName": "node-1", "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}, "devices": list(devices)},
    }


def taints(obj: Obj) -> list[list[str] | None]:
    """Each device's taint keys (None: no taints; the server adds timeAdded)."""
    return [[t["key"] for t in d["taints"]] if "taints" in d else None for d in obj["spec"]["devices"]]


def relabelled(client: httpx.Client, name: str, value: str) -> Obj:
    """The stored slice with one label changed: an update that does not touch the gated field."""
    stored = client.get(f"{SLICES}/{name}").json()
    stored["metadata"].setdefault("labels", {})["round"] = value
    return stored


def test_a_field_stored_under_its_gate_survives_updates_with_the_gate_off_and_a_new_use_is_dropped(start_server: Callable[..., ServerProcess]) -> None:
    gate_on = start_server("--feature-gates", gates_flag({Gate.DRADeviceTaints: True}))
    url = gate_on.database_url
    with httpx.Client(base_url=gate_on.url, timeout=30.0) as client:
        response = client.post(SLICES, json=resource_slice("tainted", {"name": "gpu-0", "taints": [TAINT]}, {"name": "gpu-1"}))
        assert response.status_code == 201, response.text
        assert taints(response.json()) == [[KEY], None]
        response = client.post(SLICES, json=resource_slice("clean", {"name": "gpu-0"}))
        assert response.status_code == 201, response.text
    gate_on.stop()

    gate_off = start_server("--feature-gates", gates_flag({Gate.DRADeviceTaints: False}), database_url=url, migrate_first=False)
    with httpx.Client(base_url=gate_off.url, timeout=30.0) as client:
        # Stored while the gate was on: kept through an update that leaves it alone, through
        # one that adds it to another device, and through a merge patch.
        response = client.put(f"{SLICES}/tainted", json=relabelled(client, "tainted", "1"))
        assert response.status_code == 200, response.text
        assert taints(response.json()) == [[KEY], None]
        body = relabelled(client, "tainted", "2")
        body["spec"]["devices"][1]["taints"] = [TAINT]
        response = client.put(f"{SLICES}/tainted", json=body)
        assert response.status_code == 200, response.text
        assert taints(response.json()) == [[KEY], [KEY]]
        patch = {"metadata": {"labels": {"round": "3"}}}
        response = client.patch(f"{SLICES}/tainted", json=patch, headers={"Content-Type": "application/merge-patch+json"})
        assert response.status_code == 200, response.text
        assert taints(response.json()) == [[KEY], [KEY]]
        assert taints(client.get(f"{SLICES}/tainted").json()) == [[KEY], [KEY]]

        # Not used before: a new use is dropped, by update and by create alike.
        body = relabelled(client, "clean", "1")
        body["spec"]["devices"][0]["taints"] = [TAINT]
        response = client.put(f"{SLICES}/clean", json=body)
        assert response.status_code == 200, response.text
        assert taints(response.json()) == [None]
        response = client.post(SLICES, json=resource_slice("new", {"name": "gpu-0", "taints": [TAINT]}))
        assert response.status_code == 201, response.text
        assert taints(response.json()) == [None]
