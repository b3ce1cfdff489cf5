"""Endpoints: upstream's core validation, defaults, warnings and printed column.

Each invalid case names the exact (field path, reason) pairs upstream reports for it."""

from __future__ import annotations

import copy

import pytest

from app.registry.core.endpoints import STRATEGY as ENDPOINTS
from app.registry.core.endpoints import format_endpoints
from kube.errors import INVALID, NOT_SUPPORTED, REQUIRED
from tests.app.registry.helpers import Mutation, Obj, ctx, mutated, pairs, setitem

ENDPOINT: Obj = {
    "apiVersion": "v1",
    "kind": "Endpoints",
    "metadata": {"name": "web", "namespace": "default"},
    "subsets": [{"addresses": [{"ip": "10.1.2.3", "nodeName": "node-1"}], "ports": [{"port": 80, "protocol": "TCP"}]}],
}

CASES: list[tuple[str, Mutation, list[tuple[str, str]]]] = [
    ("no addresses", setitem("subsets.0.addresses", []), [("subsets[0]", REQUIRED)]),
    ("loopback", setitem("subsets.0.addresses.0.ip", "127.0.0.1"), [("subsets[0].addresses[0].ip", INVALID)]),
    ("unspecified", setitem("subsets.0.addresses.0.ip", "0.0.0.0"), [("subsets[0].addresses[0].ip", INVALID)]),
    ("link-local", setitem("subsets.0.addresses.0.ip", "169.254.0.1"), [("subsets[0].addresses[0].ip", INVALID)]),
    ("not an address", setitem("subsets.0.addresses.0.ip", "x"), [("subsets[0].addresses[0].ip", INVALID), ("subsets[0].addresses[0].ip", INVALID)]),
    ("bad node name", setitem("subsets.0.addresses.0.nodeName", "Node_1"), [("subsets[0].addresses[0].nodeName", INVALID)]),
    ("bad hostname", setitem("subsets.0.addresses.0.hostname", "a.b"), [("subsets[0].addresses[0].hostname", INVALID)]),
    ("port zero", setitem("subsets.0.ports.0.port", 0), [("subsets[0].ports[0].port", INVALID)]),
    ("unknown protocol", setitem("subsets.0.ports.0.protocol", "ICMP"), [("subsets[0].ports[0].protocol", NOT_SUPPORTED)]),
    ("two ports need names", setitem("subsets.0.ports", [{"port": 1, "protocol": "TCP"}, {"name": "b", "port": 2, "protocol": "TCP"}]), [("subsets[0].ports[0].name", REQUIRED)]),
]


def test_valid_endpoints_and_default_protocol() -> None:
    obj = mutated(ENDPOINT, lambda o: o["subsets"][0]["ports"][0].pop("protocol"))
    ENDPOINTS.default(obj, ctx())
    assert obj["subsets"][0]["ports"] == [{"port": 80, "protocol": "TCP"}]
    assert ENDPOINTS.validate_create(obj, ctx()) == []


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_endpoints(mutate: Mutation, expected: list[tuple[str, str]]) -> None:
    assert pairs(ENDPOINTS.validate_create(mutated(ENDPOINT, mutate), ctx())) == sorted(expected)


def test_unchanged_subsets_are_not_refused_on_update() -> None:
    old = mutated(ENDPOINT, setitem("subsets.0.addresses.0.ip", "127.0.0.1"))
    assert ENDPOINTS.validate_update(mutated(old, setitem("metadata.labels", {"a": "b"})), old, ctx()) == []


def test_warnings() -> None:
    context = ctx()
    ipv6 = mutated(ENDPOINT, setitem("subsets.0.addresses.0.ip", "2001:DB8::1"))
    assert ENDPOINTS.validate_create(ipv6, context) == []
    assert context.warnings == ['subsets[0].addresses[0].ip: IPv6 address "2001:DB8::1" should be in RFC 5952 canonical format ("2001:db8::1")']


def test_printed_endpoints() -> None:
    assert format_endpoints(ENDPOINT) == "10.1.2.3:80"
    assert format_endpoints({"subsets": []}) == "<none>"
    many = copy.deepcopy(ENDPOINT)
    many["subsets"][0]["addresses"] = [{"ip": f"10.0.0.{i}"} for i in range(1, 4)]
    many["subsets"][0]["ports"].append({"port": 443, "protocol": "TCP", "name": "b"})
    assert format_endpoints(many) == "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 3 more..."
    headless = mutated(ENDPOINT, setitem("subsets.0.ports", []))
    assert format_endpoints(headless) == "10.1.2.3"
    assert format_endpoints(mutated(ENDPOINT, setitem("subsets.0.addresses.0.ip", "2001:db8::1"))) == "[2001:db8::1]:80"
