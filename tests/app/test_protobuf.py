"""The protobuf codec on its own: Go's mapping between JSON and protobuf, and Go's refusals of bad
bytes. ``tests/interop/test_protobuf_go.py`` compares the same with upstream's serializers."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app import protobuf
from app.protobuf import MAGIC, EncodeError, ProtobufError

# What kubectl 1.37 sends for `kubectl create namespace foo-29281` (captured on the wire).
KUBECTL_NAMESPACE = (
    b'k8s\x00\n\x0f\n\x02v1\x12\tNamespace\x12!\n\x19\n\tfoo-29281\x12\x00\x1a\x00"\x00*\x002\x008\x00B\x00'
    b'\x12\x00\x1a\x02\n\x00\x1a\x00"\x00'
)

CLAIM: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {
        "name": "gpu",
        "namespace": "default",
        "uid": "0b6f5a3c-1d2e-4f50-8a9b-0c1d2e3f4a5b",
        "resourceVersion": "42",
        "generation": 1,
        "creationTimestamp": "2026-11-29T06:25:57Z",
        "labels": {"b": "2", "a": "1"},
        "managedFields": [
            {
                "manager": "kubectl",
                "operation": "Update",
                "apiVersion": "resource.k8s.io/v1",
                "time": "2026-11-29T06:25:57Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:devices": {".": {}, "f:requests": {}}}},
            }
        ],
    },
    "spec": {
        "devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 2}}],
            "config": [{"requests": ["gpu"], "opaque": {"driver": "gpu.example.com", "parameters": {"sharing": {"strategy": "TimeSlicing"}}}}],
        }
    },
    "status": {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0", "consumedCapacity": {"memory": "40Gi"}}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]},
        },
        "reservedFor": [{"resource": "pods", "name": "trainer", "uid": "1b6f5a3c-1d2e-4f50-8a9b-0c1d2e3f4a5b"}],
    },
}


def _message(api_version: str, kind: str) -> protobuf.Message:
    message = protobuf.schema().message_for(api_version, kind)
    assert message is not None
    return message


def test_kubectls_namespace_body_reads_as_its_json() -> None:
    assert protobuf.decode_object(KUBECTL_NAMESPACE) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "foo-29281"},
        "spec": {},
        "status": {},
    }


def test_an_object_survives_a_round_trip_with_gos_defaults_filled_in() -> None:
    decoded = protobuf.decode_object(protobuf.encode_object(CLAIM))
    expected = copy.deepcopy(CLAIM)
    # Go writes every non-pointer field; read back, those that JSON does not omit show up.
    expected["spec"]["devices"]["config"][0]["requests"] = ["gpu"]
    assert decoded == expected


def test_map_entries_are_written_in_key_order_as_go_writes_them() -> None:
    one = protobuf.encode_object(CLAIM)
    other = copy.deepcopy(CLAIM)
    other["metadata"]["labels"] = {"a": "1", "b": "2"}
    assert protobuf.encode_object(other) == one


def test_quantities_are_written_canonical_and_times_in_whole_seconds() -> None:
    claim = copy.deepcopy(CLAIM)
    claim["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] = {"memory": "40960Mi", "cores": 0.5}
    claim["metadata"]["creationTimestamp"] = "2026-11-29T07:25:57.123+01:00"
    decoded = protobuf.decode_object(protobuf.encode_object(claim))
    assert decoded["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] == {"memory": "40Gi", "cores": "500m"}
    assert decoded["metadata"]["creationTimestamp"] == "2026-11-29T06:25:57Z"


def test_micro_times_keep_microseconds() -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l"},
        "spec": {"holderIdentity": "a", "renewTime": "2026-11-29T06:25:57.123456Z", "leaseDurationSeconds": 15},
    }
    assert protobuf.decode_object(protobuf.encode_object(lease))["spec"] == lease["spec"]


def test_null_and_absent_are_the_same_unset_field() -> None:
    with_nulls = copy.deepcopy(CLAIM)
    with_nulls["status"] = {"allocation": None, "reservedFor": None, "devices": None}
    without = copy.deepcopy(CLAIM)
    without["status"] = {}
    assert protobuf.encode_object(with_nulls) == protobuf.encode_object(without)
    assert protobuf.decode_object(protobuf.encode_object(without))["status"] == {}


def test_bytes_and_int_or_string() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"a": "YQ==", "empty": ""}, "type": "Opaque"}
    assert protobuf.decode_object(protobuf.encode_object(secret))["data"] == {"a": "YQ==", "empty": ""}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i", "readinessProbe": {"httpGet": {"port": "http"}}, "livenessProbe": {"httpGet": {"port": 8080}}}]},
    }
    container = protobuf.decode_object(protobuf.encode_object(pod))["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["port"] == "http"
    assert container["livenessProbe"]["httpGet"]["port"] == 8080


def test_named_list_values_are_wrapped() -> None:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "metadata": {},
        "spec": {"user": "u", "extra": {"scopes": ["a", "b"]}, "resourceAttributes": {"verb": "get", "resource": "pods"}},
    }
    assert protobuf.decode_object(protobuf.encode_object(review))["spec"]["extra"] == {"scopes": ["a", "b"]}


def test_unknown_fields_are_dropped_as_go_drops_them() -> None:
    message = _message("v1", "Namespace")
    raw = protobuf.encode({"metadata": {"name": "n"}}, message)
    # field 99 (a varint), field 98 (bytes) and a group: none of them a Namespace's.
    extra = bytes([99 << 3 & 0x7F | 0x80, (99 << 3) >> 7]) + b"\x05" + bytes([0x92, 0x06, 0x03]) + b"abc"
    assert protobuf.decode(raw + extra, message) == protobuf.decode(raw, message)


def test_invalid_utf8_in_strings_and_map_keys_reads_as_replacement_characters() -> None:
    # Go keeps the bytes in its string; its JSON then writes U+FFFD for each bad one.
    label = b"\x0a\x04k\xffey\x12\x03v\xfe1"  # labels entry: key, value
    meta = b"\x0a\x04a\xffb\xc3" + b"\x5a" + _varint(len(label)) + label
    decoded = protobuf.decode(b"\x0a" + _varint(len(meta)) + meta, _message("v1", "Namespace"))
    assert decoded["metadata"] == {"name": "a\ufffdb\ufffd", "labels": {"k\ufffdey": "v\ufffd1"}}


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"", "empty data"),
        (b'{"kind":"Namespace"}', "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"),
        (MAGIC, "empty body"),
        (KUBECTL_NAMESPACE[:-3], "unexpected EOF"),  # cut inside a field
        (MAGIC + b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "proto: integer overflow"),  # endless varint
        (MAGIC + b"\x12\x40abc", "unexpected EOF"),  # a length past the body
        (MAGIC + b"\x00", "proto: Unknown: illegal tag 0 (wire type 0)"),
        (MAGIC + b"\x0c", "proto: Unknown: wiretype end group for non-group"),
        (MAGIC + b"\x0f", "proto: illegal wireType 7"),
        (MAGIC + b"\x08\x01", "proto: wrong wireType = 0 for field TypeMeta"),
    ],
)
def test_bad_envelopes_fail_with_gos_words(body: bytes, error: str) -> None:
    with pytest.raises(ProtobufError) as failure:
        protobuf.decode_object(body)
    assert str(failure.value) == error


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"\x08\x01", "proto: wrong wireType = 0 for field Namespace.metadata"),  # metadata as a varint
        (b"\x0a\x02\x08\x01", "proto: wrong wireType = 0 for field ObjectMeta.name"),
        (b"\x0a\x05\x0a\x09abc", "unexpected EOF"),  # a name longer than its message
        (b"\x0a\x09\x0a\x01a", "unexpected EOF"),  # metadata longer than the body
        (b"\x0c\x00", "proto: Namespace: wiretype end group for non-group"),
        (b"\x0a\x02\x0c\x00", "proto: ObjectMeta: wiretype end group for non-group"),
        (b"\x02\x00", "proto: Namespace: illegal tag 0 (wire type 2)"),
    ],
)
def test_bad_messages_fail_with_gos_words(raw: bytes, error: str) -> None:
    with pytest.raises(ProtobufError) as failure:
        protobuf.decode(raw, _message("v1", "Namespace"))
    assert str(failure.value) == error


def test_a_message_nested_ten_thousand_deep_is_refused_or_skipped_never_a_crash() -> None:
    # Ten thousand levels of field 1 inside field 1: metadata, then its name, whose bytes are the
    # rest (no message of the schema nests itself, so depth past it is in bytes Go does not read).
    nested = b""
    for _ in range(10_000):
        nested = b"\x0a" + _varint(len(nested)) + nested
    decoded = protobuf.decode(nested, _message("v1", "Namespace"))
    assert set(decoded) == {"metadata", "spec", "status"}
    assert len(decoded["metadata"]["name"]) > 9_990
    # The same depth in a RawExtension's JSON: a decode error, not a RecursionError.
    deep_json = b"[" * 10_000 + b"]" * 10_000
    opaque = b"\x0a\x01d" + b"\x12" + _varint(len(deep_json) + 4) + b"\x0a" + _varint(len(deep_json)) + deep_json
    with pytest.raises(ProtobufError, match="RawExtension"):
        protobuf.decode(opaque, protobuf.schema().messages["k8s.io/api/resource/v1.OpaqueDeviceConfiguration"])


def _varint(value: int) -> bytes:
    out = bytearray()
    protobuf.put_varint(out, value)
    return bytes(out)


@pytest.mark.parametrize(
    ("obj", "error"),
    [
        ({"metadata": {"labels": "a=b"}}, "json: cannot unmarshal string into Go struct field ObjectMeta.labels of type map"),
        ({"spec": {"devices": {"requests": [{"name": "a", "exactly": {"count": "2"}}]}}}, "json: cannot unmarshal string into Go struct field ExactDeviceRequest.count of type int64"),
        ({"spec": {"devices": {"requests": [{"name": "a", "exactly": {"count": 1.5}}]}}}, "json: cannot unmarshal number into Go struct field ExactDeviceRequest.count of type int64"),
        ({"status": {"allocation": {"devices": {"results": [{"consumedCapacity": {"m": "lots"}}]}}}}, "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    ],
)
def test_objects_go_could_not_decode_are_refused(obj: dict[str, Any], error: str) -> None:
    with pytest.raises(EncodeError) as failure:
        protobuf.encode(obj, _message("resource.k8s.io/v1", "ResourceClaim"))
    assert str(failure.value) == error


def test_watch_frames_are_length_prefixed_watch_events() -> None:
    first = protobuf.watch_event("ADDED", protobuf.encode_object(CLAIM))
    stream = first + protobuf.watch_event("DELETED", protobuf.encode_object(CLAIM))
    assert int.from_bytes(first[:4], "big") == len(first) - 4
    events = protobuf.read_watch_events(stream)
    assert [kind for kind, _ in events] == ["ADDED", "DELETED"]
    assert protobuf.decode_object(events[0][1])["metadata"]["name"] == "gpu"
    with pytest.raises(ProtobufError, match="unexpected EOF"):
        protobuf.read_watch_events(stream[:-1])


@pytest.mark.parametrize(
    ("text", "nanos"),
    [("0s", 0), ("1h30m", 5_400_000_000_000), ("-2.5s", -2_500_000_000), ("1.5ms", 1_500_000), ("300µs", 300_000), ("10ns", 10)],
)
def test_go_durations(text: str, nanos: int) -> None:
    assert protobuf.parse_go_duration(text) == nanos
    assert protobuf.parse_go_duration(protobuf.go_duration(nanos)) == nanos
    assert protobuf.go_duration(5_400_000_000_000) == "1h30m0s"


def _field_message(api_version: str, kind: str, *path: str) -> protobuf.Message:
    """The message of the field at ``path`` in the kind's (the kind's own for no path)."""
    message: protobuf.Message | None = _message(api_version, kind)
    for name in path:
        assert message is not None
        message = next(f for f in message.fields if f.json == name).message
    assert message is not None
    return message


@pytest.mark.parametrize(
    ("api_version", "kind", "path", "value"),
    [
        ("resource.k8s.io/v1", "ResourceClaim", ("status",), {}),
        ("resource.k8s.io/v1", "ResourceClaim", ("status",), {"allocation": {}, "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}),
        ("v1", "Node", ("status",), {"capacity": {"cpu": "4"}, "nodeInfo": {"kubeletVersion": "v1.37.2"}}),
        ("v1", "Pod", ("status",), {"phase": "Running", "containerStatuses": [{"name": "c"}], "conditions": [{"type": "Ready", "status": "True"}]}),
        ("v1", "Service", ("status",), {"loadBalancer": None}),
        ("policy/v1", "PodDisruptionBudget", ("status",), {"disruptionsAllowed": 1}),
        ("v1", "Node", (), {"metadata": {"name": "n"}}),
        ("v1", "Event", (), {"involvedObject": {"name": "p"}, "reason": "R"}),
    ],
)
def test_zero_fields_are_filled_in_as_go_writes_them(api_version: str, kind: str, path: tuple[str, ...], value: dict[str, Any]) -> None:
    message = _field_message(api_version, kind, *path)
    filled = copy.deepcopy(value)
    protobuf.fill_zero_fields(filled, message)
    assert filled == protobuf.decode(protobuf.encode(value, message), message)


def test_zero_fields_of_a_status() -> None:
    status: dict[str, Any] = {"containerStatuses": [{"name": "c", "ready": True}]}
    protobuf.fill_zero_fields(status, _field_message("v1", "Pod", "status"))
    assert status == {"containerStatuses": [{"name": "c", "ready": True, "state": {}, "lastState": {}, "restartCount": 0, "image": "", "imageID": ""}]}
    claim_status: dict[str, Any] = {"allocation": {}}
    protobuf.fill_zero_fields(claim_status, _field_message("resource.k8s.io/v1", "ResourceClaim", "status"))
    assert claim_status == {"allocation": {"devices": {}}}


# ---- every field of every kind ------------------------------------------------------------------

# A value of each special type as JSON writes it, read back unchanged (canonical already).
_SPECIAL_VALUES = {
    "time": "2026-11-29T06:25:57Z",
    "microtime": "2026-11-29T06:25:57.123456Z",
    "duration": "1m30s",
    "quantity": "40Gi",
    "intorstring": "http",
    "rawextension": {"apiVersion": "v1", "kind": "Example", "x": 1},
    "fieldsv1": {"f:metadata": {}},
}
_SCALAR_VALUES = {"bool": True, "int32": 7, "int64": 7, "uint32": 7, "uint64": 7, "bytes": "eA=="}


def _filled(message: protobuf.Message, within: frozenset[str] = frozenset()) -> dict[str, Any]:
    """An object of ``message`` with every field set to a value that is not its zero (so that no
    field can be dropped on the way unnoticed); a message inside itself is left out."""
    obj: dict[str, Any] = {}
    within = within | {message.name}
    for field in message.fields:
        if field.inline:
            assert field.message is not None
            obj.update(_filled(field.message, within))
            continue
        if field.type == "message":
            assert field.message is not None
            if field.message.name in within:
                continue
            element: Any = _filled(field.message, within)
        elif field.type == "string":
            element = f"v-{field.json}"
        else:
            element = _SPECIAL_VALUES.get(field.type, _SCALAR_VALUES.get(field.type))
        if field.wrapped:
            element = [element]
        if field.label == "list":
            obj[field.json] = [element]
        elif field.label == "map":
            obj[field.json] = {"k": element}
        else:
            obj[field.json] = element
    return obj


def _resource_kinds() -> list[tuple[str, str]]:
    return sorted(key for key in protobuf.schema().kinds if key[0].startswith("resource.k8s.io/") or key == ("v1", "Pod"))


@pytest.mark.parametrize(("api_version", "kind"), _resource_kinds(), ids=lambda value: str(value))
def test_every_field_of_a_dra_kind_survives_a_round_trip(api_version: str, kind: str) -> None:
    """Encoding and decoding keep every field (ResourceClaim's status.devices, a slice's device
    attributes and counters, a pod's resource claims...): a field the encoder or decoder loses
    would reach protobuf clients (kube-scheduler, kube-controller-manager) silently."""
    message = _message(api_version, kind)
    obj = {"apiVersion": api_version, "kind": kind, **_filled(message)}
    decoded = protobuf.decode_object(protobuf.encode_object(obj))
    assert decoded == obj


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


@pytest.mark.parametrize(("api_version", "kind"), _resource_kinds(), ids=lambda value: str(value))
def test_a_checked_decode_bounds_the_depth_and_vouches_for_times(api_version: str, kind: str) -> None:
    """decode_checked's depth bound holds for a message with every field set (so a server may skip
    walking it), raw JSON inside counts, and a time without a four-digit year is reported."""
    message = _message(api_version, kind)
    raw = protobuf.encode(_filled(message), message)
    decoded, typed, shallow = protobuf.decode_checked(raw, message, 100)
    assert typed and shallow
    # The least limit it vouches for bounds the JSON's depth (raw JSON inside, managedFields'
    # fieldsV1 and RawExtensions here, nesting further than the schema).
    limit = protobuf.json_depth(message) - 1
    assert not protobuf.decode_checked(raw, message, limit)[2]
    while not protobuf.decode_checked(raw, message, limit)[2]:
        limit += 1
    assert _depth(decoded) <= limit <= 100
    namespace = _message("v1", "Namespace")
    for seconds, four_digits in ((253402300799, True), (253402300800, False), (-30610224000, True), (-30610224001, False)):
        timestamp = b"\x08" + _varint(seconds)
        meta = b"\x42" + _varint(len(timestamp)) + timestamp
        _, typed, _ = protobuf.decode_checked(b"\x0a" + _varint(len(meta)) + meta, namespace, 100)
        assert typed is four_digits, seconds


def _nested_objects(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_only_raw_json_counts_against_the_depth_limit() -> None:
    """Brackets elsewhere in the bytes (in strings here) are not JSON nesting: the decode vouches
    for the body. Raw JSON (an opaque config's parameters, a managedFields entry's fieldsV1) nests
    as deep as it likes, so a deep one is left for the server to walk (and refuse)."""
    message = _message("resource.k8s.io/v1", "ResourceClaim")
    brackets = "{[" * 200
    claim = {**CLAIM, "metadata": {**CLAIM["metadata"], "annotations": {"example.com/brackets": brackets}}}
    decoded, typed, shallow = protobuf.decode_checked(protobuf.encode(claim, message), message, 100)
    assert decoded["metadata"]["annotations"]["example.com/brackets"] == brackets
    assert typed and shallow
    deep_parameters = copy.deepcopy(CLAIM)
    deep_parameters["spec"]["devices"]["config"][0]["opaque"]["parameters"] = _nested_objects(95)
    deep_fields = copy.deepcopy(CLAIM)
    deep_fields["metadata"]["managedFields"][0]["fieldsV1"] = _nested_objects(120)
    for deep in (deep_parameters, deep_fields):
        decoded, typed, shallow = protobuf.decode_checked(protobuf.encode(deep, message), message, 100)
        assert typed and not shallow
        assert _depth(decoded) > 100
    # Raw JSON side by side nests no deeper than the deepest of them (kube-scheduler's updates
    # carry several managedFields entries).
    entry = CLAIM["metadata"]["managedFields"][0]
    side_by_side = copy.deepcopy(CLAIM)
    side_by_side["metadata"]["managedFields"] = [{**entry, "manager": f"m{i}", "fieldsV1": _nested_objects(40)} for i in range(5)]
    decoded, typed, shallow = protobuf.decode_checked(protobuf.encode(side_by_side, message), message, 100)
    assert typed and shallow
    assert _depth(decoded) <= 100


@pytest.mark.parametrize(
    "tail",
    [
        b"\x12\x02\x0a\x00",  # a second message field: the last one counts
        b"\x1a\x04gzip",  # a content encoding: refused
        b"\x22\x03abc",  # a content type after the usual empty one
    ],
)
def test_an_envelope_reads_the_same_whatever_its_layout(tail: bytes) -> None:
    """A body of a type read before, laid out as clients write it, reads as any other body does;
    one that only starts like it (more fields after it) is read field by field."""
    usual = protobuf.encode_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})
    _, _, message = protobuf.open_envelope(usual)
    for _ in range(2):  # the second time the type is known
        assert protobuf.open_envelope(usual) == ("v1", "Namespace", message)
        assert protobuf.open_envelope(usual[: -len(protobuf.ENVELOPE_TAIL)]) == ("v1", "Namespace", message)
        with pytest.raises(ProtobufError, match="unexpected EOF"):
            protobuf.open_envelope(usual[:-5])
    if tail.startswith(b"\x1a"):
        with pytest.raises(ProtobufError, match="unsupported content encoding 'gzip'"):
            protobuf.open_envelope(usual + tail)
    else:
        expected = b"\x0a\x00" if tail.startswith(b"\x12") else message
        assert protobuf.open_envelope(usual + tail) == ("v1", "Namespace", expected)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16383, 16384, 2**31 - 1, 2**63 - 1, -1, -(2**31), -(2**63)])
def test_varints_read_back_as_written(value: int) -> None:
    """Every width the encoder's shortcuts cover (one byte, two bytes kept once made, longer, and
    negatives as ten bytes of two's complement) writes the same varint twice and reads it back."""
    written = protobuf.varint(value)
    assert protobuf.varint(value) == written == _varint(value)
    assert len(written) == (10 if value < 0 else protobuf.varint_size(value))
    # An int64 field (a ResourceClaim's metadata.generation) carries it through a round trip.
    claim = {**CLAIM, "metadata": {**CLAIM["metadata"], "generation": value}}
    assert protobuf.decode_object(protobuf.encode_object(claim))["metadata"].get("generation", 0) == value  # 0: omitempty


def test_string_fields_write_the_same_bytes_whether_kept_or_not() -> None:
    """A string field's bytes are kept for the texts it repeats until it has had many distinct ones
    (free text, no longer kept); every text, kept, repeated, new past that point, longer than a
    one-byte length, in UTF-8 of several bytes a character, is written as tag, length and UTF-8."""
    object_meta = protobuf.schema().messages["k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta"]
    texts = ["", "a", "x" * 127, "x" * 128, "ü" * 63, "ü" * 64, "€" * 50, *(f"claim-{i}" for i in range(100))]
    for _ in range(2):  # the second time round, the first texts are kept (or the field is free text)
        for text in texts:
            data = text.encode()
            # name is field 1 of ObjectMeta; the kept bytes of another field (namespace) must not leak into it
            written = protobuf.encode({"name": text, "namespace": "default"}, object_meta)
            assert written.startswith(b"\x0a" + _varint(len(data)) + data + b"\x12\x00\x1a\x07default")
            assert protobuf.decode(written, object_meta).get("name", "") == text  # "": omitempty
    # Enumerations stay kept; a list's items and a map's values (other tags) are written the same.
    claim = copy.deepcopy(CLAIM)
    claim["metadata"]["finalizers"] = ["a", "a", "b" * 200]
    claim["metadata"]["labels"] = {"a": "a", "b": "b" * 200}
    for _ in range(2):
        decoded = protobuf.decode_object(protobuf.encode_object(claim))
        assert decoded["metadata"]["finalizers"] == ["a", "a", "b" * 200]
        assert decoded["metadata"]["labels"] == {"a": "a", "b": "b" * 200}


def _rotated(data: bytes, message: protobuf.Message) -> bytes:
    """``data`` with the first field of every message (all its occurrences, in order) moved last:
    Go's reading is the same, but the fields are no longer in the order Go writes them."""
    parts = protobuf._fields(data, 0, len(data), message.owner)
    pieces = []
    for number, wire, value, stop in parts:
        field = message.by_number.get(number)
        if wire == protobuf.LEN and field is not None and field.message is not None and not field.is_map:
            inner = _rotated(data[value:stop], field.message)
            pieces.append((number, _field_bytes(inner, number, wire, 0, len(inner))))
        else:
            pieces.append((number, _field_bytes(data, number, wire, value, stop)))
    first = pieces[0][0] if pieces else 0
    return b"".join([piece for number, piece in pieces if number != first] + [piece for number, piece in pieces if number == first])


def _widened(data: bytes, message: protobuf.Message, keys: bool = True) -> bytes:
    """``data`` (a message of ``message``) with every length (and with ``keys`` every key) written
    as a two-byte varint (as Go reads them, a longer form of the same number) and each map entry's
    value before its key, nested messages alike: bytes the decoder cannot take its usual
    one-byte shortcuts on."""
    out = bytearray()
    for number, wire, value, stop in protobuf._fields(data, 0, len(data), message.owner):
        field = message.by_number.get(number)
        if keys:
            out += bytes([(number << 3 | wire) & 0x7F | 0x80, (number << 3 | wire) >> 7])
        else:
            protobuf.put_varint(out, number << 3 | wire)
        if wire != protobuf.LEN:
            protobuf.put_varint(out, value)
            continue
        inner = data[value:stop]
        if field is not None and field.is_map:
            entry = protobuf._fields(inner, 0, len(inner), "entry")
            inner = b"".join(_field_bytes(inner, *part) for part in reversed(entry))  # value, then key
        elif field is not None and field.message is not None and not field.is_map:
            inner = _widened(inner, field.message, keys)
        out += bytes([len(inner) & 0x7F | 0x80, len(inner) >> 7])
        out += inner
    return bytes(out)


def _field_bytes(data: bytes, number: int, wire: int, value: int, stop: int) -> bytes:
    out = bytearray()
    protobuf.put_varint(out, number << 3 | wire)
    if wire == protobuf.LEN:
        protobuf.put_varint(out, stop - value)
        out += data[value:stop]
    else:
        protobuf.put_varint(out, value)
    return bytes(out)


def test_a_message_reads_the_same_whatever_the_width_of_its_varints() -> None:
    """The decoder's shortcut for one-byte keys and lengths (most fields) and for a map entry's
    usual layout reads what Go's generic reading of the same message gives."""
    message = _message("resource.k8s.io/v1", "ResourceClaim")
    raw = protobuf.encode(CLAIM, message)
    widened = _widened(raw, message)
    assert len(widened) > len(raw) and protobuf.decode(widened, message) == protobuf.decode(raw, message)
    long_lengths = _widened(raw, message, keys=False)
    assert len(raw) < len(long_lengths) < len(widened) and protobuf.decode(long_lengths, message) == protobuf.decode(raw, message)
    assert protobuf.decode(raw, message)["metadata"]["labels"] == {"a": "1", "b": "2"}
    rotated = _rotated(raw, message)
    assert rotated != raw and protobuf.decode(rotated, message) == protobuf.decode(raw, message)
    # Read into an object holding its type first, whichever way the message is read.
    typed = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", **protobuf.decode(raw, message)}
    for data in (raw, rotated):
        into = protobuf.decode(data, message, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim"})
        assert list(into.items()) == list(typed.items())
    # A map entry's value before its key, with one-byte lengths, and an entry with its key only.
    object_meta = message.by_number[1].message
    assert object_meta is not None
    labels = object_meta.by_number[11]
    assert protobuf._read_entry(labels, b"\x12\x01v\x0a\x01k", 0, 6, 0) == ("k", "v")
    assert protobuf._read_entry(labels, b"\x0a\x01k", 0, 3, 0) == ("k", "")
    assert protobuf._read_entry(labels, b"\x0a\x01k\x12\x01v\x12\x01w", 0, 9, 0) == ("k", "w")


def test_fields_out_of_order_or_repeated_read_as_go_reads_them() -> None:
    """A scalar's last value counts, a message's parts are merged, a list's parts are gathered,
    wherever they come."""
    namespace = _message("v1", "Namespace")
    assert protobuf.decode(b"\x0a\x06\x0a\x01a\x0a\x01b", namespace)["metadata"]["name"] == "b"
    merged = protobuf.decode(b"\x0a\x03\x0a\x01a\x12\x00\x0a\x05\x12\x03gen", namespace)
    assert (merged["metadata"]["name"], merged["metadata"]["generateName"], merged["spec"]) == ("a", "gen", {})
    gathered = protobuf.decode(b"\x0a\x09\x72\x01x\x0a\x01a\x72\x01y", namespace)["metadata"]
    assert list(gathered) == list(protobuf.decode(b"\x0a\x09\x0a\x01a\x72\x01x\x72\x01y", namespace)["metadata"])
    assert (gathered["name"], gathered["finalizers"]) == ("a", ["x", "y"])


@pytest.mark.parametrize("length", [127, 128, 300, 16383, 16384, 20000])
def test_long_fields_carry_their_length_after_their_tag(length: int) -> None:
    """A field's tag and length as one piece (kept for lengths of two bytes) is the tag, then the
    length as a varint, however often the same length comes up."""
    namespace = _message("v1", "Namespace")
    obj = {"metadata": {"name": "n" * length, "annotations": {"a": "v" * length}}}
    for _ in range(2):
        raw = protobuf.encode(obj, namespace)
        name = b"\x0a" + protobuf.varint(length) + b"n" * length
        decoded = protobuf.decode(raw, namespace)["metadata"]
        assert name in raw and (decoded["name"], decoded["annotations"]) == ("n" * length, {"a": "v" * length})


@pytest.mark.parametrize(
    ("timestamp", "read"),
    [
        (b"\x08\xf5\xb0\x96\xca\x06", "2025-12-19T18:24:53Z"),
        (b"\x10\x01\x08\xf5\xb0\x96\xca\x06", "2025-12-19T18:24:53Z"),  # nanos first; whole seconds only
        (b"\x08\x00\x08\xf5\xb0\x96\xca\x06", "2025-12-19T18:24:53Z"),  # the last seconds count
        (b"\x18\x05\x08\xf5\xb0\x96\xca\x06", "2025-12-19T18:24:53Z"),  # an unknown field skipped
        (b"\x08" + b"\xff" * 9 + b"\x01", "1969-12-31T23:59:59Z"),  # -1 as ten bytes
        (b"\x08\x80\x80\x80\x80\x80\x80\x80\x80\x40", "proto: a timestamp of 4611686018427387904 seconds is out of range"),
        (b"\x09" + bytes(8), "proto: wrong wireType = 1 for field Seconds"),
        (b"\x08\xf5\xb0", "unexpected EOF"),
    ],
)
def test_timestamps_read_as_go_reads_them(timestamp: bytes, read: str) -> None:
    namespace = _message("v1", "Namespace")
    meta = b"\x42" + protobuf.varint(len(timestamp)) + timestamp
    body = b"\x0a" + protobuf.varint(len(meta)) + meta
    if read[0].isdigit():
        assert protobuf.decode(body, namespace)["metadata"]["creationTimestamp"] == read
    else:
        with pytest.raises(ProtobufError) as failure:
            protobuf.decode(body, namespace)
        assert str(failure.value) == read


@pytest.mark.parametrize(
    ("raw", "read"),
    [
        (b"\x0a\x07{\"a\":1}", {"a": 1}),
        (b"\x0a\x07{\"a\":1}\x12\x00", {"a": 1}),  # an unknown field after it
        (b"\x0a\x02[]\x0a\x07{\"a\":1}", {"a": 1}),  # the last one counts
        (b"", None),
        (b"\x0a\x09{\"a\":1}", "unexpected EOF"),
    ],
)
def test_raw_json_reads_as_go_reads_it(raw: bytes, read: Any) -> None:
    code = protobuf._CODES["rawextension"]
    if isinstance(read, str):
        with pytest.raises(ProtobufError) as failure:
            protobuf._read_special(code, raw, 0, len(raw))
        assert str(failure.value) == read
    else:
        assert protobuf._read_special(code, raw, 0, len(raw)) == read
