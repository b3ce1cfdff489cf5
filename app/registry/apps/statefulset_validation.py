"""StatefulSet (apps/v1): validation of spec and status (pkg/apis/apps/validation) and defaults
(pkg/apis/apps/v1/defaults.go, MaxUnavailableStatefulSet on as in v1.37).

Volume claim templates are stored as sent: PersistentVolumeClaims are served as storage only here,
so their spec is not validated (upstream validates each template's spec as a claim's)."""

from __future__ import annotations

import copy
from typing import Any

from app.registry.accessors import Errs
from app.registry.apps.common import (
    nonnegative_fields,
    not_greater,
    not_more_than_100_percent,
    selector_mismatch,
    selector_of,
    validate_collision_count_update,
    validate_int_or_percent,
    validate_long_running_template,
    validate_workload_selector,
)
from app.registry.core.podtemplate import default_pod_template, template_labels, validate_pod_template_spec
from app.registry.objectmeta import validate_annotations, validate_dns1123_label, validate_immutable, validate_labels, validate_nonnegative
from kube.errors import invalid, not_supported, required
from kube.intstr import int_or_percent_value

POD_MANAGEMENT_POLICIES = ("OrderedReady", "Parallel")
RETENTION_POLICIES = ("Retain", "Delete")
_NOT_ABOVE_REPLICAS = "cannot be greater than status.replicas"
STATUS_BOUNDS = (
    ("readyReplicas", "replicas", _NOT_ABOVE_REPLICAS),
    ("currentReplicas", "replicas", _NOT_ABOVE_REPLICAS),
    ("updatedReplicas", "replicas", _NOT_ABOVE_REPLICAS),
    ("availableReplicas", "replicas", _NOT_ABOVE_REPLICAS),
    ("availableReplicas", "readyReplicas", "cannot be greater than status.readyReplicas"),
)
STATUS_COUNTERS = ("replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas", "observedGeneration", "collisionCount")


def default_stateful_set_spec(spec: Any) -> None:
    """SetDefaults_StatefulSet: OrderedReady, RollingUpdate from partition 0 one pod at a time,
    claims retained, one replica, ten old revisions kept; and the template's pod defaults."""
    if not isinstance(spec, dict):
        return
    if not spec.get("podManagementPolicy"):
        spec["podManagementPolicy"] = "OrderedReady"
    strategy = spec.get("updateStrategy")
    if strategy is None:
        strategy = spec["updateStrategy"] = {}
    if isinstance(strategy, dict):
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
            if strategy.get("rollingUpdate") is None:
                strategy["rollingUpdate"] = {}
        rolling = strategy.get("rollingUpdate")
        if strategy["type"] == "RollingUpdate" and isinstance(rolling, dict):
            if rolling.get("partition") is None:
                rolling["partition"] = 0
            if rolling.get("maxUnavailable") is None:
                rolling["maxUnavailable"] = 1
    retention = spec.get("persistentVolumeClaimRetentionPolicy")
    if retention is None:
        retention = spec["persistentVolumeClaimRetentionPolicy"] = {}
    if isinstance(retention, dict):
        for key in ("whenDeleted", "whenScaled"):
            if not retention.get(key):
                retention[key] = "Retain"
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    default_pod_template(spec.get("template"))


def _validate_update_strategy(strategy: Any, path: str) -> Errs:
    source = strategy if isinstance(strategy, dict) else {}
    kind = source.get("type")
    rolling = source.get("rollingUpdate")
    if not kind:
        return [required(path)]
    if kind == "OnDelete":
        return [invalid(f"{path}.rollingUpdate", rolling, "only allowed for updateStrategy 'RollingUpdate'")] if rolling is not None else []
    if kind == "RollingUpdate":
        if not isinstance(rolling, dict):
            return []
        rpath = f"{path}.rollingUpdate"
        errs = nonnegative_fields(rolling, rpath, "partition")
        unavailable = rolling.get("maxUnavailable")
        if unavailable is not None:
            errs += validate_int_or_percent(unavailable, f"{rpath}.maxUnavailable")
            if int_or_percent_value(unavailable) == 0:
                errs.append(invalid(f"{rpath}.maxUnavailable", unavailable, "cannot be 0"))
            errs += not_more_than_100_percent(unavailable, f"{rpath}.maxUnavailable")
        return errs
    return [invalid(path, strategy, "must be 'RollingUpdate' or 'OnDelete'")]


def validate_stateful_set_spec(spec: Any, skip_template: bool = False, *, allow_privileged: bool) -> Errs:
    """ValidateStatefulSetSpec (``skip_template``: the stored spec is invalid already, upstream's
    SkipValidatePodTemplateSpec on update)."""
    source = spec if isinstance(spec, dict) else {}
    errs: Errs = []
    policy = source.get("podManagementPolicy")
    if not policy:
        errs.append(required("spec.podManagementPolicy"))
    elif policy not in POD_MANAGEMENT_POLICIES:
        errs.append(invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"))
    errs += _validate_update_strategy(source.get("updateStrategy"), "spec.updateStrategy")
    retention = source.get("persistentVolumeClaimRetentionPolicy")
    if isinstance(retention, dict):
        for key in ("whenDeleted", "whenScaled"):
            if retention.get(key) not in RETENTION_POLICIES:
                errs.append(not_supported(f"spec.persistentVolumeClaimRetentionPolicy.{key}", retention.get(key) or "", RETENTION_POLICIES))
    errs += nonnegative_fields(source, "spec", "replicas", "minReadySeconds")
    ordinals = source.get("ordinals")
    if isinstance(ordinals, dict) and ordinals.get("start") is not None:
        errs += validate_nonnegative(ordinals["start"], "spec.ordinals.start")
    service = source.get("serviceName")
    if isinstance(service, str) and service:
        errs += validate_dns1123_label(service, "spec.serviceName")
    selector = source.get("selector")
    errs += validate_workload_selector(selector, "spec.selector", "statefulset")
    template = source.get("template")
    if selector is not None and selector_of(selector) is None:
        errs.append(invalid("spec.selector", selector, ""))
    elif not isinstance(template, dict):
        errs.append(required("spec.template"))
    else:
        errs += _validate_template(selector, template, bool(source.get("volumeClaimTemplates")), skip_template, allow_privileged)
    errs += validate_long_running_template(template, "spec.template", "StatefulSet")
    return errs


def _validate_template(selector: Any, template: Any, has_claim_templates: bool, skip_template: bool, allow_privileged: bool) -> Errs:
    """ValidatePodTemplateSpecForStatefulSet, on a template whose hostname and subdomain (which
    the controller sets) are not validated."""
    checked = template
    spec = template.get("spec") if isinstance(template.get("spec"), dict) else None
    if spec is not None and (spec.get("hostname") or spec.get("subdomain") or has_claim_templates):
        checked = copy.deepcopy(template)
        checked["spec"].pop("hostname", None)
        checked["spec"].pop("subdomain", None)
    errs = selector_mismatch(selector, template, "spec.template")
    if not skip_template:
        errs += validate_pod_template_spec(checked, "spec.template", allow_privileged=allow_privileged)
    meta = template.get("metadata") if isinstance(template.get("metadata"), dict) else {}
    errs += validate_labels(template_labels(template) or None, "spec.template.labels")
    errs += validate_annotations(meta.get("annotations") if isinstance(meta, dict) else None, "spec.template.annotations")
    return errs


def validate_stateful_set_update(new: Any, old: Any, *, allow_privileged: bool) -> Errs:
    """ValidateStatefulSetUpdate: a valid spec (its template unchecked when the stored one was
    invalid already) whose selector, claim templates, service and pod management stay as they were."""
    old_spec = old if isinstance(old, dict) else {}
    new_spec = new if isinstance(new, dict) else {}
    errs = validate_stateful_set_spec(
        new, skip_template=bool(validate_stateful_set_spec(old, allow_privileged=allow_privileged)), allow_privileged=allow_privileged
    )
    for key in ("selector", "volumeClaimTemplates", "serviceName", "podManagementPolicy"):
        errs += validate_immutable(new_spec.get(key), old_spec.get(key), f"spec.{key}")
    return errs


def validate_stateful_set_status(status: Any, old_status: Any) -> Errs:
    """ValidateStatefulSetStatusUpdate."""
    errs = nonnegative_fields(status, "status", *STATUS_COUNTERS) + not_greater(status, "status", STATUS_BOUNDS)
    return errs + validate_collision_count_update(status, old_status)
