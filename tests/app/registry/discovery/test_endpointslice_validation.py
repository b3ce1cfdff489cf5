"""EndpointSlice: upstream's discovery validation, defaults, generation and warnings.

Each invalid case names the exact (field path, reason) pairs upstream reports for it."""

from __future__ import annotations

import copy

import pytest

from app.registry.discovery.endpointslice import STRATEGY as SLICES
from app.registry.discovery.endpointslice import format_addresses, format_ports
from kube.errors import DUPLICATE, INVALID, NOT_SUPPORTED, REQUIRED, TOO_MANY
from tests.app.registry.helpers import Mutation, Obj, ctx, mutated, pairs, setitem

SLICE: Obj = {
    "apiVersion": "discovery.k8s.io/v1",
    "kind": "EndpointSlice",
    "metadata": {"name": "web-abc", "namespace": "default", "labels": {"kubernetes.io/service-name": "web"}},
    "addressType": "IPv4",
    "endpoints": [{"addresses": ["10.1.2.3"], "conditions": {"ready": True}, "nodeName": "node-1"}],
    "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
}

CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("no address type", lambda o: o.pop("addressType"), [("addressType", REQUIRED)]),
    ("unknown address type", setitem("addressType", "IPv5"), [("addressType", NOT_SUPPORTED)]),
    ("loopback", setitem("endpoints.0.addresses.0", "127.0.0.1"), [("endpoints[0].addresses[0]", INVALID)]),
    ("not an address", setitem("endpoints.0.addresses.0", "10.1.2"), [("endpoints[0].addresses[0]", INVALID)]),
    ("leading zeros", setitem("endpoints.0.addresses.0", "10.01.2.3"), [("endpoints[0].addresses[0]", INVALID)]),
    ("IPv6 in an IPv4 slice", setitem("endpoints.0.addresses.0", "2001:db8::1"), [("endpoints[0].addresses", INVALID)]),
    ("IPv6 not canonical", lambda o: o.update(addressType="IPv6", endpoints=[{"addresses": ["2001:DB8::1"]}]), [("endpoints[0].addresses[0]", INVALID)]),
    ("no addresses", setitem("endpoints.0.addresses", []), [("endpoints[0].addresses", REQUIRED)]),
    ("too many addresses", setitem("endpoints.0.addresses", [f"10.0.{i // 250}.{i % 250 + 1}" for i in range(101)]), [("endpoints[0].addresses", TOO_MANY)]),
    ("bad node name", setitem("endpoints.0.nodeName", "Node_1"), [("endpoints[0].nodeName", INVALID)]),
    ("bad hostname", setitem("endpoints.0.hostname", "a.b"), [("endpoints[0].hostname", INVALID)]),
    ("duplicate zone hints", setitem("endpoints.0.hints", {"forZones": [{"name": "a"}, {"name": "a"}]}), [("endpoints[0].hints.forZones[1].name", DUPLICATE)]),
    ("bad FQDN", lambda o: o.update(addressType="FQDN", endpoints=[{"addresses": ["example"]}]), [("endpoints[0].addresses[0]", INVALID)]),
    ("bad port name", setitem("ports.0.name", "HTTP"), [("ports[0].name", INVALID)]),
    ("duplicate port names", setitem("ports", [{"name": "a", "port": 1}, {"name": "a", "port": 2}]), [("ports[1].name", DUPLICATE)]),
    ("two unnamed ports", setitem("ports", [{"port": 1}, {"port": 2}]), [("ports[1].name", DUPLICATE)]),
    ("unknown protocol", setitem("ports.0.protocol", "ICMP"), [("ports[0].protocol", NOT_SUPPORTED)]),
    ("bad app protocol", setitem("ports.0.appProtocol", "-x"), [("ports[0].appProtocol", INVALID)]),
]


def _prepared(obj: Obj) -> Obj:
    obj = copy.deepcopy(obj)
    SLICES.prepare_for_create(obj, ctx())
    SLICES.default(obj, ctx())
    return obj


def test_valid_slice() -> None:
    assert SLICES.validate_create(_prepared(SLICE), ctx()) == []
    fqdn = mutated(SLICE, lambda o: o.update(addressType="FQDN", endpoints=[{"addresses": ["web.example.com"]}]))
    context = ctx()
    assert SLICES.validate_create(_prepared(fqdn), context) == []
    assert context.warnings == ["spec.addressType: FQDN endpoints are deprecated"]


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_slice(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    assert pairs(SLICES.validate_create(_prepared(mutated(SLICE, mutate)), ctx())) == sorted(expected)


def test_address_type_is_immutable_and_unchanged_endpoints_are_not_refused() -> None:
    old = _prepared(SLICE)
    changed = mutated(old, setitem("addressType", "IPv6"))
    assert ("addressType", INVALID) in pairs(SLICES.validate_update(changed, old, ctx()))
    # Stored before a rule tightened: an update that leaves the endpoints alone passes.
    loopback = mutated(old, setitem("endpoints.0.addresses.0", "127.0.0.1"))
    assert SLICES.validate_update(mutated(loopback, setitem("metadata.labels", {"a": "b"})), loopback, ctx()) == []


def test_defaults_and_v1_drops_deprecated_topology() -> None:
    obj = _prepared(mutated(SLICE, lambda o: o.update(ports=[{"port": 80}], endpoints=[{"addresses": ["10.1.2.3"], "deprecatedTopology": {"a": "b"}}])))
    assert obj["ports"] == [{"port": 80, "name": "", "protocol": "TCP"}]
    assert obj["endpoints"] == [{"addresses": ["10.1.2.3"], "conditions": {}}]
    # An update keeps the node a topology named before, as nodeName.
    old = mutated(SLICE, setitem("endpoints", [{"addresses": ["10.1.2.3"], "deprecatedTopology": {"kubernetes.io/hostname": "node-9"}}]))
    new = mutated(old, setitem("endpoints.0.addresses.0", "10.1.2.4"))
    SLICES.prepare_for_update(new, old, ctx())
    assert new["endpoints"] == [{"addresses": ["10.1.2.4"], "nodeName": "node-9"}]


def test_generation_moves_with_content_and_labels() -> None:
    old = _prepared(SLICE)
    assert not SLICES.spec_changed(mutated(old, setitem("metadata.annotations", {"a": "b"})), old)
    assert SLICES.spec_changed(mutated(old, setitem("metadata.labels", {"a": "b"})), old)
    assert SLICES.spec_changed(mutated(old, setitem("endpoints.0.conditions.ready", False)), old)


def test_warnings_for_non_canonical_addresses() -> None:
    context = ctx()
    obj = _prepared(mutated(SLICE, setitem("endpoints.0.addresses.0", "10.1.2.3")))
    ipv6 = mutated(obj, lambda o: o.update(addressType="IPv6", endpoints=[{"addresses": ["2001:db8::1"]}]))
    assert SLICES.validate_create(ipv6, context) == [] and context.warnings == []


def test_columns() -> None:
    many = mutated(SLICE, setitem("endpoints", [{"addresses": [f"10.0.0.{i}" for i in range(1, 6)]}]))
    assert format_addresses(many) == "10.0.0.1,10.0.0.2,10.0.0.3 + 2 more..."
    assert format_ports(SLICE) == "80"
    assert format_ports(mutated(SLICE, setitem("ports", []))) == "<unset>"
    assert format_ports(mutated(SLICE, setitem("ports", [{"name": "x"}]))) == "x"
