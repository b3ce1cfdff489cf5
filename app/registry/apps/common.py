"""What the apps/v1 workload kinds share (pkg/apis/apps/validation): int-or-percent fields, the
selector every workload must have, its pod template checked against that selector, and the
counters of their status."""

from __future__ import annotations

import functools
from typing import Any

from app import protobuf
from app.registry.accessors import Errs
from app.registry.base import KindStrategy, Obj
from app.registry.common import label_selector_is_empty, validate_label_selector
from app.registry.core.podtemplate import restart_policy_of, template_labels, template_spec, validate_pod_template_spec
from app.registry.objectmeta import IS_NEGATIVE, is_int, validate_nonnegative
from kube.errors import ApiError, forbidden, invalid, not_supported, required
from kube.intstr import PERCENT, percent
from kube.labels import selector_from_label_selector_object

# apimachinery's IsValidPercent message.
_PERCENT_MESSAGE = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%', or '93%', regex used for validation is '[0-9]+%')"
# The pod template and the conditions of the workload kinds' create examples.
EXAMPLE_LABELS = {"app": "example"}


def example_template() -> Obj:
    """The pod template of the workload kinds' create examples."""
    return {"metadata": {"labels": dict(EXAMPLE_LABELS)}, "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}


# ---- int or percent ------------------------------------------------------------------------------


def validate_int_or_percent(value: Any, path: str) -> Errs:
    """ValidatePositiveIntOrPercent: a non-negative integer, or a percent string."""
    if isinstance(value, str):
        return [] if PERCENT.match(value) else [invalid(path, value, _PERCENT_MESSAGE)]
    if is_int(value):
        return [invalid(path, value, IS_NEGATIVE)] if value < 0 else []
    return [invalid(path, value, "must be an integer or percentage (e.g '5%')")]


def not_more_than_100_percent(value: Any, path: str) -> Errs:
    """IsNotMoreThan100Percent: a percent over 100 is refused (integers are not percentages)."""
    number = percent(value)
    if number is not None and number > 100:
        return [invalid(path, value, "must not be greater than 100%")]
    return []


# ---- selector and template -----------------------------------------------------------------------


def selector_of(selector: Any) -> Any:
    """The parsed label selector, or None when it cannot be parsed (LabelSelectorAsSelector's error)."""
    if not isinstance(selector, dict):
        return None
    try:
        return selector_from_label_selector_object(selector)
    except ApiError:
        return None


def validate_workload_selector(selector: Any, path: str, kind_word: str) -> Errs:
    """A workload's selector: required, strictly valid, and never empty (``empty selector is
    invalid for <kind_word>``: upstream says "deployment" for ReplicaSets too)."""
    if selector is None:
        return [required(path)]
    errs = validate_label_selector(selector, path)
    if label_selector_is_empty(selector):
        errs.append(invalid(path, selector, f"empty selector is invalid for {kind_word}"))
    return errs


def selector_mismatch(selector: Any, template: Any, path: str) -> Errs:
    """The template's labels must match a non-empty selector (reported at ``path.metadata.labels``);
    a missing selector selects nothing, so no template matches it."""
    labels = template_labels(template)
    if selector is None:
        return [invalid(f"{path}.metadata.labels", labels, "`selector` does not match template `labels`")]
    parsed = selector_of(selector)
    if parsed is None or label_selector_is_empty(selector):
        return []
    if not parsed.matches(labels):
        return [invalid(f"{path}.metadata.labels", labels, "`selector` does not match template `labels`")]
    return []


def validate_long_running_template(template: Any, path: str, kind: str) -> Errs:
    """A template of pods that run until deleted: restartPolicy Always, no activeDeadlineSeconds."""
    errs: Errs = []
    policy = restart_policy_of(template)
    if policy != "Always":
        errs.append(not_supported(f"{path}.spec.restartPolicy", policy, ("Always",)))
    if template_spec(template).get("activeDeadlineSeconds") is not None:
        errs.append(forbidden(f"{path}.spec.activeDeadlineSeconds", f"activeDeadlineSeconds in {kind} is not Supported"))
    return errs


def validate_replicated_template(selector: Any, template: Any, path: str, kind: str, *, allow_privileged: bool) -> Errs:
    """ValidatePodTemplateSpecForReplicaSet: the selector matches, the template is a valid long-running one."""
    if selector is not None and selector_of(selector) is None:
        return [invalid(path.rsplit(".", 1)[0] + ".selector", selector, "invalid label selector")]
    if not isinstance(template, dict):
        return [required(path)]
    errs = selector_mismatch(selector, template, path)
    errs += validate_pod_template_spec(template, path, allow_privileged=allow_privileged)
    errs += validate_long_running_template(template, path, kind)
    return errs


# ---- spec and status numbers ---------------------------------------------------------------------


def nonnegative_fields(obj: Any, path: str, *names: str) -> Errs:
    """ValidateNonnegativeField for each named field that is set."""
    errs: Errs = []
    source = obj if isinstance(obj, dict) else {}
    for name in names:
        value = source.get(name)
        if value is not None:
            errs += validate_nonnegative(value, f"{path}.{name}")
    return errs


def count(obj: Any, name: str) -> int:
    """An integer field of a status (0 when unset or malformed)."""
    value: Any = obj.get(name) if isinstance(obj, dict) else None
    return int(value) if is_int(value) else 0


def not_greater(status: Any, path: str, pairs: tuple[tuple[str, str, str], ...]) -> Errs:
    """Each (field, bound, message) pair: ``status.field`` may not exceed ``status.bound``."""
    return [invalid(f"{path}.{name}", count(status, name), message) for name, bound, message in pairs if count(status, name) > count(status, bound)]


def validate_collision_count_update(new: Any, old: Any) -> Errs:
    """status.collisionCount may not be decremented (IsDecremented)."""
    new_count = new.get("collisionCount") if isinstance(new, dict) else None
    old_count = old.get("collisionCount") if isinstance(old, dict) else None
    if is_int(old_count) and (new_count is None or (is_int(new_count) and new_count < old_count)):
        return [invalid("status.collisionCount", new_count if is_int(new_count) else 0, "cannot be decremented")]
    return []


def status_of(obj: Obj) -> Obj:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def spec_of(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def omit_empty_status_fields(strategy: KindStrategy, obj: Obj) -> None:
    """Leave out of ``obj``'s status the fields encoding/json leaves out at their zero value
    (``omitempty`` counters and strings that are not pointers: a ReplicaSet's ``readyReplicas:
    0``), as an object upstream stored reads back; the generic store adds the ones it writes
    anyway (``replicas: 0``)."""
    status = obj.get("status")
    if not isinstance(status, dict):
        return  # the generic store refuses the wrong type before the hooks run
    for name, zero in _omitted_zeros(strategy.api_version, strategy.kind):
        value = status.get(name)
        if value == zero and type(value) is type(zero):
            del status[name]


@functools.cache
def _omitted_zeros(api_version: str, kind: str) -> tuple[tuple[str, Any], ...]:
    message = protobuf.schema().kinds[(api_version, kind)]
    status = next(f for f in message.fields if f.json == "status").message
    assert status is not None
    zeros = {"int32": 0, "int64": 0, "string": "", "bool": False}
    return tuple((f.json, zeros[f.type]) for f in status.fields if f.label == protobuf.SCALAR and f.omitempty and not f.pointer and f.type in zeros)
