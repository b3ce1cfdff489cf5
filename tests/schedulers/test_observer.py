"""The observing scheduler on its own: what it checks before it watches (version, DRA's v1 API,
every permission it needs, each named), the scheduler names it follows, the explanation of a gated
pod as if ungated, and where it records itself for kubectl dra (the kubeconfig extension).
Against upstream's control plane: tests/interop/test_observer_on_upstream.py."""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path

import httpx
import orjson
import pytest

from kube.client import KubeClient
from kube.dra.explanations import KUBECONFIG_EXTENSION
from kube.httpserve import Request
from kube.kubeconfig import kubeconfig_text, load_kubeconfig_context
from kubectl_dra.session import CommandError, Session, recorded_scheduler, scheduler_url
from schedulers.app import build_parser, check_flags
from schedulers.explain import GATED, OTHER_SCHEDULER, SCHEDULABLE
from schedulers.explainserver import ExplainServer
from schedulers.observer import ObserveError, Observer, preflight, record_in_kubeconfig
from tests.schedulers import cluster as c
from tests.schedulers.test_explainserver import Auth, ask

RESOURCE_V1_NAMES = ("resourceclaims", "resourceslices", "deviceclasses", "devicetaintrules")
RESOURCE_V1 = {"kind": "APIResourceList", "resources": [{"name": n} for n in RESOURCE_V1_NAMES]}


def forbidden(request: httpx.Request) -> httpx.Response:
    plural = request.url.path.rsplit("/", 1)[-1]
    message = f'{plural} is forbidden: User "observer" cannot list resource "{plural}" at the cluster scope'
    return httpx.Response(403, json={"kind": "Status", "status": "Failure", "code": 403, "reason": "Forbidden", "message": message})


def cluster_api(
    version: tuple[str, str] = ("1", "37"), *, resource_v1: bool = True, taint_rules_v1: bool = True, refused: tuple[str, ...] = ()
) -> tuple[KubeClient, list[str]]:
    """A stand-in API server; returns a client of it and the methods and paths it was asked."""
    asked: list[str] = []
    served = RESOURCE_V1 if taint_rules_v1 else {**RESOURCE_V1, "resources": [{"name": n} for n in RESOURCE_V1_NAMES if n != "devicetaintrules"]}

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(f"{request.method} {request.url.path}")
        path = request.url.path
        if path == "/version":
            return httpx.Response(200, json={"major": version[0], "minor": version[1], "gitVersion": f"v{version[0]}.{version[1]}.0"})
        if path == "/apis/resource.k8s.io/v1":
            return httpx.Response(200, json=served) if resource_v1 else httpx.Response(404, json={"kind": "Status", "code": 404, "reason": "NotFound"})
        if path.rsplit("/", 1)[-1] in refused:
            return forbidden(request)
        if request.url.params.get("watch"):
            return httpx.Response(200, content=b"")
        return httpx.Response(200, json={"kind": "List", "metadata": {"resourceVersion": "1"}, "items": []})

    return KubeClient("http://cluster", user_agent="test", transport=httpx.MockTransport(handler)), asked


async def test_a_cluster_older_than_v1_34_is_refused_with_its_version() -> None:
    client, _ = cluster_api(("1", "33"))
    with pytest.raises(ObserveError) as refused:
        await preflight(client, Observer(client).cache)
    assert str(refused.value) == (
        "the cluster runs Kubernetes v1.33.0; the observer needs v1.34 or later (Dynamic Resource Allocation's resource.k8s.io/v1 API)"
    )


async def test_a_cluster_without_resource_v1_is_refused() -> None:
    client, _ = cluster_api(("1", "35"), resource_v1=False)
    with pytest.raises(ObserveError) as refused:
        await preflight(client, Observer(client).cache)
    assert str(refused.value).startswith("the cluster (v1.35.0) does not serve resource.k8s.io/v1")


async def test_every_missing_permission_is_named_in_one_error_and_nothing_is_written() -> None:
    client, asked = cluster_api(refused=("devicetaintrules", "namespaces"))
    with pytest.raises(ObserveError) as refused:
        await preflight(client, Observer(client).cache)
    message = str(refused.value)
    assert message.splitlines() == [
        "the observer cannot read what it watches (it needs get, list and watch on each):",
        '  devicetaintrules is forbidden: User "observer" cannot list resource "devicetaintrules" at the cluster scope',
        '  namespaces is forbidden: User "observer" cannot list resource "namespaces" at the cluster scope',
        "grant them, for instance: kubectl apply -f examples/observer/rbac.yaml",
    ]
    assert {entry.split()[0] for entry in asked} == {"GET"}


async def test_a_cluster_it_may_read_passes() -> None:
    client, asked = cluster_api()
    observer = Observer(client)
    await preflight(client, observer.cache)
    # Each kind listed and watched once.
    assert sum(1 for a in asked if a == "GET /apis/resource.k8s.io/v1/devicetaintrules") == 2


async def test_a_v1_34_cluster_without_v1_device_taint_rules_is_observed_without_them() -> None:
    # DeviceTaintRule is not in resource.k8s.io/v1 before v1.36: there are no rules to honour.
    client, asked = cluster_api(("1", "34"), taint_rules_v1=False)
    observer = Observer(client)
    await preflight(client, observer.cache)
    assert observer.cache.taint_rules not in observer.cache.informers
    assert not any("devicetaintrules" in a for a in asked)


async def test_it_follows_every_scheduler_name_it_is_given() -> None:
    observer = Observer(KubeClient("http://127.0.0.1:9", user_agent="test"), followed=["default-scheduler", "gpu-scheduler"])
    assert observer.cache.follows("default-scheduler") and observer.cache.follows("gpu-scheduler") and not observer.cache.follows("other")
    cluster = c.Cluster()
    cluster.cache = observer.cache
    await cluster.topology({"a": 2})
    for informer in observer.cache.informers:
        informer._synced.set()
    server = ExplainServer(Auth(), check_pods=False)
    server.scheduler = observer
    await cluster.put(observer.cache.pods, c.pod("theirs", schedulerName="other"))
    await cluster.put(observer.cache.pods, c.pod("mine", schedulerName="gpu-scheduler"))
    code, body = await ask(server, "/explain/namespaces/default/pods/theirs")
    assert code == 200 and body["state"] == OTHER_SCHEDULER
    assert body["message"] == "the pod asks for scheduler 'other'; this is 'default-scheduler', 'gpu-scheduler'"
    code, body = await ask(server, "/explain/namespaces/default/pods/mine")
    assert code == 200 and body["state"] == SCHEDULABLE


async def test_a_gated_pod_is_explained_as_if_its_gates_were_removed_when_asked() -> None:
    cluster = c.Cluster()
    observer = Observer(KubeClient("http://127.0.0.1:9", user_agent="test"))
    cluster.cache = observer.cache
    await cluster.topology({"a": 1, "b": 1, "c": 0, "d": 0})
    for informer in observer.cache.informers:
        informer._synced.set()
    await cluster.put(observer.cache.claims, c.claim("one"))
    await cluster.put(observer.cache.pods, c.pod("held", claims=["one"], schedulingGates=[{"name": "example.com/wait"}]))
    server = ExplainServer(Auth(), check_pods=False)
    server.scheduler = observer
    code, body = await ask(server, "/explain/namespaces/default/pods/held")
    assert code == 200 and body["state"] == GATED
    response = await server.handle(Request("GET", "/explain/namespaces/default/pods/held", {"ifUngated": "true", "nodes": "all"}, {"authorization": "Bearer alice"}))
    code, body = response.status, orjson.loads(response.body)
    assert code == 200 and body["state"] == SCHEDULABLE and body["gates"] == ["example.com/wait"]
    assert body["nodes"]["fitting"] == ["a", "b"] and sum(g["count"] for g in body["groups"]) == 2


def test_the_observers_flags() -> None:
    def problem(*argv: str) -> str | None:
        return check_flags(build_parser().parse_args(list(argv)))

    assert problem("--observe") is None
    assert problem("--observe", "--follow", "a", "--follow", "b") is None
    assert problem("--follow", "a") == "--follow, --as, --as-group and --record-in-kubeconfig go with --observe"
    assert problem("--as", "u", "--explain-port", "1") == "--follow, --as, --as-group and --record-in-kubeconfig go with --observe"
    assert problem("--observe", "--record-in-kubeconfig") == "--record-in-kubeconfig needs --kubeconfig"
    assert problem("--observe", "--as-group", "g") == "--as-group needs --as"


def test_record_in_kubeconfig_is_where_kubectl_dra_finds_the_observer(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(kubeconfig_text("https://127.0.0.1:6443", b"API CA", token="t"))
    path.chmod(0o600)
    assert record_in_kubeconfig(path, "https://127.0.0.1:10260", b"OBSERVER CA") == "dra"
    record_in_kubeconfig(path, "https://127.0.0.1:10261", b"OBSERVER CA 2")  # again: replaced, not added
    context = load_kubeconfig_context([path])
    assert context.extensions[KUBECONFIG_EXTENSION] == {"url": "https://127.0.0.1:10261", "certificate-authority-data": base64.b64encode(b"OBSERVER CA 2").decode()}
    assert context.connection.ca_data == b"API CA" and path.stat().st_mode & 0o777 == 0o600
    assert recorded_scheduler(context.extensions) == ("https://127.0.0.1:10261", b"OBSERVER CA 2")
    with pytest.raises(ObserveError, match="no context named 'nope'"):
        record_in_kubeconfig(path, "https://x", None, context="nope")


async def test_kubectl_dra_takes_the_recorded_url_before_the_lease(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(kubeconfig_text("https://127.0.0.1:6443", None, token="t"))
    record_in_kubeconfig(path, "https://observer:10260/", None)

    def no_lease(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"the Lease was read: {request.url}")

    client = KubeClient("http://cluster", user_agent="test", transport=httpx.MockTransport(no_lease))
    session = Session(load_kubeconfig_context([path]), "default", "")
    assert await scheduler_url(session, client) == "https://observer:10260"
    assert await scheduler_url(Session(session.context, "default", "https://given:1"), client) == "https://given:1"
    bad = Session(dataclasses.replace(session.context, extensions={KUBECONFIG_EXTENSION: {"url": "u", "certificate-authority-data": "%%"}}), "default", "")
    with pytest.raises(CommandError, match="certificate-authority-data is not base64"):
        await scheduler_url(bad, client)


async def test_an_unreachable_server_is_one_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    client = KubeClient("https://cluster:6443", user_agent="test", transport=httpx.MockTransport(refuse))
    with pytest.raises(ObserveError, match=r"^cannot reach the API server at https://cluster:6443: connection refused$"):
        await preflight(client, Observer(client).cache)
