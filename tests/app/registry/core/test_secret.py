"""Secret (core/v1): stringData written into data, upstream's key, size and type rules, immutability."""

from __future__ import annotations

import base64

import httpx

from app.registry.core.secret_validation import MAX_SECRET_BYTES, validate_secret, validate_secret_update
from kube.errors import FORBIDDEN, INVALID, REQUIRED, TOO_LONG
from tests.app.registry.helpers import pairs


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(data: dict[str, str] | None = None, kind: str = "Opaque", **extra: object) -> dict:
    return {"metadata": {"name": "s", "namespace": "ns"}, "type": kind, **({"data": data} if data is not None else {}), **extra}


def test_keys_size_and_type_rules() -> None:
    assert validate_secret(secret({"token": b64("x"), "a.b_c-D": b64("y")})) == []
    assert pairs(validate_secret(secret({"bad/key": b64("x"), "..hidden": b64("y")}))) == [("data[..hidden]", INVALID), ("data[bad/key]", INVALID)]
    too_big = base64.b64encode(b"x" * (MAX_SECRET_BYTES + 1)).decode()
    assert pairs(validate_secret(secret({"big": too_big}))) == [("data", TOO_LONG)]
    assert pairs(validate_secret(secret({"tls.crt": b64("c")}, "kubernetes.io/tls"))) == [("data[tls.key]", REQUIRED)]
    assert pairs(validate_secret(secret({}, "kubernetes.io/service-account-token"))) == [
        ("metadata.annotations[kubernetes.io/service-account.name]", REQUIRED)
    ]


def test_type_and_immutable_data_cannot_change() -> None:
    old = secret({"k": b64("v")}, immutable=True)
    assert pairs(validate_secret_update(secret({"k": b64("v")}, "kubernetes.io/tls", immutable=True), secret({"k": b64("v")}))) == [
        ("data[tls.crt]", REQUIRED), ("data[tls.key]", REQUIRED), ("type", INVALID),
    ]  # fmt: skip
    assert pairs(validate_secret_update(secret({"k": b64("w")}, immutable=True), old)) == [("data", FORBIDDEN)]
    assert pairs(validate_secret_update(secret({"k": b64("v")}, immutable=False), old)) == [("immutable", FORBIDDEN)]


def test_secrets_round_trip(api: httpx.Client, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/secrets"
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "data": {"user": b64("old")}, "stringData": {"user": "admin", "pass": "pw"}}
    created = api.post(path, json=body)
    assert created.status_code == 201, created.text
    stored = created.json()
    assert stored["type"] == "Opaque"
    assert stored["data"] == {"user": b64("admin"), "pass": b64("pw")}
    assert "stringData" not in stored
    assert api.get(f"{path}/creds").json()["data"] == stored["data"]
    table = api.get(path, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Type", "Data", "Age"]
    assert table["rows"][0]["cells"][:3] == ["creds", "Opaque", 2]
    garbled = api.post(path, json={**body, "metadata": {"name": "garbled"}, "data": {"k": "not base64!"}, "stringData": {}})
    assert garbled.status_code == 400
    assert garbled.json()["message"] == 'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 3'
    retyped = api.patch(f"{path}/creds", json={"type": "kubernetes.io/basic-auth"}, headers={"Content-Type": "application/merge-patch+json"})
    assert retyped.status_code == 422 and "type: Invalid value: \"kubernetes.io/basic-auth\": field is immutable" in retyped.json()["message"]
