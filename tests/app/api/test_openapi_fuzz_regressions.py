"""Bugs the schemathesis run against the OpenAPI documents (tests/fuzz) found, each fixed.

They turned up once the documents' request examples let the fuzzer create objects and
follow links from them, and in long ``make fuzz`` runs.
"""

from __future__ import annotations

import httpx

from tests.helpers import pod

YAML = "application/yaml"


def _leases(ns: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"


def _lease(api: httpx.Client, ns: str) -> str:
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"generateName": "l-", "labels": {"a": "b"}}}
    response = api.post(_leases(ns), json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["metadata"]["name"])


def test_bug_delete_options_in_yaml(api: httpx.Client, ns: str) -> None:
    """DELETE with a YAML DeleteOptions body (the documents offer application/yaml) was read as JSON: 400."""
    names = [_lease(api, ns) for _ in range(2)]
    body = b"apiVersion: v1\nkind: DeleteOptions\npropagationPolicy: Orphan\n"
    one = api.request("DELETE", f"{_leases(ns)}/{names[0]}", content=body, headers={"Content-Type": YAML})
    assert one.status_code == 200, one.text
    assert one.json()["metadata"]["finalizers"] == ["orphan"]  # the body was read: Orphan adds the finalizer
    dry_run = b"kind: DeleteOptions\napiVersion: v1\ndryRun: [All]\n"
    collection = api.request("DELETE", f"{_leases(ns)}?labelSelector=a%3Db", content=dry_run, headers={"Content-Type": YAML})
    assert collection.status_code == 200, collection.text
    assert api.get(f"{_leases(ns)}/{names[1]}").status_code == 200  # a dry run: still there
    broken = api.request("DELETE", f"{_leases(ns)}/{names[1]}", content=b"kind: [", headers={"Content-Type": YAML})
    assert broken.status_code == 400 and "error converting YAML to JSON" in broken.json()["message"]


def test_bug_resource_version_with_other_digits(api: httpx.Client, ns: str) -> None:
    """resourceVersion=² passed str.isdigit() and then failed int(): 500 on get, list and delete."""
    name = _lease(api, ns)
    for value in ("²", "١٢", "1²"):
        for method, path in (("GET", _leases(ns)), ("GET", f"{_leases(ns)}/{name}"), ("DELETE", _leases(ns))):
            response = api.request(method, path, params={"resourceVersion": value})
            assert response.status_code == 400, f"{method} {path}?resourceVersion={value}: {response.text}"
            assert "resource version must be a non-negative integer" in response.json()["message"]
    assert api.get(f"{_leases(ns)}/{name}").status_code == 200  # nothing was deleted


def test_bug_integer_parameters_parse_as_go_does(api: httpx.Client, ns: str) -> None:
    """limit, timeoutSeconds and gracePeriodSeconds took anything int() takes, of any size (a huge grace: 500)."""
    for value in ("١", "1_0", " 1", "0x10", "1.0"):
        response = api.get(_leases(ns), params={"limit": value})
        assert response.status_code == 400, f"limit={value!r}: {response.text}"
        assert "invalid syntax" in response.json()["message"]
    for name, value in (("limit", str(1 << 63)), ("timeoutSeconds", str(-(1 << 63) - 1)), ("gracePeriodSeconds", "9" * 23)):
        method = "DELETE" if name == "gracePeriodSeconds" else "GET"
        response = api.request(method, f"{_leases(ns)}/{_lease(api, ns)}" if method == "DELETE" else _leases(ns), params={name: value})
        assert response.status_code == 400, f"{name}={value}: {response.text}"
        assert "value out of range" in response.json()["message"]
    assert api.get(_leases(ns), params={"limit": "+1"}).status_code == 200
    assert api.get(_leases(ns), params={"limit": str((1 << 63) - 1)}).status_code == 200


def test_bug_pod_grace_period_of_millennia(api: httpx.Client, ns: str) -> None:
    """A grace period in int64 range but beyond year 9999 overflowed the deletion timestamp: 500."""
    response = api.post(f"/api/v1/namespaces/{ns}/pods", json=pod("slow", node="node-a"))
    assert response.status_code == 201, response.text
    deleting = api.delete(f"/api/v1/namespaces/{ns}/pods/slow", params={"gracePeriodSeconds": str((1 << 63) - 1)})
    assert deleting.status_code == 200, deleting.text
    assert deleting.json()["metadata"]["deletionTimestamp"] == "9999-12-31T23:59:59Z"
    gone = api.delete(f"/api/v1/namespaces/{ns}/pods/slow", params={"gracePeriodSeconds": "0"})
    assert gone.status_code == 200, gone.text
    assert api.get(f"/api/v1/namespaces/{ns}/pods/slow").status_code == 404
