"""The health and version paths are authenticated and authorized like every other path, as on
kube-apiserver: a credential the server cannot accept is 401, an anonymous request is 401 when
anonymous requests are off, and otherwise passes only by the bootstrap binding of
``system:public-info-viewer`` to ``system:unauthenticated`` (which names the bare paths, not each
check's own path)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from devtools.server import ServerProcess
from tests.app.auth.test_authentication import assert_unauthorized
from tests.authcluster import AuthCluster, start_auth_cluster

PUBLIC = ("/healthz", "/livez", "/readyz", "/version", "/version/")
# Every one answers 200 once authorized (upstream serves /version/ itself, no redirect).
SERVED = PUBLIC
BINDINGS = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"


def forbidden_path(user: str, path: str) -> dict[str, object]:
    message = f'forbidden: User "{user}" cannot get path "{path}"'
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": "Forbidden", "details": {}, "code": 403}


def test_an_unknown_token_is_unauthorized(auth_cluster: AuthCluster) -> None:
    with auth_cluster.with_token("not-a-token") as client:
        for path in PUBLIC:
            assert_unauthorized(client.get(path))


def test_anonymous_may_not_read_a_single_check(auth_cluster: AuthCluster, admin: httpx.Client) -> None:
    with auth_cluster.anonymous() as client:
        response = client.get("/readyz/etcd")
    assert response.status_code == 403
    assert response.json() == forbidden_path("system:anonymous", "/readyz/etcd")
    assert (admin.get("/readyz/etcd").status_code, admin.get("/readyz/etcd").text) == (200, "ok")
    with auth_cluster.as_user("prometheus", ("system:monitoring",)) as monitoring:
        assert monitoring.get("/readyz/etcd").status_code == 200


def test_anonymous_probes_pass_by_the_public_info_binding(auth_cluster: AuthCluster, admin: httpx.Client) -> None:
    cluster = auth_cluster
    with cluster.anonymous() as client:
        assert [client.get(path).status_code for path in SERVED] == [200] * len(SERVED)
    binding = admin.get(f"{BINDINGS}/system:public-info-viewer").json()
    assert admin.delete(f"{BINDINGS}/system:public-info-viewer").status_code == 200
    try:
        with cluster.anonymous() as client:
            for path in PUBLIC:
                response = client.get(path)
                assert response.status_code == 403, path
                assert response.json() == forbidden_path("system:anonymous", path)
        # Authenticated users keep them through system:discovery.
        with cluster.node("n1") as node:
            assert [node.get(path).status_code for path in SERVED] == [200] * len(SERVED)
    finally:
        # The server is shared: the binding is put back as it was.
        kept = ("name", "labels", "annotations")
        binding["metadata"] = {key: value for key, value in binding["metadata"].items() if key in kept}
        assert admin.post(BINDINGS, json=binding).status_code == 201
    with cluster.anonymous() as client:
        assert [client.get(path).status_code for path in SERVED] == [200] * len(SERVED)


def test_with_anonymous_requests_off_probes_need_a_credential(start_server: Callable[..., ServerProcess], tmp_path: Path) -> None:
    cluster = start_auth_cluster(start_server, tmp_path, flags=["--anonymous-auth=false"])
    with cluster.anonymous() as anonymous:
        for path in PUBLIC:
            assert_unauthorized(anonymous.get(path))
    with cluster.node("n1") as node:
        assert [node.get(path).status_code for path in SERVED] == [200] * len(SERVED)
