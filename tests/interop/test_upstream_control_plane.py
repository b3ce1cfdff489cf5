"""Upstream's control plane as devtools.upstream builds and starts it: the binaries report their
release, kube-apiserver serves over TLS and knows each identity's credentials, and upstream's
kube-scheduler and kube-controller-manager start against it and lead."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator

import httpx
import pytest

from devtools import upstream
from tests.interop.upstream import needs_upstream, upstream_binaries
from tests.processes import eventually

pytestmark = needs_upstream


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[upstream.UpstreamControlPlane]:
    upstream_binaries()
    with upstream.UpstreamControlPlane(tmp_path_factory.mktemp("upstream"), nodes=["sim-0"]) as started:
        yield started


def test_the_binaries_report_their_release_and_are_not_rebuilt() -> None:
    directory = upstream_binaries()
    for name in ("kube-apiserver", "kube-scheduler", "kube-controller-manager"):
        out = subprocess.run([str(directory / name), "--version"], capture_output=True, text=True, check=True).stdout
        assert out.strip() == "Kubernetes v1.37.2", out
    etcd = subprocess.run([str(directory / "etcd"), "--version"], capture_output=True, text=True, check=True).stdout
    assert "etcd Version: 3.7.3" in etcd
    built = (directory / "kube-apiserver").stat().st_mtime_ns
    assert upstream.build() == directory
    assert (directory / "kube-apiserver").stat().st_mtime_ns == built


def whoami(plane: upstream.UpstreamControlPlane, options: dict[str, object]) -> dict[str, object]:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    with httpx.Client(**options, timeout=30.0) as client:  # type: ignore[arg-type]
        answer = client.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", json=review)
    answer.raise_for_status()
    return dict(answer.json()["status"]["userInfo"])


def test_each_identity_authenticates_as_upstream_expects(plane: upstream.UpstreamControlPlane) -> None:
    with httpx.Client(**plane.httpx_options(), timeout=30.0) as admin:  # type: ignore[arg-type]
        assert admin.get("/version").json()["gitVersion"] == "v1.37.2"
        assert admin.get("/apis/resource.k8s.io/v1").status_code == 200
    assert whoami(plane, plane.httpx_options("scheduler"))["username"] == "system:kube-scheduler"
    assert whoami(plane, plane.httpx_options("controller"))["username"] == "system:kube-controller-manager"
    node = whoami(plane, {"base_url": plane.url, **plane.credentials.httpx_options("kubeletsim"), "headers": {
        "Authorization": f"Bearer {plane.credentials.token('system:node:sim-0')}"}})  # fmt: skip
    assert node["username"] == "system:node:sim-0"
    assert node["groups"] == ["system:nodes", "system:authenticated"]
    # Without credentials: nothing but the public paths.
    with httpx.Client(base_url=plane.url, verify=ssl.create_default_context(cafile=str(plane.credentials.ca_cert)), timeout=30.0) as anonymous:
        assert anonymous.get("/api/v1/nodes").status_code == 403


def test_kube_scheduler_and_kube_controller_manager_start_and_lead(plane: upstream.UpstreamControlPlane) -> None:
    directory = plane.directory
    with (
        upstream.start_kube_scheduler(plane.kubeconfig("scheduler"), log_path=directory / "kube-scheduler.log"),
        upstream.start_kube_controller_manager(
            plane.kubeconfig("controller-manager"), controllers=["serviceaccount-controller"], log_path=directory / "kube-controller-manager.log"
        ),
        httpx.Client(**plane.httpx_options(), timeout=30.0) as admin,  # type: ignore[arg-type]
    ):

        def holder(name: str) -> str:
            answer = admin.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}")
            return str(answer.json()["spec"].get("holderIdentity") or "") if answer.status_code == 200 else ""

        eventually(lambda: holder("kube-scheduler"), "kube-scheduler leads", timeout=60)
        eventually(lambda: holder("kube-controller-manager"), "kube-controller-manager leads", timeout=60)
        # Its service account controller at work: a new namespace gets its default account.
        assert admin.post("/api/v1/namespaces", json={"metadata": {"name": "team-a"}}).status_code == 201
        eventually(lambda: admin.get("/api/v1/namespaces/team-a/serviceaccounts/default").status_code == 200, "default account made", timeout=60)
