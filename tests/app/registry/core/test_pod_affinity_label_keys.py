"""MatchLabelKeysInPodAffinity (KEP-3633, GA) over HTTP: on create the API server merges each pod
affinity term's ``matchLabelKeys`` (``key In (value)``) and ``mismatchLabelKeys`` (``key NotIn
(value)``) into its ``labelSelector`` with the pod's label values, as kube-apiserver v1.37's pod
strategy does (pkg/registry/core/pod/strategy.go, mutatePodAffinity); updates leave it alone.
So do topology spread constraints' ``matchLabelKeys`` while MatchLabelKeysInPodTopologySpread
and its SelectorMerge (both beta, on) are (mutateTopologySpreadConstraints)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from devtools.server import ServerProcess
from kube.features import Gate, gates_flag
from tests.app.registry.core.test_pod_scheduling_gates import MERGE_PATCH, create, patched, pods_path
from tests.helpers import pod

LABELS = {"app": "web", "version": "1", "tier": "front"}


def term(**extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname", **extra}


def affinity_pod(name: str) -> dict[str, Any]:
    body = pod(
        name,
        affinity={
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [term(matchLabelKeys=["version"], mismatchLabelKeys=["tier"])],
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": term(matchLabelKeys=["missing", "version"])}],
            },
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    term(labelSelector={"matchLabels": {"app": "db"}, "matchExpressions": [{"key": "env", "operator": "Exists"}]}, mismatchLabelKeys=["app"]),
                ],
            },
        },
    )
    body["metadata"]["labels"] = LABELS
    return body


def expected_terms() -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                term(
                    labelSelector={"matchLabels": {"app": "web"}, "matchExpressions": [
                        {"key": "version", "operator": "In", "values": ["1"]},
                        {"key": "tier", "operator": "NotIn", "values": ["front"]},
                    ]},
                    matchLabelKeys=["version"], mismatchLabelKeys=["tier"],
                ),
            ],
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": term(
                labelSelector={"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "version", "operator": "In", "values": ["1"]}]},
                matchLabelKeys=["missing", "version"],
            )}],
        },
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                term(
                    labelSelector={"matchLabels": {"app": "db"}, "matchExpressions": [
                        {"key": "env", "operator": "Exists"}, {"key": "app", "operator": "NotIn", "values": ["web"]},
                    ]},
                    mismatchLabelKeys=["app"],
                ),
            ],
        },
    }  # fmt: skip


def test_create_merges_the_label_keys_into_the_selectors(api: httpx.Client, ns: str) -> None:
    created = create(api, ns, affinity_pod("web-0"))
    assert created["spec"]["affinity"] == expected_terms()
    stored = api.get(pods_path(ns, "web-0")).json()
    assert stored["spec"]["affinity"] == expected_terms()


def test_relabelling_the_pod_keeps_the_selectors_of_its_creation(api: httpx.Client, ns: str) -> None:
    create(api, ns, affinity_pod("web-1"))
    updated = patched(api, ns, "web-1", {"metadata": {"labels": {"version": "2"}}}, MERGE_PATCH)
    assert updated["metadata"]["labels"]["version"] == "2"
    assert updated["spec"]["affinity"] == expected_terms()


def test_a_dry_run_create_answers_with_the_merged_selectors(api: httpx.Client, ns: str) -> None:
    """What the scheduler's what-if gets for the pods it is asked about."""
    response = api.post(pods_path(ns) + "?dryRun=All", json=affinity_pod("web-2"))
    assert response.status_code == 201, response.text
    assert response.json()["spec"]["affinity"] == expected_terms()


def spread_pod(name: str) -> dict[str, Any]:
    constraint = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}
    body = pod(
        name,
        topologySpreadConstraints=[
            {**constraint, "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["missing", "version"]},
            {**constraint, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "web"}}},  # no keys: stays so
        ],
    )
    body["metadata"]["labels"] = LABELS
    return body


def test_create_merges_spread_constraints_label_keys_into_their_selectors(api: httpx.Client, ns: str) -> None:
    sent = spread_pod("spread-0")
    merged = create(api, ns, sent)["spec"]["topologySpreadConstraints"]
    assert merged[0]["labelSelector"] == {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "version", "operator": "In", "values": ["1"]}]}
    assert merged[0]["matchLabelKeys"] == ["missing", "version"]
    assert merged[1] == sent["spec"]["topologySpreadConstraints"][1]
    updated = patched(api, ns, "spread-0", {"metadata": {"labels": {"version": "2"}}}, MERGE_PATCH)
    assert updated["spec"]["topologySpreadConstraints"] == merged


def test_without_the_selector_merge_the_constraints_are_stored_as_sent(start_server: Callable[..., ServerProcess]) -> None:
    server = start_server("--feature-gates", gates_flag({Gate.MatchLabelKeysInPodTopologySpreadSelectorMerge: False}))
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        sent = spread_pod("spread-1")
        assert create(client, "default", sent)["spec"]["topologySpreadConstraints"] == sent["spec"]["topologySpreadConstraints"]
