"""decode_json's first look at a body's apiVersion and kind (keys in any case), as Go reads them."""

from __future__ import annotations

import pytest

from app.api import bodies
from kube.errors import ApiError

START = "the object provided is unrecognized (must be of type ResourceClaim): couldn't get version/kind; json parse error: json: cannot unmarshal"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"a"}}',
        b'{"apiVersion":null,"kind":null}',
        b'{"APIVERSION":"x","KiNd":"y","spec":{"kind":5}}',
        b'{"metadata":{"kind":5},"apiversions":5,"kinds":[1]}',
        b"[1,2]",
    ],
)
def test_bodies_go_reads(raw: bytes) -> None:
    bodies.decode_json(raw, "ResourceClaim")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"kind":5}', "number into Go struct field .kind of type string"),
        (b'{"Kind":["ResourceClaim"]}', "array into Go struct field .kind of type string"),
        (b'{"apiversion":true}', "bool into Go struct field .apiVersion of type string"),
        (b'{"APIVERSION":{}}', "object into Go struct field .apiVersion of type string"),
        (b'{"kind":1e400}', "number into Go struct field .kind of type string"),
        (b'{"spec":{},"kind":"ResourceClaim","apiVersion":2}', "number into Go struct field .apiVersion of type string"),
    ],
)
def test_bodies_go_refuses(raw: bytes, message: str) -> None:
    with pytest.raises(ApiError) as refused:
        bodies.decode_json(raw, "ResourceClaim")
    assert refused.value.code == 400
    assert f"{START} {message}" in refused.value.message
