"""Protobuf over HTTP, as upstream's clients speak it: bodies of any kind, answers negotiated from
the Accept header (objects, lists, Status errors, watch frames), and bad bodies refused with a 400
Status that leaves nothing stored. Runs on SQLite and Postgres; the bytes themselves are checked
against Go in tests/interop/test_protobuf_go.py."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import orjson
import pytest

from app import protobuf
from app.api import bodies, schemas
from app.api import protobuf as api_protobuf
from app.protobuf import MAGIC
from app.registry import ALL_KINDS, lookup
from app.storage.cache import StoredObject
from tests.helpers import claim, claims_path

PROTOBUF = "application/vnd.kubernetes.protobuf"
# What client-go sends when its content type is protobuf.
CLIENT_GO_ACCEPT = "application/vnd.kubernetes.protobuf, */*"
PB_HEADERS = {"content-type": PROTOBUF, "accept": CLIENT_GO_ACCEPT}


def _claim(ns: str, name: str) -> dict[str, Any]:
    return {**claim(name), "metadata": {"name": name, "namespace": ns}}


def _read(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"] == PROTOBUF, response.content[:200]
    return protobuf.decode_object(response.content)


def _as_go(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as Go holds it (its zero-valued fields filled in): what a JSON answer and a
    protobuf answer of one object have in common."""
    return protobuf.decode_object(protobuf.encode_object(obj))


def test_every_served_kind_and_its_list_has_a_message() -> None:
    missing = [f"{k.api_version}/{k.kind}" for k in ALL_KINDS if protobuf.schema().message_for(k.api_version, k.kind) is None]
    missing += [f"{k.api_version}/{k.list_kind}" for k in ALL_KINDS if k.stored and protobuf.schema().message_for(k.api_version, k.list_kind) is None]
    assert missing == []


def test_create_get_update_delete_in_protobuf(api: httpx.Client, ns: str) -> None:
    body = protobuf.encode_object(_claim(ns, "pb"))
    created = api.post(claims_path(ns), content=body, headers=PB_HEADERS)
    assert created.status_code == 201, created.content
    obj = _read(created)
    assert obj["kind"] == "ResourceClaim" and obj["apiVersion"] == "resource.k8s.io/v1"
    assert obj["spec"]["devices"]["requests"][0]["exactly"] == {"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}
    # The same object in JSON: the two answers are one object.
    as_json = api.get(claims_path(ns, "pb")).json()
    assert _read(api.get(claims_path(ns, "pb"), headers={"accept": PROTOBUF})) == _as_go(as_json)

    changed = copy.deepcopy(as_json)
    changed["metadata"]["labels"] = {"team": "a"}
    updated = api.put(claims_path(ns, "pb"), content=protobuf.encode_object(changed), headers=PB_HEADERS)
    assert updated.status_code == 200, updated.content
    assert _read(updated)["metadata"]["labels"] == {"team": "a"}

    # client-go sends its DeleteOptions in the client's content type, typed in the client's group.
    options = protobuf.envelope(
        "resource.k8s.io/v1", "DeleteOptions", protobuf.encode({"preconditions": {"uid": as_json["metadata"]["uid"]}}, protobuf.schema().message_for("meta.k8s.io/v1", "DeleteOptions"))  # type: ignore[arg-type]
    )
    deleted = api.request("DELETE", claims_path(ns, "pb"), content=options, headers=PB_HEADERS)
    assert deleted.status_code == 200, deleted.content
    assert _read(deleted)["metadata"]["name"] == "pb"
    assert api.get(claims_path(ns, "pb")).status_code == 404


def test_errors_are_status_objects_in_protobuf(api: httpx.Client, ns: str) -> None:
    missing = api.get(claims_path(ns, "nothing"), headers={"accept": PROTOBUF})
    assert missing.status_code == 404
    status = _read(missing)
    assert (status["kind"], status["apiVersion"], status["status"], status["reason"], status["code"]) == ("Status", "v1", "Failure", "NotFound", 404)
    assert status["message"] == 'resourceclaims.resource.k8s.io "nothing" not found'
    assert status["details"] == {"name": "nothing", "group": "resource.k8s.io", "kind": "resourceclaims"}


def test_lists_in_protobuf_small_and_streamed(api: httpx.Client, ns: str) -> None:
    # Enough items that the answer goes out in pieces (256 KiB each).
    bulky = {"bulk": "x" * 60_000}
    for i in range(6):
        item = _claim(ns, f"c{i}")
        item["metadata"]["annotations"] = bulky
        assert api.post(claims_path(ns), json=item).status_code == 201
    as_json = api.get(claims_path(ns)).json()
    answer = api.get(claims_path(ns), headers={"accept": CLIENT_GO_ACCEPT})
    listed = _read(answer)
    assert listed["kind"] == "ResourceClaimList"
    # A LIST answers the newest revision: the server's own writes (its identity lease) may move it
    # between the two GETs, never back.
    assert int(listed["metadata"]["resourceVersion"]) >= int(as_json["metadata"]["resourceVersion"])
    # Items carry no kind in protobuf (nor do a list's items in upstream's JSON).
    assert listed["items"] == [{k: v for k, v in _as_go(item).items() if k not in ("kind", "apiVersion")} for item in as_json["items"]]
    limited = _read(api.get(claims_path(ns), params={"limit": "2"}, headers={"accept": PROTOBUF}))
    assert len(limited["items"]) == 2 and limited["metadata"]["continue"]


def test_watch_in_protobuf_frames(api: httpx.Client, ns: str) -> None:
    assert api.post(claims_path(ns), json=_claim(ns, "w")).status_code == 201
    with api.stream("GET", claims_path(ns), params={"watch": "true", "timeoutSeconds": "1", "allowWatchBookmarks": "true"}, headers={"accept": CLIENT_GO_ACCEPT}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/vnd.kubernetes.protobuf;stream=watch"
        stream = response.read()
    events = [(kind, protobuf.decode_object(obj)) for kind, obj in protobuf.read_watch_events(stream)]
    assert [(kind, obj["kind"], obj["metadata"]["name"]) for kind, obj in events if kind != "BOOKMARK"] == [("ADDED", "ResourceClaim", "w")]
    # A bookmark (one may come within the second) is a claim with only a resourceVersion.
    assert all(obj["kind"] == "ResourceClaim" and obj["metadata"]["resourceVersion"] for kind, obj in events if kind == "BOOKMARK")


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("application/vnd.kubernetes.protobuf", PROTOBUF),
        ("application/vnd.kubernetes.protobuf, */*", PROTOBUF),
        ("application/json;q=0.5, application/vnd.kubernetes.protobuf", PROTOBUF),
        ("application/vnd.kubernetes.protobuf;q=0.5, application/json", "application/json"),
        ("application/json, application/vnd.kubernetes.protobuf", "application/json"),
        # a protobuf Table is not served: the next entry decides
        ("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, application/vnd.kubernetes.protobuf", PROTOBUF),
        ("*/*", "application/json"),
    ],
)
def test_accept_lists_choose_as_upstream(api: httpx.Client, ns: str, accept: str, expected: str) -> None:
    assert api.post(claims_path(ns), json=_claim(ns, "a")).status_code == 201
    response = api.get(claims_path(ns, "a"), headers={"accept": accept})
    assert response.status_code == 200
    assert response.headers["content-type"] == expected


def test_partial_object_metadata_list_in_protobuf(api: httpx.Client, ns: str) -> None:
    assert api.post(claims_path(ns), json=_claim(ns, "m")).status_code == 201
    # client-go's metadata client (the garbage collector's and namespace controller's informers).
    accept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
    listed = _read(api.get(claims_path(ns), headers={"accept": accept}))
    assert listed["kind"] == "PartialObjectMetadataList" and listed["apiVersion"] == "meta.k8s.io/v1"
    assert [item["metadata"]["name"] for item in listed["items"]] == ["m"]
    assert "spec" not in listed["items"][0]


def test_a_binding_in_protobuf_binds(api: httpx.Client, ns: str) -> None:
    node = f"{ns}-node"
    assert api.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}).status_code == 201
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    assert api.post(f"/api/v1/namespaces/{ns}/pods", json=pod).status_code == 201
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "namespace": ns}, "target": {"kind": "Node", "name": node}}
    bound = api.post(f"/api/v1/namespaces/{ns}/pods/p/binding", content=protobuf.encode_object(binding), headers=PB_HEADERS)
    assert bound.status_code == 201, bound.content
    assert _read(bound)["status"] == "Success"
    assert api.get(f"/api/v1/namespaces/{ns}/pods/p").json()["spec"]["nodeName"] == node
    api.delete(f"/api/v1/nodes/{node}")


def _bad(raw_message: bytes, kind: str = "ResourceClaim", api_version: str = "resource.k8s.io/v1") -> bytes:
    return protobuf.envelope(api_version, kind, raw_message)


GOOD = protobuf.encode(claim("bad"), protobuf.schema().kinds[("resource.k8s.io/v1", "ResourceClaim")])
UNRECOGNIZED = "the object provided is unrecognized (must be of type ResourceClaim): "
CANNOT = 'ResourceClaim in version "v1" cannot be handled as a ResourceClaim: '


def _nested(depth: int) -> bytes:
    nested = b""
    for _ in range(depth):
        out = bytearray(b"\x0a")
        protobuf.put_varint(out, len(nested))
        nested = bytes(out) + nested
    return nested


def _with_time_seconds(message: bytes, seconds: int) -> bytes:
    """``message`` and a second metadata part holding only a creationTimestamp of ``seconds``
    (protobuf merges the parts): a time Go holds whose RFC 3339 text has no four-digit year."""
    timestamp = b"\x08" + _varint(seconds)
    meta = b"\x42" + _varint(len(timestamp)) + timestamp
    return message + b"\x0a" + _varint(len(meta)) + meta


def _varint(value: int) -> bytes:
    out = bytearray()
    protobuf.put_varint(out, value)
    return bytes(out)


def _claim_with_parameters(parameters: Any) -> bytes:
    body = claim("bad")
    body["spec"]["devices"]["config"] = [{"opaque": {"driver": "gpu.example.com", "parameters": parameters}}]
    return protobuf.encode(body, protobuf.schema().kinds[("resource.k8s.io/v1", "ResourceClaim")])


def _claim_with_managed_fields(fields: Any) -> bytes:
    body = claim("bad")
    entry = {"manager": "m", "operation": "Update", "apiVersion": "resource.k8s.io/v1", "fieldsType": "FieldsV1", "fieldsV1": fields}
    body["metadata"]["managedFields"] = [entry, {**entry, "manager": "n", "fieldsV1": {"f:spec": {}}}]
    return protobuf.encode(body, protobuf.schema().kinds[("resource.k8s.io/v1", "ResourceClaim")])


def _nested_objects(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"k8s", UNRECOGNIZED + "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0] (6b3873)"),
        (b"K8S\x00" + GOOD, UNRECOGNIZED + "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0] ("),
        (MAGIC, UNRECOGNIZED + "empty body (6b387300)"),
        (_bad(GOOD)[:-10], UNRECOGNIZED + "unexpected EOF ("),  # a truncated frame
        (MAGIC + b"\x12\xff\x01" + GOOD, UNRECOGNIZED + "unexpected EOF ("),  # a length past the body
        (_bad(b"\x0a\x05\x0a\x40abc"), CANNOT + "unexpected EOF"),  # a name longer than metadata
        (_bad(b"\x08\x01"), CANNOT + "proto: wrong wireType = 0 for field ResourceClaim.metadata"),
        (_bad(_nested(10_000)), None),  # nested past the schema: a name of nesting bytes, not a valid one
        # A year past 9999 or before 1000 has no RFC 3339 text: refused as the JSON of it would be.
        (_bad(_with_time_seconds(GOOD, 253402300800)), CANNOT + 'parsing time "10000-01-01T00:00:00Z" as "2006-01-02T15:04:05Z07:00"'),
        (_bad(_with_time_seconds(GOOD, -30610224001)), CANNOT + 'parsing time "999-12-31T23:59:59Z" as "2006-01-02T15:04:05Z07:00"'),
        # Raw JSON nested deeper than a JSON body may be, inside the claim's opaque parameters.
        (_bad(_claim_with_parameters(_nested_objects(95))), "the request body is nested deeper than 100 levels"),
        (_bad(_claim_with_managed_fields(_nested_objects(120))), "the request body is nested deeper than 100 levels"),  # and a managedFields entry's
        (_bad(GOOD, kind="Pod", api_version="v1"), "the API version in the data (v1) does not match the expected API version (resource.k8s.io/v1)"),
        (_bad(GOOD, kind="DeviceClass"), 'DeviceClass in version "v1" cannot be handled as a ResourceClaim: converting (v1.DeviceClass) to (resource.ResourceClaim): unknown conversion'),
        (_bad(GOOD, kind="NoSuchKind"), 'NoSuchKind in version "v1" cannot be handled as a ResourceClaim: no kind "NoSuchKind" is registered for version "resource.k8s.io/v1" in scheme "pkg/api/legacyscheme/scheme.go:30"'),
    ],
)
def test_bad_protobuf_bodies_are_refused_and_nothing_is_stored(api: httpx.Client, ns: str, body: bytes, message: str | None) -> None:
    before = api.get(claims_path(ns)).json()["items"]
    response = api.post(claims_path(ns), content=body, headers=PB_HEADERS)
    assert 400 <= response.status_code < 500, response.content
    status = _read(response)
    if message is None:
        assert status["code"] in (400, 422)
    else:
        assert status["code"] == 400 and status["reason"] == "BadRequest"
        assert status["message"].startswith(message), status["message"]
    assert api.get(claims_path(ns)).json()["items"] == before


def test_raw_json_just_within_the_depth_limit_is_taken(api: httpx.Client, ns: str) -> None:
    # The claim's own nesting (object, spec, devices, config list, entry, opaque) and 94 levels of
    # objects: 100 in all, as deep as a body may be.
    response = api.post(claims_path(ns), content=_bad(_claim_with_parameters(_nested_objects(94))), headers=PB_HEADERS)
    assert response.status_code == 201, response.content


def test_unknown_fields_are_dropped_as_upstream_drops_them(api: httpx.Client, ns: str) -> None:
    # Field 99 of a claim does not exist: upstream's decoder skips it (strict decoding does not
    # apply to protobuf), and so does this server, even when strict validation is asked for.
    extra = bytes([0x9A, 0x06, 0x03]) + b"abc"
    response = api.post(claims_path(ns), params={"fieldValidation": "Strict"}, content=_bad(GOOD + extra), headers=PB_HEADERS)
    assert response.status_code == 201, response.content
    assert _read(response)["metadata"]["name"] == "bad"


def test_an_update_from_a_go_client_is_the_same_spec(api: httpx.Client, ns: str) -> None:
    # kube-scheduler adds its finalizer to a claim by updating the object it holds: decoded into
    # Go types, a toleration's empty key (omitempty) is gone. Upstream compares Go values, so the
    # immutable spec is unchanged; this server did refuse it ("spec: field is immutable").
    created = _claim(ns, "go-update")
    created["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [{"key": "", "operator": "Equal", "value": "v"}]
    assert api.post(claims_path(ns), json=created).status_code == 201
    held = _read(api.get(claims_path(ns, "go-update"), headers={"accept": PROTOBUF}))
    assert "key" not in held["spec"]["devices"]["requests"][0]["exactly"]["tolerations"][0]
    held["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    updated = api.put(claims_path(ns, "go-update"), content=protobuf.encode_object(held), headers=PB_HEADERS)
    assert updated.status_code == 200, updated.content
    assert _read(updated)["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    # A real change of the spec is still refused.
    held = _read(updated)
    held["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    refused = _read(api.put(claims_path(ns, "go-update"), content=protobuf.encode_object(held), headers=PB_HEADERS))
    assert (refused["code"], refused["reason"]) == (422, "Invalid")
    assert "spec: Invalid value" in refused["message"] and refused["message"].endswith("field is immutable")


@pytest.mark.parametrize("in_protobuf", [False, True], ids=["json", "protobuf"])
def test_a_body_of_another_kind_is_refused_as_upstream_does(api: httpx.Client, ns: str, in_protobuf: bool) -> None:
    # Upstream decodes the body's own kind, then fails to convert it to the endpoint's.
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "other"}, "spec": {}}
    content, content_type = (protobuf.encode_object(body), PROTOBUF) if in_protobuf else (orjson.dumps(body), "application/json")
    response = api.post(claims_path(ns), content=content, headers={"content-type": content_type})
    assert response.status_code == 400
    status = _read(response) if in_protobuf and response.headers["content-type"] == PROTOBUF else response.json()
    assert status["message"] == 'DeviceClass in version "v1" cannot be handled as a ResourceClaim: converting (v1.DeviceClass) to (resource.ResourceClaim): unknown conversion'


def test_a_long_list_goes_out_in_pieces_each_ending_at_the_item_that_fills_it() -> None:
    """A protobuf list is one envelope cut into pieces (chunks on the wire); each piece ends at
    the first item that takes it to the piece size, items kept encoded or not alike."""
    strategy = lookup("resource.k8s.io", "v1", "resourceclaims")
    assert strategy is not None
    message = protobuf.schema().kinds[("resource.k8s.io/v1", "ResourceClaim")]
    objs = [{**claim(f"c{i}"), "metadata": {"name": f"c{i}", "namespace": "n", "annotations": {"bulk": "x" * (97 * i)}}} for i in range(40)]
    items: list[Any] = [StoredObject(obj, i + 1) if i % 2 else obj for i, obj in enumerate(objs)]
    meta = {"resourceVersion": "41"}
    sizes = [len(b"\x12" + protobuf.varint(len(encoded)) + encoded) for encoded in (protobuf.encode(obj, message) for obj in objs)]
    (whole,) = api_protobuf.list_pieces(strategy, items, meta, 1 << 30)
    assert [item["metadata"]["name"] for item in protobuf.decode_object(whole)["items"]] == [f"c{i}" for i in range(40)]
    opening = len(protobuf.envelope_head("resource.k8s.io/v1", "ResourceClaimList", len(whole)))
    head = len(whole) - opening - sum(sizes) - len(protobuf.ENVELOPE_TAIL)
    for piece_bytes in (1, 900, 4096, 30_000, len(whole) - opening - len(protobuf.ENVELOPE_TAIL)):
        pieces = list(api_protobuf.list_pieces(strategy, items, meta, piece_bytes))
        assert b"".join(pieces) == whole
        item = 0
        for number, piece in enumerate(pieces):
            counted = len(piece) - (opening if number == 0 else 0) - (len(protobuf.ENVELOPE_TAIL) if number == len(pieces) - 1 else 0)
            filled = head if number == 0 else 0
            taken = []
            while filled < counted:
                taken.append(sizes[item])
                filled += sizes[item]
                item += 1
            assert filled == counted  # a piece ends between items
            assert len(taken) == 1 or filled - taken[-1] < piece_bytes  # at least one item, and none after the one that fills it
            assert filled >= piece_bytes or number == len(pieces) - 1
        assert item == len(objs)


def _every_field(message: protobuf.Message, depth: int = 0) -> dict[str, Any]:
    """A JSON object of ``message`` with every field set, at every depth; maps also hold a null."""
    obj: dict[str, Any] = {}
    for field in message.fields:
        if field.inline:
            assert field.message is not None
            obj.update(_every_field(field.message, depth + 1))
            continue
        element = _sample(field, depth)
        obj[field.json] = [element] if field.is_list else {"k": element, "n": None} if field.is_map else element
    return obj


_SAMPLES: dict[str, Any] = {
    "string": "x", "bool": True, "int32": 1, "int64": 1, "uint32": 1, "uint64": 1, "bytes": "eA==",
    "time": "2026-01-02T03:04:05Z", "microtime": "2026-01-02T03:04:05.000006Z", "duration": "1s", "quantity": "1",
    "intorstring": "x", "rawextension": {"a": {"b": [1, {"c": None}]}}, "fieldsv1": {"f:a": {".": {}}},
}  # fmt: skip


def _sample(field: protobuf.Field, depth: int) -> Any:
    if field.wrapped:
        return ["x"]
    if field.message is not None:
        return _every_field(field.message, depth + 1) if depth < 40 else {}
    return _SAMPLES[field.type]


def _walked_from_protobuf(api_version: str, kind: str) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """A body of ``kind`` with every field set, as decoding it from protobuf gives it; the same
    after the unknown-field walk (pruning), and what the walk reported."""
    message = protobuf.schema().kinds[(api_version, kind)]
    decoded = {"apiVersion": api_version, "kind": kind, **protobuf.decode(protobuf.encode(_every_field(message), message), message)}
    walked = copy.deepcopy(decoded)
    return decoded, walked, schemas.prune_unknown_fields(walked, api_version, kind)


def test_protobuf_bodies_skip_the_unknown_field_walk_only_where_it_would_find_nothing() -> None:
    """A create or update in protobuf skips the walk for the kinds ``typed_bodies_fully_known``
    names: for those, a body with every field of the Go type set comes out of it unchanged."""
    skipped = []
    for api_version, kind in protobuf.schema().kinds:
        if schemas.known_fields_of_kind(api_version, kind) is None or not bodies.typed_bodies_fully_known(api_version, kind):
            continue
        decoded, walked, unknown = _walked_from_protobuf(api_version, kind)
        assert (unknown, walked) == ([], decoded), f"{api_version}/{kind}"
        skipped.append(f"{api_version}/{kind}")
    assert {"resource.k8s.io/v1/ResourceClaim", "v1/Pod", "resource.k8s.io/v1/ResourceSlice"} <= set(skipped)
    # A Secret's data may hold a null (an entry without its bytes), which the walk drops: walked.
    assert not bodies.typed_bodies_fully_known("v1", "Secret")
    decoded, walked, _ = _walked_from_protobuf("v1", "Secret")
    assert decoded["data"] == {"k": "eA==", "n": None} and walked["data"] == {"k": "eA=="}


def test_a_protobuf_secret_entry_without_bytes_is_dropped(api: httpx.Client, ns: str) -> None:
    message = protobuf.schema().kinds[("v1", "Secret")]
    raw = protobuf.encode({"metadata": {"name": "s"}, "data": {"a": "eA==", "b": None}}, message)
    response = api.post(f"/api/v1/namespaces/{ns}/secrets", content=protobuf.envelope("v1", "Secret", raw), headers=PB_HEADERS)
    assert response.status_code == 201, response.content
    assert api.get(f"/api/v1/namespaces/{ns}/secrets/s").json()["data"] == {"a": "eA=="}
