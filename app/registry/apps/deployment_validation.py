"""Deployment (apps/v1): validation of spec and status (pkg/apis/apps/validation) and defaults
(pkg/apis/apps/v1/defaults.go)."""

from __future__ import annotations

from typing import Any

from app.registry.accessors import Errs
from app.registry.apps.common import (
    nonnegative_fields,
    not_greater,
    not_more_than_100_percent,
    validate_collision_count_update,
    validate_int_or_percent,
)
from app.registry.apps.replicaset_validation import validate_replicated_spec
from app.registry.core.podtemplate import default_pod_template
from app.registry.objectmeta import is_int, validate_immutable
from kube.errors import forbidden, invalid, not_supported, required
from kube.intstr import int_or_percent_value

STRATEGY_TYPES = ("Recreate", "RollingUpdate")
_NOT_ABOVE_REPLICAS = "cannot be greater than status.replicas"
STATUS_BOUNDS = (
    ("updatedReplicas", "replicas", _NOT_ABOVE_REPLICAS),
    ("readyReplicas", "replicas", _NOT_ABOVE_REPLICAS),
    ("availableReplicas", "replicas", _NOT_ABOVE_REPLICAS),
    ("availableReplicas", "readyReplicas", "cannot be greater than readyReplicas"),
)
STATUS_COUNTERS = (
    "observedGeneration", "replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas",
    "terminatingReplicas", "collisionCount",
)  # fmt: skip


def default_deployment_spec(spec: Any) -> None:
    """SetDefaults_Deployment: one replica, RollingUpdate with 25% surge and unavailability, ten
    old revisions kept, 600 s to progress; and the template's pod defaults."""
    if not isinstance(spec, dict):
        return
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    strategy = spec.get("strategy")
    if strategy is None:
        strategy = spec["strategy"] = {}
    if isinstance(strategy, dict):
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.get("rollingUpdate")
            if rolling is None:
                rolling = strategy["rollingUpdate"] = {}
            if isinstance(rolling, dict):
                if rolling.get("maxUnavailable") is None:
                    rolling["maxUnavailable"] = "25%"
                if rolling.get("maxSurge") is None:
                    rolling["maxSurge"] = "25%"
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    if spec.get("progressDeadlineSeconds") is None:
        spec["progressDeadlineSeconds"] = 600
    default_pod_template(spec.get("template"))


def _validate_strategy(strategy: Any, path: str) -> Errs:
    """ValidateDeploymentStrategy."""
    source = strategy if isinstance(strategy, dict) else {}
    kind = source.get("type")
    rolling = source.get("rollingUpdate")
    if kind == "Recreate":
        if rolling is not None:
            return [forbidden(f"{path}.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'")]
        return []
    if kind == "RollingUpdate":
        if not isinstance(rolling, dict):
            return [required(f"{path}.rollingUpdate", "this should be defaulted and never be nil")]
        rpath = f"{path}.rollingUpdate"
        errs = validate_int_or_percent(rolling.get("maxUnavailable"), f"{rpath}.maxUnavailable")
        errs += validate_int_or_percent(rolling.get("maxSurge"), f"{rpath}.maxSurge")
        if int_or_percent_value(rolling.get("maxUnavailable")) == 0 and int_or_percent_value(rolling.get("maxSurge")) == 0:
            errs.append(invalid(f"{rpath}.maxUnavailable", rolling.get("maxUnavailable"), "may not be 0 when `maxSurge` is 0"))
        errs += not_more_than_100_percent(rolling.get("maxUnavailable"), f"{rpath}.maxUnavailable")
        return errs
    return [not_supported(path, strategy, STRATEGY_TYPES)]


def validate_deployment_spec(spec: Any, *, allow_privileged: bool) -> Errs:
    """ValidateDeploymentSpec."""
    source = spec if isinstance(spec, dict) else {}
    errs = validate_replicated_spec({k: v for k, v in source.items() if k != "minReadySeconds"}, "ReplicaSet", "deployment", allow_privileged=allow_privileged)
    errs += _validate_strategy(source.get("strategy"), "spec.strategy")
    errs += nonnegative_fields(source, "spec", "minReadySeconds", "revisionHistoryLimit")
    deadline = source.get("progressDeadlineSeconds")
    if deadline is not None:
        errs += nonnegative_fields(source, "spec", "progressDeadlineSeconds")
        min_ready = source.get("minReadySeconds") or 0
        if is_int(deadline) and is_int(min_ready) and deadline <= min_ready:
            errs.append(invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"))
    return errs


def validate_deployment_update(new: Any, old: Any, *, allow_privileged: bool) -> Errs:
    """ValidateDeploymentUpdate: a valid spec whose selector is as it was."""
    errs = validate_deployment_spec(new, allow_privileged=allow_privileged)
    new_spec = new if isinstance(new, dict) else {}
    old_spec = old if isinstance(old, dict) else {}
    errs += validate_immutable(new_spec.get("selector"), old_spec.get("selector"), "spec.selector")
    return errs


def validate_deployment_status(status: Any, old_status: Any) -> Errs:
    """ValidateDeploymentStatusUpdate."""
    errs = nonnegative_fields(status, "status", *STATUS_COUNTERS) + not_greater(status, "status", STATUS_BOUNDS)
    return errs + validate_collision_count_update(status, old_status)
