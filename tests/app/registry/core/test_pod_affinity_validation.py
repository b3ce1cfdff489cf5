"""Pod affinity and topology spread constraints are validated over HTTP as kube-apiserver v1.37
does (pkg/apis/core/validation: validateAffinity, validateTopologySpreadConstraints): a 422 with
upstream's field paths, reasons and messages, for pods, pod templates and workload templates.
Pods are checked after the create-time merge of matchLabelKeys into their selectors, like
upstream, so a key both merged and already named by the selector is refused."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from app.registry.core.pod_validation import validate_pod_update
from devtools.server import ServerProcess
from kube.features import Gate, gates_flag
from tests.app.registry.core.test_pod_scheduling_gates import create, pods_path
from tests.app.registry.core.test_pod_validation import make_pod
from tests.helpers import assert_status, pod

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
NODE = "spec.affinity.nodeAffinity"
REQUIRED_TERMS = f"{NODE}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
POD_AFFINITY = "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution"
ANTI_PREFERRED = "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution"
SPREAD = "spec.topologySpreadConstraints"
LABEL_VALUE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
NAME_PART = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
QUALIFIED = (
    "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
)
RFC1123_LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with "
    "an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
LABELS = {"app": "web", "version": "1"}


def term(**extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST, **extra}


def spread(**extra: Any) -> dict[str, Any]:
    return {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}, **extra}


def node_affinity(**parts: Any) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": parts}}


def pod_affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}}


def anti_preferred(*weighted: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": list(weighted)}}}


def in_zone(*values: str, operator: str = "In") -> dict[str, Any]:
    return {"matchExpressions": [{"key": ZONE, "operator": operator, "values": list(values)}]}


CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("required node affinity needs a term",
     node_affinity(requiredDuringSchedulingIgnoredDuringExecution={"nodeSelectorTerms": []}),
     [f"{REQUIRED_TERMS}: Required value: must have at least one node selector term"]),
    ("required node affinity holds values to label syntax",
     node_affinity(requiredDuringSchedulingIgnoredDuringExecution={"nodeSelectorTerms": [in_zone("a", "bad value!")]}),
     [f'{REQUIRED_TERMS}[0].matchExpressions[0].values[1]: Invalid value: "bad value!": {LABEL_VALUE}']),
    ("required node affinity operators",
     node_affinity(requiredDuringSchedulingIgnoredDuringExecution={"nodeSelectorTerms": [in_zone(operator="Maybe")]}),
     [f'{REQUIRED_TERMS}[0].matchExpressions[0].operator: Invalid value: "Maybe": not a valid selector operator']),
    ("preferred node affinity: weight 1-100, any value, operators still checked",
     node_affinity(preferredDuringSchedulingIgnoredDuringExecution=[
         {"weight": 0, "preference": in_zone("bad value!")},
         {"weight": 101, "preference": in_zone("1", "2", operator="Gt")},
     ]),
     [f"{NODE}.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100",
      f"{NODE}.preferredDuringSchedulingIgnoredDuringExecution[1].weight: Invalid value: 101: must be in the range 1-100",
      f"{NODE}.preferredDuringSchedulingIgnoredDuringExecution[1].preference.matchExpressions[0].values: "
      "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"]),
    ("a pod affinity term needs a topology key",
     pod_affinity(term(topologyKey="")),
     [f"{POD_AFFINITY}[0].topologyKey: Required value: can not be empty",
      f'{POD_AFFINITY}[0].topologyKey: Invalid value: "": name part must be non-empty',
      f'{POD_AFFINITY}[0].topologyKey: Invalid value: "": {NAME_PART}']),
    ("a topology key is a qualified name",
     pod_affinity(term(topologyKey="a/b/c")),
     [f'{POD_AFFINITY}[0].topologyKey: Invalid value: "a/b/c": {QUALIFIED}']),
    ("selectors and namespace names",
     pod_affinity(term(
         labelSelector={"matchExpressions": [{"key": "app", "operator": "Has"}]},
         namespaceSelector={"matchLabels": {"team": "bad value!"}},
         namespaces=["ok", "Bad_NS"],
     )),
     [f'{POD_AFFINITY}[0].labelSelector.matchExpressions[0].operator: Invalid value: "Has": not a valid selector operator',
      f'{POD_AFFINITY}[0].namespaceSelector.matchLabels: Invalid value: "bad value!": {LABEL_VALUE}',
      f'{POD_AFFINITY}[0].namespace: Invalid value: "Bad_NS": {RFC1123_LABEL}']),
    ("label keys need a selector",
     pod_affinity({"topologyKey": HOST, "matchLabelKeys": ["version"], "mismatchLabelKeys": ["bad key!"]}),
     [f"{POD_AFFINITY}[0].matchLabelKeys: Forbidden: must not be specified when labelSelector is not set",
      f"{POD_AFFINITY}[0].mismatchLabelKeys: Forbidden: must not be specified when labelSelector is not set"]),
    ("label keys are label names, not in both lists",
     pod_affinity(term(matchLabelKeys=["bad key!", "team"], mismatchLabelKeys=["team"])),
     [f'{POD_AFFINITY}[0].matchLabelKeys[0]: Invalid value: "bad key!": {NAME_PART}',
      f'{POD_AFFINITY}[0].matchLabelKeys[1]: Invalid value: "team": exists in both matchLabelKeys and mismatchLabelKeys']),
    ("a merged key the selector already names (upstream's path has no matchLabelKeys)",
     pod_affinity(term(matchLabelKeys=["version", "app"])),
     [f'{POD_AFFINITY}[0][1]: Invalid value: "app": exists in both matchLabelKeys and labelSelector']),
    ("weighted pod anti-affinity terms",
     anti_preferred({"weight": 101, "podAffinityTerm": term(topologyKey="a/b/c")}),
     [f"{ANTI_PREFERRED}[0].weight: Invalid value: 101: must be in the range 1-100",
      f'{ANTI_PREFERRED}[0].podAffinityTerm.topologyKey: Invalid value: "a/b/c": {QUALIFIED}']),
    ("spread: skew, key, action",
     {"topologySpreadConstraints": [spread(maxSkew=0, topologyKey="", whenUnsatisfiable="Sometimes")]},
     [f"{SPREAD}[0].maxSkew: Invalid value: 0: must be greater than zero",
      f"{SPREAD}[0].topologyKey: Required value: can not be empty",
      f'{SPREAD}[0].whenUnsatisfiable: Unsupported value: "Sometimes": supported values: "DoNotSchedule", "ScheduleAnyway"']),
    ("spread: one constraint per key and action",
     {"topologySpreadConstraints": [spread(), spread(whenUnsatisfiable="ScheduleAnyway"), spread(maxSkew=2)]},
     [f'{SPREAD}[0].{{topologyKey, whenUnsatisfiable}}: Duplicate value: "{{{ZONE}, DoNotSchedule}}"']),
    ("spread: minDomains positive and only with DoNotSchedule",
     {"topologySpreadConstraints": [spread(minDomains=0, whenUnsatisfiable="ScheduleAnyway")]},
     [f"{SPREAD}[0].minDomains: Invalid value: 0: must be greater than zero",
      f"{SPREAD}[0].minDomains: Invalid value: 0: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"]),
    ("spread: node inclusion policies",
     {"topologySpreadConstraints": [spread(nodeAffinityPolicy="Maybe", nodeTaintsPolicy="honor")]},
     [f'{SPREAD}[0].nodeAffinityPolicy: Unsupported value: "Maybe": supported values: "Honor", "Ignore"',
      f'{SPREAD}[0].nodeTaintsPolicy: Unsupported value: "honor": supported values: "Honor", "Ignore"']),
    ("spread: matchLabelKeys need a selector",
     {"topologySpreadConstraints": [{**spread(matchLabelKeys=["version"]), "labelSelector": None}]},
     [f"{SPREAD}[0].matchLabelKeys: Forbidden: must not be specified when labelSelector is not set"]),
    ("spread: a merged key the selector already names",
     {"topologySpreadConstraints": [spread(matchLabelKeys=["app"])]},
     [f'{SPREAD}[0][0]: Invalid value: "app": exists in both matchLabelKeys and labelSelector']),
    ("spread: the label selector",
     {"topologySpreadConstraints": [spread(matchLabelKeys=["bad key!"], labelSelector={"matchExpressions": [{"key": "app", "operator": "In"}]})]},
     [f'{SPREAD}[0].matchLabelKeys[0]: Invalid value: "bad key!": {NAME_PART}',
      f"{SPREAD}[0].labelSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"]),
]  # fmt: skip


def labelled_pod(name: str, **spec: Any) -> dict[str, Any]:
    body = pod(name, **spec)
    body["metadata"]["labels"] = dict(LABELS)
    return body


@pytest.mark.parametrize(("spec", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_affinity_and_spread_are_refused_with_upstreams_fields(
    api: httpx.Client, ns: str, spec: dict[str, Any], expected: list[str]
) -> None:
    status = assert_status(api.post(pods_path(ns), json=labelled_pod("bad", **spec)), 422, "Invalid")
    assert [f"{c['field']}: {c['message']}" for c in status["details"]["causes"]] == expected
    assert status["message"] == 'Pod "bad" is invalid: ' + (expected[0] if len(expected) == 1 else "[" + ", ".join(expected) + "]")
    assert_status(api.get(pods_path(ns, "bad")), 404, "NotFound")


def every_feature() -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    in_zone("zone-a", "zone-b"), {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]},
                ]},
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": in_zone("not a label value!")}],
            },
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    term(namespaces=["default"], namespaceSelector={"matchLabels": {"team": "a"}}, matchLabelKeys=["version"]),
                ],
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": term(topologyKey=ZONE)}],
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOST, "mismatchLabelKeys": ["app"]}],
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": term(matchLabelKeys=["version", "missing"])}],
            },
        },
        "topologySpreadConstraints": [
            spread(minDomains=2, nodeAffinityPolicy="Honor", nodeTaintsPolicy="Ignore", matchLabelKeys=["version"]),
            spread(whenUnsatisfiable="ScheduleAnyway", maxSkew=3),
            spread(topologyKey=HOST, labelSelector=None),
        ],
    }  # fmt: skip


def test_a_pod_with_every_feature_is_accepted_and_its_keys_merged(api: httpx.Client, ns: str) -> None:
    created = create(api, ns, labelled_pod("good", **every_feature()))
    version_in = {"key": "version", "operator": "In", "values": ["1"]}
    assert created["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchExpressions"] == [version_in]
    required = created["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert required["labelSelector"]["matchExpressions"] == [version_in]
    # The stored pod stays updatable: labels, and (through the same validation) its spec's updatable fields.
    relabelled = api.patch(pods_path(ns, "good"), json={"metadata": {"labels": {"version": "2"}}},
                           headers={"content-type": "application/merge-patch+json"})  # fmt: skip
    assert relabelled.status_code == 200, relabelled.text
    deadline = api.patch(pods_path(ns, "good"), json={"spec": {"activeDeadlineSeconds": 30}},
                         headers={"content-type": "application/merge-patch+json"})  # fmt: skip
    assert deadline.status_code == 200, deadline.text


def test_pod_templates_and_workloads_are_held_to_the_same_rules(api: httpx.Client, ns: str) -> None:
    bad_spec = {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}], **anti_preferred({"weight": 0, "podAffinityTerm": term()})}
    field = "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"
    template = {"metadata": {"labels": {"app": "web"}}, "spec": bad_spec}
    refused = api.post(f"/api/v1/namespaces/{ns}/podtemplates", json={"metadata": {"name": "web"}, "template": template})
    causes = assert_status(refused, 422, "Invalid")["details"]["causes"]
    assert [(c["field"], c["message"]) for c in causes] == [(f"template.{field}", "Invalid value: 0: must be in the range 1-100")]
    deployment = {"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template}}
    refused = api.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json=deployment)
    causes = assert_status(refused, 422, "Invalid")["details"]["causes"]
    assert [(c["field"], c["message"]) for c in causes] == [(f"spec.template.{field}", "Invalid value: 0: must be in the range 1-100")]
    # A template's label keys are not merged, so a key also in matchLabels is accepted there.
    good = copy.deepcopy(template)
    good["spec"] = {"containers": bad_spec["containers"], **every_feature()}
    good["spec"]["topologySpreadConstraints"].append(spread(topologyKey=HOST, whenUnsatisfiable="ScheduleAnyway", matchLabelKeys=["app"]))
    deployment["spec"]["template"] = good  # type: ignore[index]
    accepted = api.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json=deployment)
    assert accepted.status_code == 201, accepted.text


def test_without_the_selector_merge_match_label_keys_follow_the_older_rule(start_server: Callable[..., ServerProcess]) -> None:
    server = start_server("--feature-gates", gates_flag({Gate.MatchLabelKeysInPodTopologySpreadSelectorMerge: False}))
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        body = labelled_pod("old-rule", topologySpreadConstraints=[spread(matchLabelKeys=["app", "bad key!"])])
        status = assert_status(client.post(pods_path("default"), json=body), 422, "Invalid")
        assert [f"{c['field']}: {c['message']}" for c in status["details"]["causes"]] == [
            f'{SPREAD}[0].matchLabelKeys[0]: Invalid value: "app": exists in both matchLabelKeys and labelSelector',
            f'{SPREAD}[0].matchLabelKeys[1]: Invalid value: "bad key!": {NAME_PART}',
        ]
        create(client, "default", labelled_pod("merged-off", topologySpreadConstraints=[spread(matchLabelKeys=["version"])]))


def test_an_update_keeps_the_errors_a_stored_pod_already_had_but_adds_none() -> None:
    """Pods stored before this server checked these fields (or with values upstream still tolerates
    on old pods) stay updatable; a gated pod's tightened node affinity is still checked."""
    invalid_spec = {**pod_affinity(term(topologyKey="a/b/c")), "topologySpreadConstraints": [spread(maxSkew=0)]}
    old = make_pod(**invalid_spec)
    new = copy.deepcopy(old)
    new["spec"]["activeDeadlineSeconds"] = 30
    assert validate_pod_update(new, old, allow_privileged=False) == []
    gated = make_pod(schedulingGates=[{"name": "example.com/wait"}])
    tightened = copy.deepcopy(gated)
    tightened["spec"].update(node_affinity(requiredDuringSchedulingIgnoredDuringExecution={"nodeSelectorTerms": [in_zone("bad value!")]}))
    errors = validate_pod_update(tightened, gated, allow_privileged=False)
    assert [(e.field, e.detail) for e in errors] == [(f"{REQUIRED_TERMS}[0].matchExpressions[0].values[0]", LABEL_VALUE)]
