"""Authentication against a real server: client certificates, static and service account tokens,
anonymous requests, and upstream's 401 for every credential it cannot accept."""

from __future__ import annotations

import time

import httpx
import orjson

from app.auth import jwt
from kube.pki import Authority, new_key
from tests.authcluster import AuthCluster

UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


def whoami(client: httpx.Client) -> httpx.Response:
    return client.post(WHOAMI, json=REVIEW)


def assert_unauthorized(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.json() == UNAUTHORIZED


def service_account(admin: httpx.Client, namespace: str, name: str = "robot") -> dict:
    response = admin.post(f"/api/v1/namespaces/{namespace}/serviceaccounts", json={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    assert response.status_code == 201, response.text
    return response.json()


def request_token(admin: httpx.Client, namespace: str, name: str = "robot", **spec: object) -> dict:
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    response = admin.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def test_client_certificate_names_the_user_and_groups(auth_cluster: AuthCluster) -> None:
    with auth_cluster.as_user("carol", ("team-a", "team-b")) as client:
        response = whoami(client)
    assert response.status_code == 201, response.text
    assert response.json()["status"]["userInfo"] == {"username": "carol", "groups": ["team-a", "team-b", "system:authenticated"]}


def test_a_certificate_from_another_ca_is_unauthorized(auth_cluster: AuthCluster) -> None:
    with auth_cluster.as_user("kubernetes-admin", ("system:masters",), authority=Authority.create("evil")) as client:
        assert_unauthorized(client.get("/api/v1/namespaces"))
        assert_unauthorized(whoami(client))


def test_static_node_token_and_unknown_tokens(auth_cluster: AuthCluster) -> None:
    with auth_cluster.node("n1") as client:
        info = whoami(client).json()["status"]["userInfo"]
    assert info["username"] == "system:node:n1"
    assert info["groups"] == ["system:nodes", "system:authenticated"]
    for token in ("not-a-token", "a.b.c", "eyJhbGciOiJub25lIn0.e30."):
        with auth_cluster.with_token(token) as client:
            assert_unauthorized(client.get("/api/v1/namespaces"))


def test_anonymous_requests_are_system_anonymous(auth_cluster: AuthCluster) -> None:
    with auth_cluster.anonymous() as client:
        assert client.get("/readyz").status_code == 200
        response = client.get("/api/v1/namespaces/default/pods")
    assert response.status_code == 403
    assert response.json()["message"] == 'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "default"'


def test_service_account_token_round_trip(auth_cluster: AuthCluster, admin: httpx.Client, namespace: str) -> None:
    account = service_account(admin, namespace)
    answer = request_token(admin, namespace, expirationSeconds=600)
    assert answer["kind"] == "TokenRequest"
    assert answer["spec"]["expirationSeconds"] == 600
    with auth_cluster.with_token(answer["status"]["token"]) as client:
        info = whoami(client).json()["status"]["userInfo"]
    assert info["username"] == f"system:serviceaccount:{namespace}:robot"
    assert info["uid"] == account["metadata"]["uid"]
    assert info["groups"] == ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"]
    assert info["extra"]["authentication.kubernetes.io/credential-id"][0].startswith("JTI=")


def test_token_request_validation(admin: httpx.Client, namespace: str) -> None:
    service_account(admin, namespace)
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 599}}
    response = admin.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/robot/token", json=body)
    assert response.status_code == 422
    assert response.json()["message"] == 'TokenRequest.authentication.k8s.io "robot" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes'
    missing = admin.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/nobody/token", json={"spec": {}})
    assert missing.status_code == 404


def test_tokens_of_deleted_or_replaced_service_accounts_are_unauthorized(auth_cluster: AuthCluster, admin: httpx.Client, namespace: str) -> None:
    service_account(admin, namespace)
    token = request_token(admin, namespace)["status"]["token"]
    assert admin.delete(f"/api/v1/namespaces/{namespace}/serviceaccounts/robot").status_code == 200
    with auth_cluster.with_token(token) as client:
        assert_unauthorized(whoami(client))
        service_account(admin, namespace)  # the same name again: another uid
        assert_unauthorized(whoami(client))


def test_tokens_bound_to_a_secret_or_pod_stop_working_with_it(auth_cluster: AuthCluster, admin: httpx.Client, namespace: str) -> None:
    service_account(admin, namespace)
    secret = admin.post(f"/api/v1/namespaces/{namespace}/secrets", json={"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "key"}}).json()
    pod_body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "runner"}, "spec": {"serviceAccountName": "robot", "containers": [{"name": "c", "image": "x"}]}}
    pod = admin.post(f"/api/v1/namespaces/{namespace}/pods", json=pod_body).json()
    to_secret = request_token(admin, namespace, boundObjectRef={"apiVersion": "v1", "kind": "Secret", "name": "key", "uid": secret["metadata"]["uid"]})
    to_pod = request_token(admin, namespace, boundObjectRef={"apiVersion": "v1", "kind": "Pod", "name": "runner"})
    assert to_secret["spec"]["boundObjectRef"]["kind"] == "Secret"
    with auth_cluster.with_token(to_secret["status"]["token"]) as by_secret, auth_cluster.with_token(to_pod["status"]["token"]) as by_pod:
        assert whoami(by_secret).status_code == 201
        info = whoami(by_pod).json()["status"]["userInfo"]
        assert info["extra"]["authentication.kubernetes.io/pod-name"] == ["runner"]
        assert info["extra"]["authentication.kubernetes.io/pod-uid"] == [pod["metadata"]["uid"]]
        assert admin.delete(f"/api/v1/namespaces/{namespace}/secrets/key").status_code == 200
        assert_unauthorized(whoami(by_secret))
        admin.post(f"/api/v1/namespaces/{namespace}/secrets", json={"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "key"}})
        assert_unauthorized(whoami(by_secret))  # the same name again is another secret
        assert admin.delete(f"/api/v1/namespaces/{namespace}/pods/runner?gracePeriodSeconds=0").status_code == 200
        assert_unauthorized(whoami(by_pod))


def test_token_requests_bound_to_what_they_cannot_be(admin: httpx.Client, namespace: str) -> None:
    service_account(admin, namespace)
    pod_body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "other"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    assert admin.post(f"/api/v1/namespaces/{namespace}/pods", json=pod_body).status_code == 201
    secret = admin.post(f"/api/v1/namespaces/{namespace}/secrets", json={"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "key"}}).json()
    token = f"/api/v1/namespaces/{namespace}/serviceaccounts/robot/token"

    def bound_to(**ref: str) -> httpx.Response:
        return admin.post(token, json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"boundObjectRef": ref}})

    other_kind = bound_to(apiVersion="v1", kind="ConfigMap", name="x")
    assert (other_kind.status_code, other_kind.json()["message"]) == (400, "cannot bind token to object of type /v1, Kind=ConfigMap")
    other_account = bound_to(apiVersion="v1", kind="Pod", name="other")  # runs as "default"
    assert (other_account.status_code, other_account.json()["message"]) == (
        400, 'cannot bind token for serviceaccount "robot" to pod running with different serviceaccount name.',
    )  # fmt: skip
    replaced = bound_to(apiVersion="v1", kind="Secret", name="key", uid="not-" + secret["metadata"]["uid"])
    assert replaced.status_code == 409
    assert "does not match the UID in record" in replaced.json()["message"]
    assert bound_to(apiVersion="v1", kind="Secret", name="missing").status_code == 404


def _forged(auth_cluster: AuthCluster, account: dict, key: jwt.PrivateKey | None = None, **changes: object) -> str:
    now = int(time.time())
    meta = account["metadata"]
    claims = {
        "aud": ["https://kubernetes.default.svc.cluster.local"],
        "exp": now + 600,
        "iat": now,
        "nbf": now,
        "iss": "https://kubernetes.default.svc.cluster.local",
        "jti": "forged",
        "kubernetes.io": {"namespace": meta["namespace"], "serviceaccount": {"name": meta["name"], "uid": meta["uid"]}},
        "sub": f"system:serviceaccount:{meta['namespace']}:{meta['name']}",
        **changes,
    }
    return jwt.sign(claims, key or jwt.load_private_key(auth_cluster.credentials.service_account_key))


def test_expired_wrong_audience_wrong_issuer_and_wrongly_signed_tokens_are_unauthorized(
    auth_cluster: AuthCluster, admin: httpx.Client, namespace: str
) -> None:
    account = service_account(admin, namespace)
    with auth_cluster.with_token(_forged(auth_cluster, account)) as client:
        assert whoami(client).status_code == 201  # the control: a well-formed token of ours works
    now = int(time.time())
    bad = [
        _forged(auth_cluster, account, exp=now - 10),
        _forged(auth_cluster, account, aud=["https://elsewhere.example"]),
        _forged(auth_cluster, account, iss="https://elsewhere.example"),
        _forged(auth_cluster, account, key=new_key()),
    ]
    header, payload, signature = _forged(auth_cluster, account).split(".")
    tampered = orjson.loads(jwt._unb64url(payload))
    tampered["sub"] = "system:serviceaccount:kube-system:admin"
    bad.append(f"{header}.{jwt.b64url(orjson.dumps(tampered))}.{signature}")
    for token in bad:
        with auth_cluster.with_token(token) as client:
            assert_unauthorized(whoami(client))


def test_audit_log_has_a_metadata_line_per_request(auth_cluster: AuthCluster, admin: httpx.Client, namespace: str) -> None:
    assert admin.get(f"/api/v1/namespaces/{namespace}/pods/missing").status_code == 404
    deadline = time.monotonic() + 5
    while True:
        lines = [orjson.loads(line) for line in auth_cluster.audit_log.read_bytes().splitlines()]
        found = [e for e in lines if e.get("objectRef", {}).get("namespace") == namespace and e["verb"] == "get"]
        if found or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    event = found[-1]
    assert event["level"] == "Metadata" and event["stage"] == "ResponseComplete"
    assert event["user"]["username"] == "kubernetes-admin"
    assert event["objectRef"] == {"resource": "pods", "namespace": namespace, "name": "missing", "apiGroup": "", "apiVersion": "v1"}
    assert event["responseStatus"]["code"] == 404
