"""Decoding the protobuf bodies ``kubectl create namespace`` sends."""

from __future__ import annotations

import pytest

from app.api.protobuf import MAGIC, decode_k8s_protobuf

# Observed from kubectl for `kubectl create namespace foo-29281` (kubectl 1.37).
OBSERVED = (
    b'k8s\x00\n\x0f\n\x02v1\x12\tNamespace\x12!\n\x19\n\tfoo-29281\x12\x00\x1a\x00"\x00*\x002\x008\x00B\x00'
    b'\x12\x00\x1a\x02\n\x00\x1a\x00"\x00'
)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _envelope(raw: bytes, api_version: str = "v1", kind: str = "Namespace", encoding: str = "") -> bytes:
    type_meta = _field(1, api_version) + _field(2, kind)
    return MAGIC + _field(1, type_meta) + _field(2, raw) + _field(3, encoding) + _field(4, "")


def test_observed_kubectl_body() -> None:
    assert decode_k8s_protobuf(OBSERVED) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "foo-29281"},
        "spec": {},
        "status": {},
    }


def test_labels_annotations_generate_name_and_finalizers() -> None:
    meta = (
        _field(2, "team-")
        + _field(11, _field(1, "a") + _field(2, "1"))
        + _field(11, _field(1, "b") + _field(2, ""))
        + _field(12, _field(1, "note") + _field(2, "hello"))
        + _varint(7 << 3)
        + _varint(3)  # generation: server-set, ignored
    )
    spec = _field(1, "kubernetes")
    obj = decode_k8s_protobuf(_envelope(_field(1, meta) + _field(2, spec)))
    assert obj == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"generateName": "team-", "labels": {"a": "1", "b": ""}, "annotations": {"note": "hello"}},
        "spec": {"finalizers": ["kubernetes"]},
    }


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b'{"kind":"Namespace"}',
        OBSERVED[:-3],  # truncated inside a field
        MAGIC + b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # endless varint
        _envelope(_field(1, _field(1, "cm")), kind="ConfigMap"),
        _envelope(_field(1, _field(1, "x")), encoding="gzip"),
        _envelope(_field(1, _field(13, _field(1, "v1")))),  # ownerReferences would be dropped
        _envelope(_field(1, b"\x0b")),  # wire type 3 (groups)
    ],
)
def test_rejects_what_it_cannot_decode(body: bytes) -> None:
    with pytest.raises(ValueError):
        decode_k8s_protobuf(body)


def test_a_review_body_keeps_its_spec_and_drops_the_status_the_client_sent() -> None:
    attributes = _field(2, "get") + _field(5, "pods") + _field(1, "")
    spec = _field(1, attributes) + _field(2, _field(1, "/healthz") + _field(2, "get"))
    status = _field(1, "anything")
    body = _envelope(_field(1, b"") + _field(2, spec) + _field(3, status), "authorization.k8s.io/v1", "SelfSubjectAccessReview")
    assert decode_k8s_protobuf(body) == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "metadata": {},
        "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}, "nonResourceAttributes": {"path": "/healthz", "verb": "get"}},
    }
    whoami = _envelope(_field(1, b"") + _field(2, _field(1, "ignored")), "authentication.k8s.io/v1", "SelfSubjectReview")
    assert decode_k8s_protobuf(whoami) == {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview", "metadata": {}}
