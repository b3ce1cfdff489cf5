"""ReplicaSet (apps/v1): validation of spec and status (pkg/apis/apps/validation) and defaults."""

from __future__ import annotations

from typing import Any

from app.registry.accessors import Errs
from app.registry.apps.common import nonnegative_fields, not_greater, validate_replicated_template, validate_workload_selector
from app.registry.core.podtemplate import default_pod_template
from app.registry.objectmeta import validate_immutable

# The status counters that may not exceed another one, with upstream's messages.
_NOT_ABOVE_REPLICAS = "cannot be greater than status.replicas"
STATUS_BOUNDS = (
    ("fullyLabeledReplicas", "replicas", _NOT_ABOVE_REPLICAS),
    ("readyReplicas", "replicas", _NOT_ABOVE_REPLICAS),
    ("availableReplicas", "replicas", _NOT_ABOVE_REPLICAS),
    ("availableReplicas", "readyReplicas", "cannot be greater than readyReplicas"),
)
STATUS_COUNTERS = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas", "observedGeneration", "terminatingReplicas")


def default_replica_set_spec(spec: Any) -> None:
    """SetDefaults_ReplicaSet (one replica) and the template's pod defaults."""
    if not isinstance(spec, dict):
        return
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    default_pod_template(spec.get("template"))


def validate_replicated_spec(spec: Any, kind: str, kind_word: str, *, allow_privileged: bool) -> Errs:
    """ValidateReplicaSetSpec (and its part of ValidateDeploymentSpec): replicas, minReadySeconds,
    the selector and the template it must match."""
    source = spec if isinstance(spec, dict) else {}
    errs = nonnegative_fields(source, "spec", "replicas", "minReadySeconds")
    selector = source.get("selector")
    errs += validate_workload_selector(selector, "spec.selector", kind_word)
    errs += validate_replicated_template(selector, source.get("template"), "spec.template", kind, allow_privileged=allow_privileged)
    return errs


def validate_replica_set_spec(spec: Any, *, allow_privileged: bool) -> Errs:
    return validate_replicated_spec(spec, "ReplicaSet", "deployment", allow_privileged=allow_privileged)


def validate_replica_set_update(new: Any, old: Any, *, allow_privileged: bool) -> Errs:
    """ValidateReplicaSetUpdate: a valid spec whose selector is as it was."""
    errs = validate_replica_set_spec(new, allow_privileged=allow_privileged)
    new_spec = new if isinstance(new, dict) else {}
    old_spec = old if isinstance(old, dict) else {}
    errs += validate_immutable(new_spec.get("selector"), old_spec.get("selector"), "spec.selector")
    return errs


def validate_replica_set_status(status: Any) -> Errs:
    """ValidateReplicaSetStatus: non-negative counters, none above replicas (available not above ready)."""
    return nonnegative_fields(status, "status", *STATUS_COUNTERS) + not_greater(status, "status", STATUS_BOUNDS)
