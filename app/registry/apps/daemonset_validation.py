"""DaemonSet (apps/v1): validation of spec and status (pkg/apis/apps/validation) and defaults
(pkg/apis/apps/v1/defaults.go)."""

from __future__ import annotations

from typing import Any

from app.registry.accessors import Errs
from app.registry.apps.common import (
    nonnegative_fields,
    not_more_than_100_percent,
    selector_of,
    validate_collision_count_update,
    validate_int_or_percent,
    validate_long_running_template,
)
from app.registry.common import label_selector_is_empty, validate_label_selector
from app.registry.core.podtemplate import default_pod_template, template_labels, validate_pod_template_spec
from app.registry.objectmeta import validate_immutable
from kube.errors import invalid, not_supported, required
from kube.intstr import int_or_percent_value

UPDATE_STRATEGY_TYPES = ("RollingUpdate", "OnDelete")
STATUS_COUNTERS = (
    "currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady", "observedGeneration",
    "updatedNumberScheduled", "numberAvailable", "numberUnavailable", "collisionCount",
)  # fmt: skip


def default_daemon_set_spec(spec: Any) -> None:
    """SetDefaults_DaemonSet: RollingUpdate one node at a time without surge, ten old revisions
    kept; and the template's pod defaults."""
    if not isinstance(spec, dict):
        return
    strategy = spec.get("updateStrategy")
    if strategy is None:
        strategy = spec["updateStrategy"] = {}
    if isinstance(strategy, dict):
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.get("rollingUpdate")
            if rolling is None:
                rolling = strategy["rollingUpdate"] = {}
            if isinstance(rolling, dict):
                if rolling.get("maxUnavailable") is None:
                    rolling["maxUnavailable"] = 1
                if rolling.get("maxSurge") is None:
                    rolling["maxSurge"] = 0
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    default_pod_template(spec.get("template"))


def _validate_update_strategy(strategy: Any, path: str) -> Errs:
    source = strategy if isinstance(strategy, dict) else {}
    kind = source.get("type")
    if kind == "OnDelete":
        return []
    if kind != "RollingUpdate":
        return [not_supported(path, strategy, UPDATE_STRATEGY_TYPES)]
    rolling = source.get("rollingUpdate")
    if not isinstance(rolling, dict):
        return [required(f"{path}.rollingUpdate")]
    rpath = f"{path}.rollingUpdate"
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    errs = validate_int_or_percent(unavailable, f"{rpath}.maxUnavailable") + validate_int_or_percent(surge, f"{rpath}.maxSurge")
    errs += not_more_than_100_percent(unavailable, f"{rpath}.maxUnavailable") + not_more_than_100_percent(surge, f"{rpath}.maxSurge")
    has_unavailable, has_surge = int_or_percent_value(unavailable) != 0, int_or_percent_value(surge) != 0
    if has_unavailable and has_surge:
        errs.append(invalid(f"{rpath}.maxSurge", surge, "may not be set when maxUnavailable is non-zero"))
    elif not has_unavailable and not has_surge:
        errs.append(required(f"{rpath}.maxUnavailable", "cannot be 0 when maxSurge is 0"))
    return errs


def validate_daemon_set_spec(spec: Any, *, allow_privileged: bool) -> Errs:
    """ValidateDaemonSetSpec. Unlike the other workloads a missing selector is not itself an
    error upstream: it selects nothing, so the template's labels do not match it."""
    source = spec if isinstance(spec, dict) else {}
    selector = source.get("selector")
    template = source.get("template")
    errs = validate_label_selector(selector, "spec.selector")
    parsed = selector_of(selector) if selector is not None else None
    if (selector is None or parsed is not None) and (parsed is None or not parsed.matches(template_labels(template))):
        errs.append(invalid("spec.template.metadata.labels", template_labels(template), "`selector` does not match template `labels`"))
    if selector is not None and label_selector_is_empty(selector):
        errs.append(invalid("spec.selector", selector, "empty selector is invalid for daemonset"))
    errs += validate_pod_template_spec(template, "spec.template", allow_privileged=allow_privileged)
    errs += validate_long_running_template(template, "spec.template", "DaemonSet")
    errs += nonnegative_fields(source, "spec", "minReadySeconds")
    errs += _validate_update_strategy(source.get("updateStrategy"), "spec.updateStrategy")
    errs += nonnegative_fields(source, "spec", "revisionHistoryLimit")
    return errs


def validate_daemon_set_update(new: Any, old: Any, *, allow_privileged: bool) -> Errs:
    """ValidateDaemonSetUpdate: the selector stays, and the spec is valid. (Its rules on the
    template generation cannot fail here: the server alone sets it, in the strategy.)"""
    new_spec = new if isinstance(new, dict) else {}
    old_spec = old if isinstance(old, dict) else {}
    errs = validate_immutable(new_spec.get("selector"), old_spec.get("selector"), "spec.selector")
    return errs + validate_daemon_set_spec(new, allow_privileged=allow_privileged)


def validate_daemon_set_status(status: Any, old_status: Any) -> Errs:
    """ValidateDaemonSetStatusUpdate: non-negative counters, collisionCount not decremented."""
    return nonnegative_fields(status, "status", *STATUS_COUNTERS) + validate_collision_count_update(status, old_status)
