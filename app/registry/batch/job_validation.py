"""Job (batch/v1): defaults (pkg/apis/batch/v1/defaults.go), the generated selector
(pkg/registry/batch/job/strategy.go) and validation of spec and status
(pkg/apis/batch/validation), with v1.37's gates on (JobManagedBy's stricter status rules, mutable
pod templates of suspended jobs).

``spec.scheduling`` (WorkloadWithJob) is served with GenericWorkload, as upstream's gate depends on
it; of its rules only the two the Job's own validation adds are enforced (a gang's minCount is at
most the parallelism, the basic/gang variant is fixed), not the Workload building blocks' own.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from app.registry.accessors import Errs
from app.registry.apps.common import count, nonnegative_fields, selector_of
from app.registry.common import validate_label_selector
from app.registry.core.podtemplate import (
    default_pod_template,
    restart_policy_of,
    template_labels,
    template_spec,
    validate_pod_template_spec,
)
from app.registry.objectmeta import (
    dns1123_label_problems,
    is_int,
    validate_domain_prefixed_path,
    validate_immutable,
    validate_qualified_name,
)
from kube.errors import GoSyntax, duplicate, invalid, not_supported, required, too_long, too_many

LEGACY_CONTROLLER_UID = "controller-uid"
LEGACY_JOB_NAME = "job-name"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
COMPLETION_MODES = ("NonIndexed", "Indexed")
POD_FAILURE_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")
EXIT_CODE_OPERATORS = ("In", "NotIn")
CONDITION_STATUSES = ("False", "True", "Unknown")
REPLACEMENT_POLICIES = ("Failed", "TerminatingOrFailed")
MAX_PARALLELISM_INDEXED = 100_000
MAX_FAILED_INDEXES = 100_000
COMPLETIONS_SOFT_LIMIT = 100_000
PARALLELISM_LIMIT_HIGH_COMPLETIONS = 10_000
MAX_FAILED_INDEXES_HIGH_COMPLETIONS = 10_000
MAX_POD_FAILURE_RULES = 20
MAX_EXIT_CODE_VALUES = 255
MAX_CONDITION_PATTERNS = 20
MAX_MANAGED_BY = 63
MAX_SUCCEEDED_INDEXES = 64 * 1024
MAX_SUCCESS_RULES = 20
INT32_MAX = 2**31 - 1
TERMINAL_CONDITIONS = ("Failed", "Complete", "FailureTarget")
_OMITTED = GoSyntax("<omitted>")


# ---- defaults and the generated selector -----------------------------------------------------------


def default_job_spec(spec: Any) -> None:
    """SetDefaults_Job (but the labels, see ``default_job_labels``) and the template's pod defaults."""
    if not isinstance(spec, dict):
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = INT32_MAX if spec.get("backoffLimitPerIndex") is not None else 6
    if spec.get("completionMode") is None:
        spec["completionMode"] = "NonIndexed"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = "Failed" if spec.get("podFailurePolicy") is not None else "TerminatingOrFailed"
    if spec.get("manualSelector") is None:
        spec["manualSelector"] = False
    policy = spec.get("podFailurePolicy")
    for rule in (policy.get("rules") or []) if isinstance(policy, dict) else []:
        for pattern in (rule.get("onPodConditions") or []) if isinstance(rule, dict) else []:
            if isinstance(pattern, dict) and not pattern.get("status"):
                pattern["status"] = "True"
    default_pod_template(spec.get("template"))


def default_job_labels(job: Any) -> None:
    """A Job without labels takes its template's (SetDefaults_Job, which upstream runs before the
    selector's labels are added to the template)."""
    meta = job.get("metadata") if isinstance(job, dict) else None
    spec = job.get("spec") if isinstance(job, dict) else None
    template = spec.get("template") if isinstance(spec, dict) else None
    labels = template.get("metadata", {}).get("labels") if isinstance(template, dict) and isinstance(template.get("metadata"), dict) else None
    if isinstance(meta, dict) and isinstance(labels, dict) and not meta.get("labels"):
        meta["labels"] = dict(labels)


def generate_selector(job: Any) -> None:
    """generateSelectorIfNeeded: unless manualSelector, label the template with the job's name and
    uid (legacy and batch.kubernetes.io keys) and select by the uid."""
    spec = job.get("spec") if isinstance(job, dict) else None
    if not isinstance(spec, dict) or spec.get("manualSelector") is True:
        return
    meta = job.get("metadata") or {}
    template = spec.get("template")
    if not isinstance(template, dict):
        return
    tmeta = template.get("metadata")
    if tmeta is None:
        tmeta = template["metadata"] = {}
    if not isinstance(tmeta, dict):
        return
    labels = tmeta.get("labels")
    if labels is None:
        labels = tmeta["labels"] = {}
    if not isinstance(labels, dict):
        return
    for key in (LEGACY_JOB_NAME, JOB_NAME):
        labels.setdefault(key, str(meta.get("name") or ""))
    for key in (LEGACY_CONTROLLER_UID, CONTROLLER_UID):
        labels.setdefault(key, str(meta.get("uid") or ""))
    selector = spec.get("selector")
    if selector is None:
        selector = spec["selector"] = {}
    if isinstance(selector, dict):
        match = selector.get("matchLabels")
        if match is None:
            match = selector["matchLabels"] = {}
        if isinstance(match, dict):
            match.setdefault(CONTROLLER_UID, str(meta.get("uid") or ""))


# ---- spec --------------------------------------------------------------------------------------------


def _has_label(template: Any, key: str, expected: str) -> Errs:
    labels = template_labels(template)
    path = f"spec.template.metadata.labels[{key}]"
    if key not in labels:
        return [required(path, f"must be '{expected}'")]
    if labels[key] != expected:
        return [invalid(path, labels, f"must be '{expected}'")]
    return []


def _validate_generated_selector(job: Any) -> Errs:
    """validateGeneratedSelector: the labels the server generated are on the template, and the
    selector still selects them."""
    spec = job.get("spec") if isinstance(job.get("spec"), dict) else {}
    if spec.get("manualSelector") is True or spec.get("selector") is None:
        return []
    meta = job["metadata"]
    uid, name = str(meta.get("uid") or ""), str(meta.get("name") or "")
    errs: Errs = [] if uid else [required("metadata.uid")]
    template = spec.get("template")
    errs += _has_label(template, LEGACY_CONTROLLER_UID, uid) + _has_label(template, LEGACY_JOB_NAME, name)
    errs += _has_label(template, CONTROLLER_UID, uid) + _has_label(template, JOB_NAME, name)
    expected = {CONTROLLER_UID: uid, JOB_NAME: name, LEGACY_CONTROLLER_UID: uid, LEGACY_JOB_NAME: name}
    parsed = selector_of(spec["selector"])
    if parsed is not None and not parsed.matches(expected):
        errs.append(invalid("spec.selector", spec["selector"], "`selector` not auto-generated"))
    return errs


def _interval(text: str, completions: int) -> tuple[int, int]:
    parts = text.split("-")
    if len(parts) > 2:
        raise ValueError(f'the fragment "{text}" violates the requirement that an index interval can have at most two parts separated by \'-\'')
    values = []
    for part in parts:
        if not re.fullmatch(r"[+-]?\d+", part):
            raise ValueError(f'cannot convert string to integer for index: "{part}"')
        if int(part) >= completions:
            raise ValueError(f'too large index: "{part}"')
        values.append(int(part))
    if len(values) == 2 and values[0] >= values[1]:
        raise ValueError(f"non-increasing order, previous: {values[0]}, current: {values[1]}")
    return values[0], values[-1]


def indexes_total(text: str, completions: int) -> int:
    """validateIndexesFormat: how many indexes ``1,3-5`` names (ValueError with upstream's text when malformed)."""
    if not text:
        return 0
    total, last = 0, None
    for fragment in text.split(","):
        first, end = _interval(fragment, completions)
        if last is not None and last >= first:
            raise ValueError(f"non-increasing order, previous: {last}, current: {first}")
        total += end - first + 1
        last = end
    return total


def _validate_pod_failure_policy(spec: Any, policy: Any, path: str) -> Errs:
    errs: Errs = []
    raw_rules: Any = policy.get("rules") if isinstance(policy, dict) else None
    rules: list[Any] = raw_rules if isinstance(raw_rules, list) else []
    if len(rules) > MAX_POD_FAILURE_RULES:
        errs.append(too_many(f"{path}.rules", len(rules), MAX_POD_FAILURE_RULES))
    tspec = template_spec(spec.get("template"))
    containers = {c.get("name") for key in ("containers", "initContainers") for c in tspec.get(key) or [] if isinstance(c, dict)}
    for index, rule in enumerate(rules):
        rpath = f"{path}.rules[{index}]"
        rule = rule if isinstance(rule, dict) else {}
        action = rule.get("action")
        if not action:
            errs.append(required(f"{rpath}.action", f"valid values: {_go_list(POD_FAILURE_ACTIONS)}"))
        elif action == "FailIndex":
            if spec.get("backoffLimitPerIndex") is None:
                errs.append(invalid(f"{rpath}.action", action, "requires the backoffLimitPerIndex to be set"))
        elif action not in POD_FAILURE_ACTIONS:
            errs.append(not_supported(f"{rpath}.action", action, POD_FAILURE_ACTIONS))
        codes = rule.get("onExitCodes")
        conditions = rule.get("onPodConditions") or []
        if codes is not None:
            errs += _validate_exit_codes(codes if isinstance(codes, dict) else {}, f"{rpath}.onExitCodes", containers)
        if conditions:
            errs += _validate_condition_patterns(conditions, f"{rpath}.onPodConditions")
        if codes is not None and conditions:
            errs.append(invalid(rpath, _OMITTED, "specifying both OnExitCodes and OnPodConditions is not supported"))
        if codes is None and not conditions:
            errs.append(invalid(rpath, _OMITTED, "specifying one of OnExitCodes and OnPodConditions is required"))
    return errs


def _go_list(values: tuple[str, ...]) -> str:
    """Go's %q of a sorted []string."""
    return "[" + " ".join(f'"{v}"' for v in sorted(values)) + "]"


def _validate_exit_codes(codes: Any, path: str, containers: set[Any]) -> Errs:
    errs: Errs = []
    operator = codes.get("operator")
    if not operator:
        errs.append(required(f"{path}.operator", f"valid values: {_go_list(EXIT_CODE_OPERATORS)}"))
    elif operator not in EXIT_CODE_OPERATORS:
        errs.append(not_supported(f"{path}.operator", operator, EXIT_CODE_OPERATORS))
    name = codes.get("containerName")
    if name is not None and name not in containers:
        errs.append(invalid(f"{path}.containerName", name, "must be one of the container or initContainer names in the pod template"))
    values: list[Any] = codes.get("values") if isinstance(codes.get("values"), list) else []
    if not values:
        errs.append(invalid(f"{path}.values", values, "at least one value is required"))
    elif len(values) > MAX_EXIT_CODE_VALUES:
        errs.append(too_many(f"{path}.values", len(values), MAX_EXIT_CODE_VALUES))
    seen: set[int] = set()
    ordered = True
    for index, value in enumerate(values):
        vpath = f"{path}.values[{index}]"
        if operator == "In" and value == 0:
            errs.append(invalid(vpath, value, "must not be 0 for the In operator"))
        if value in seen:
            errs.append(duplicate(vpath, value))
        else:
            seen.add(value)
        if index and values[index - 1] > value:
            ordered = False
    if not ordered:
        errs.append(invalid(f"{path}.values", values, "must be ordered"))
    return errs


def _validate_condition_patterns(patterns: list[Any], path: str) -> Errs:
    errs: Errs = []
    if len(patterns) > MAX_CONDITION_PATTERNS:
        errs.append(too_many(path, len(patterns), MAX_CONDITION_PATTERNS))
    for index, pattern in enumerate(patterns):
        pattern = pattern if isinstance(pattern, dict) else {}
        ppath = f"{path}[{index}]"
        errs += validate_qualified_name(str(pattern.get("type") or ""), f"{ppath}.type")
        status = pattern.get("status")
        if not status:
            errs.append(required(f"{ppath}.status", f"valid values: {_go_list(CONDITION_STATUSES)}"))
        elif status not in CONDITION_STATUSES:
            errs.append(not_supported(f"{ppath}.status", status, CONDITION_STATUSES))
    return errs


def _validate_success_policy(spec: Any, policy: Any, path: str) -> Errs:
    raw_rules: Any = policy.get("rules") if isinstance(policy, dict) else None
    rules: list[Any] = raw_rules if isinstance(raw_rules, list) else []
    errs: Errs = []
    if not rules:
        errs.append(required(f"{path}.rules", "at least one rules must be specified when the successPolicy is specified"))
    if len(rules) > MAX_SUCCESS_RULES:
        errs.append(too_many(f"{path}.rules", len(rules), MAX_SUCCESS_RULES))
    completions: int = spec["completions"] if is_int(spec.get("completions")) else 0
    for index, rule in enumerate(rules):
        rule = rule if isinstance(rule, dict) else {}
        rpath = f"{path}.rules[{index}]"
        indexes: Any = rule.get("succeededIndexes")
        succeeded: Any = rule.get("succeededCount")
        if indexes is None and succeeded is None:
            errs.append(required(rpath, "at least one of succeededCount or succeededIndexes must be specified"))
        total = 0
        if isinstance(indexes, str):
            if len(indexes) > MAX_SUCCEEDED_INDEXES:
                errs.append(too_long(f"{rpath}.succeededIndexes", MAX_SUCCEEDED_INDEXES))
            try:
                total = indexes_total(indexes, completions)
            except ValueError as exc:
                errs.append(invalid(f"{rpath}.succeededIndexes", indexes, f"error parsing succeededIndexes: {exc}"))
        if is_int(succeeded):
            spath = f"{rpath}.succeededCount"
            errs += nonnegative_fields(rule, rpath, "succeededCount")
            if succeeded > completions:
                errs.append(invalid(spath, succeeded, f"must be less than or equal to {completions} (the number of specified completions)"))
            if indexes is not None and succeeded > total:
                errs.append(invalid(spath, succeeded, f"must be less than or equal to {total} (the number of indexes in the specified succeededIndexes field)"))
    return errs


def _validate_scheduling(spec: Any, old_spec: Any) -> Errs:
    """The two rules of spec.scheduling the Job's validation adds to the building blocks'."""
    scheduling = spec.get("scheduling")
    if not isinstance(scheduling, dict):
        return []
    policy: Any = scheduling.get("schedulingPolicy") if isinstance(scheduling.get("schedulingPolicy"), dict) else {}
    errs: Errs = []
    gang = policy.get("gang") if isinstance(policy.get("gang"), dict) else None
    parallelism = spec.get("parallelism") if is_int(spec.get("parallelism")) else 1
    if gang is not None and is_int(gang.get("minCount")) and gang["minCount"] > parallelism:
        errs.append(invalid("spec.scheduling.schedulingPolicy.gang.minCount", gang["minCount"], f"must not be greater than parallelism ({parallelism})"))
    old_scheduling = old_spec.get("scheduling") if isinstance(old_spec, dict) else None
    old_policy = old_scheduling.get("schedulingPolicy") if isinstance(old_scheduling, dict) else None
    if isinstance(old_policy, dict) and policy and ("basic" in old_policy) != ("basic" in policy):
        errs.append(invalid(
            "spec.scheduling.schedulingPolicy", None,
            "the basic/gang policy variant is immutable after creation; only schedulingPolicy.gang.minCount may be updated",
        ))  # fmt: skip
    return errs


def _validate_spec_fields(spec: Any, old_spec: Any, allow_privileged: bool) -> Errs:
    """validateJobSpec: every rule but the selector's."""
    errs = nonnegative_fields(spec, "spec", "parallelism", "completions", "activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished", "backoffLimitPerIndex")
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    per_index, max_failed = spec.get("backoffLimitPerIndex"), spec.get("maxFailedIndexes")
    if max_failed is not None:
        errs += nonnegative_fields(spec, "spec", "maxFailedIndexes")
        if per_index is None:
            errs.append(required("spec.backoffLimitPerIndex", "when maxFailedIndexes is specified"))
    managed_by = spec.get("managedBy")
    if isinstance(managed_by, str):
        errs += validate_domain_prefixed_path(managed_by, "spec.managedBy")
        if len(managed_by) > MAX_MANAGED_BY:
            errs.append(too_long("spec.managedBy", MAX_MANAGED_BY))
    mode = spec.get("completionMode")
    if mode is not None:
        if mode not in COMPLETION_MODES:
            errs.append(not_supported("spec.completionMode", mode, COMPLETION_MODES))
        if mode == "Indexed":
            if completions is None:
                errs.append(required("spec.completions", "when completion mode is Indexed"))
            if is_int(parallelism) and parallelism > MAX_PARALLELISM_INDEXED:
                errs.append(invalid("spec.parallelism", parallelism, f"must be less than or equal to {MAX_PARALLELISM_INDEXED} when completion mode is Indexed"))
            if is_int(completions) and is_int(max_failed) and max_failed > completions:
                errs.append(invalid("spec.maxFailedIndexes", max_failed, "must be less than or equal to completions"))
            if is_int(max_failed) and max_failed > MAX_FAILED_INDEXES:
                errs.append(invalid("spec.maxFailedIndexes", max_failed, f"must be less than or equal to {MAX_FAILED_INDEXES}"))
            if is_int(completions) and completions > COMPLETIONS_SOFT_LIMIT and per_index is not None:
                above = f"when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
                if max_failed is None:
                    errs.append(required("spec.maxFailedIndexes", f"must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}"))
                if is_int(parallelism) and parallelism > PARALLELISM_LIMIT_HIGH_COMPLETIONS:
                    errs.append(invalid("spec.parallelism", parallelism, f"must be less than or equal to {PARALLELISM_LIMIT_HIGH_COMPLETIONS} {above}"))
                if is_int(max_failed) and max_failed > MAX_FAILED_INDEXES_HIGH_COMPLETIONS:
                    errs.append(invalid("spec.maxFailedIndexes", max_failed, f"must be less than or equal to {MAX_FAILED_INDEXES_HIGH_COMPLETIONS} {above}"))
    if mode in (None, "NonIndexed"):
        if per_index is not None:
            errs.append(invalid("spec.backoffLimitPerIndex", per_index, "requires indexed completion mode"))
        if max_failed is not None:
            errs.append(invalid("spec.maxFailedIndexes", max_failed, "requires indexed completion mode"))
    if spec.get("podFailurePolicy") is not None:
        errs += _validate_pod_failure_policy(spec, spec["podFailurePolicy"], "spec.podFailurePolicy")
    if spec.get("successPolicy") is not None:
        if mode != "Indexed":
            errs.append(invalid("spec.successPolicy", spec["successPolicy"], "requires indexed completion mode"))
        else:
            errs += _validate_success_policy(spec, spec["successPolicy"], "spec.successPolicy")
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None:
        if spec.get("podFailurePolicy") is not None:
            if replacement != "Failed":
                errs.append(not_supported("spec.podReplacementPolicy", replacement, ("Failed",)))
        elif replacement not in REPLACEMENT_POLICIES:
            errs.append(not_supported("spec.podReplacementPolicy", replacement, REPLACEMENT_POLICIES))
    errs += _validate_scheduling(spec, old_spec)
    template = spec.get("template")
    errs += validate_pod_template_spec(template, "spec.template", allow_privileged=allow_privileged)
    policy = restart_policy_of(template)
    rpath = "spec.template.spec.restartPolicy"
    if policy in ("Always", ""):
        errs.append(required(rpath, 'valid values: "OnFailure", "Never"'))
    elif policy not in ("OnFailure", "Never"):
        errs.append(not_supported(rpath, policy, ("OnFailure", "Never")))
    elif spec.get("podFailurePolicy") is not None and policy != "Never":
        errs.append(invalid(rpath, policy, 'only "Never" is supported when podFailurePolicy is specified'))
    return errs


def validate_job_spec(spec: Any, old_spec: Any = None, *, allow_privileged: bool) -> Errs:
    """ValidateJobSpec: the fields, the selector, and the template's labels against it."""
    source = spec if isinstance(spec, dict) else {}
    errs = _validate_spec_fields(source, old_spec, allow_privileged)
    selector = source.get("selector")
    if selector is None:
        errs.append(required("spec.selector"))
    else:
        errs += validate_label_selector(selector, "spec.selector")
    parsed = selector_of(selector) if selector is not None else None
    labels = template_labels(source.get("template"))
    if (selector is None or parsed is not None) and (parsed is None or not parsed.matches(labels)):
        errs.append(invalid("spec.template.metadata.labels", labels, "`selector` does not match template `labels`"))
    return errs


def _name_allows_completions(job: Any) -> Errs:
    spec: Any = job.get("spec") if isinstance(job.get("spec"), dict) else {}
    completions = spec.get("completions")
    if spec.get("completionMode") == "Indexed" and is_int(completions) and completions > 0:
        name = str(job["metadata"].get("name") or "")
        hostname = f"{name}-{completions - 1}"
        if dns1123_label_problems(hostname):
            return [invalid("metadata.name", name, f"will not able to create pod with invalid DNS label: {hostname}")]
    return []


def validate_job_create(job: Any, *, allow_privileged: bool) -> Errs:
    """ValidateJobCreate (ObjectMeta aside): the generated selector, the spec, the name's room for indexes."""
    return _validate_generated_selector(job) + validate_job_spec(job.get("spec"), allow_privileged=allow_privileged) + _name_allows_completions(job)


def _condition_true(status: Any, kind: str) -> bool:
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return any(isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True" for c in conditions or [])


def _mutable_template(old: Any) -> bool:
    """shouldAllowMutablePodTemplate: suspended, never started or suspended since, no active pods."""
    spec = old.get("spec") if isinstance(old.get("spec"), dict) else {}
    status = old.get("status") if isinstance(old.get("status"), dict) else {}
    not_started = status.get("startTime") is None
    return spec.get("suspend") is True and (not_started or _condition_true(status, "Suspended")) and count(status, "active") == 0


_SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "schedulingGates")


def _validate_template_update(new_spec: dict[str, Any], old_spec: dict[str, Any], mutable: bool) -> Errs:
    """validatePodTemplateUpdate: a running job's template is immutable; a suspended one that has
    not started may change its scheduling directives and its containers' resources."""
    template, old_template = new_spec.get("template"), old_spec.get("template")
    if not isinstance(template, dict) or not isinstance(old_template, dict):
        return validate_immutable(template, old_template, "spec.template")
    if mutable:
        old_template = copy.deepcopy(old_template)
        new_tspec, old_tspec = template_spec(template), old_template.setdefault("spec", {})
        affinity, old_affinity = new_tspec.get("affinity"), old_tspec.get("affinity")
        if affinity is None and isinstance(old_affinity, dict):
            rest = {k: v for k, v in old_affinity.items() if k != "nodeAffinity"}
            if rest:
                old_tspec["affinity"] = rest
            else:
                old_tspec.pop("affinity")
        elif isinstance(affinity, dict) and old_affinity is None:
            old_tspec["affinity"] = {"nodeAffinity": affinity["nodeAffinity"]} if "nodeAffinity" in affinity else {}
        elif isinstance(affinity, dict) and isinstance(old_affinity, dict):
            old_affinity.pop("nodeAffinity", None)
            if "nodeAffinity" in affinity:
                old_affinity["nodeAffinity"] = affinity["nodeAffinity"]
        for key in _SCHEDULING_DIRECTIVES:
            if key in new_tspec:
                old_tspec[key] = new_tspec[key]
            else:
                old_tspec.pop(key, None)
        old_meta = old_template.setdefault("metadata", {})
        for key in ("annotations", "labels"):
            new_value = (template.get("metadata") or {}).get(key)
            if new_value is None:
                old_meta.pop(key, None)
            else:
                old_meta[key] = new_value
    if old_spec.get("suspend") is not True or not mutable:
        return validate_immutable(template, old_template, "spec.template")
    # Only the containers' resources may change besides.
    old_tspec = copy.deepcopy(template_spec(old_template))
    new_tspec = template_spec(template)
    for key in ("containers", "initContainers"):
        new_list, old_list = new_tspec.get(key) or [], old_tspec.get(key) or []
        if len(new_list) == len(old_list):
            for new_c, old_c in zip(new_list, old_list, strict=True):
                if isinstance(new_c, dict) and isinstance(old_c, dict) and new_c.get("name") == old_c.get("name"):
                    if "resources" in new_c:
                        old_c["resources"] = new_c["resources"]
                    else:
                        old_c.pop("resources", None)
    return validate_immutable(new_tspec, old_tspec, "spec.template.spec")


def validate_job_update(new: Any, old: Any, *, allow_privileged: bool) -> Errs:
    """ValidateJobUpdate (ObjectMeta aside)."""
    new_spec = new.get("spec") if isinstance(new.get("spec"), dict) else {}
    old_spec = old.get("spec") if isinstance(old.get("spec"), dict) else {}
    errs = validate_job_spec(new_spec, old_spec, allow_privileged=allow_privileged)
    if new_spec.get("completionMode") != "Indexed":
        errs += validate_immutable(new_spec.get("completions"), old_spec.get("completions"), "spec.completions")
    elif new_spec.get("completions") not in (old_spec.get("completions"), None, new_spec.get("parallelism")):
        errs.append(invalid("spec.completions", new_spec.get("completions"), "can only be modified in tandem with spec.parallelism"))
    errs += validate_immutable(new_spec.get("selector"), old_spec.get("selector"), "spec.selector")
    errs += _validate_template_update(new_spec, old_spec, _mutable_template(old))
    for key in ("completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy", "successPolicy"):
        errs += validate_immutable(new_spec.get(key), old_spec.get(key), f"spec.{key}")
    return errs + _name_allows_completions(new)


# ---- status --------------------------------------------------------------------------------------------


def _finished(status: Any) -> bool:
    return _condition_true(status, "Complete") or _condition_true(status, "Failed")


def validate_job_status_update(new: Any, old: Any) -> Errs:
    """ValidateJobStatusUpdate with the options upstream's status strategy sets (JobManagedBy):
    most rules apply only when the fields they judge change, so a controller can catch up."""
    spec: Any = new.get("spec") if isinstance(new.get("spec"), dict) else {}
    status: Any = new.get("status") if isinstance(new.get("status"), dict) else {}
    old_status: Any = old.get("status") if isinstance(old.get("status"), dict) else {}
    errs = nonnegative_fields(status, "status", "active", "succeeded", "failed", "ready", "terminating")
    errs += _uncounted_errors(status.get("uncountedTerminatedPods"))

    def changed(key: str) -> bool:
        return status.get(key) != old_status.get(key)

    def condition_changed(kind: str) -> bool:
        return _condition_true(status, kind) != _condition_true(old_status, kind)

    complete, failed = _condition_true(status, "Complete"), _condition_true(status, "Failed")
    finished = complete or failed
    finished_changed = finished != _finished(old_status)
    completions = spec.get("completions")
    indexed = spec.get("completionMode") == "Indexed"
    conditions_path = "status.conditions"
    if (condition_changed("Complete") or condition_changed("Failed")) and complete and failed:
        errs.append(invalid(conditions_path, _OMITTED, "cannot set Complete=True and Failed=true conditions"))
    if (condition_changed("Complete") or condition_changed("FailureTarget")) and complete and _condition_true(status, "FailureTarget"):
        errs.append(invalid(conditions_path, _OMITTED, "cannot set Complete=True and FailureTarget=true conditions"))
    if (condition_changed("Complete") or changed("completionTime")) and status.get("completionTime") is not None and not complete:
        errs.append(invalid("status.completionTime", status["completionTime"], "cannot set completionTime when there is no Complete=True condition"))
    if (condition_changed("Complete") or changed("completionTime")) and status.get("completionTime") is None and complete:
        errs.append(required("status.completionTime", "completionTime is required for Complete jobs"))
    start, done = status.get("startTime"), status.get("completionTime")
    if (changed("startTime") or changed("completionTime")) and isinstance(start, str) and isinstance(done, str) and done < start:
        errs.append(invalid("status.completionTime", done, "must be equal to or after `startTime`"))
    if (condition_changed("Failed") or changed("failedIndexes")) and failed and not _condition_true(status, "FailureTarget"):
        errs.append(invalid(conditions_path, _OMITTED, "cannot set Failed=True condition without the FailureTarget=true condition"))
    if (condition_changed("Complete") or condition_changed("SuccessCriteriaMet")) and complete and not _condition_true(status, "SuccessCriteriaMet"):
        errs.append(invalid(conditions_path, _OMITTED, "cannot set Complete=True condition without the SuccessCriteriaMet=true condition"))
    if (finished_changed or changed("active")) and count(status, "active") > 0 and finished:
        errs.append(invalid("status.active", count(status, "active"), "active>0 is invalid for finished job"))
    suspended_empty = spec.get("suspend") is True and completions == 0
    if (finished_changed or changed("startTime")) and not suspended_empty and start is None and finished:
        errs.append(required("status.startTime", "startTime is required for finished job"))
    uncounted = status.get("uncountedTerminatedPods")
    if (finished_changed or changed("uncountedTerminatedPods")) and finished and isinstance(uncounted, dict) and (uncounted.get("failed") or uncounted.get("succeeded")):
        errs.append(invalid("status.uncountedTerminatedPods", uncounted, "must be empty for finished job"))
    if changed("completedIndexes") and is_int(completions):
        try:
            indexes_total(str(status.get("completedIndexes") or ""), completions)
        except ValueError as exc:
            errs.append(invalid("status.completedIndexes", status.get("completedIndexes"), f"error parsing completedIndexes: {exc}"))
    if changed("completedIndexes") and status.get("completedIndexes") and not indexed:
        errs.append(invalid("status.completedIndexes", status["completedIndexes"], "cannot set non-empty completedIndexes when non-indexed completion mode"))
    if changed("failedIndexes") and spec.get("backoffLimitPerIndex") is None and status.get("failedIndexes") is not None:
        errs.append(invalid("status.failedIndexes", status["failedIndexes"], "cannot set non-null failedIndexes when backoffLimitPerIndex is null"))
    if (finished_changed or changed("terminating")) and count(status, "terminating") > 0 and finished:
        errs.append(invalid("status.terminating", count(status, "terminating"), "terminating>0 is invalid for finished job"))
    if (changed("ready") or changed("active")) and status.get("ready") is not None and count(status, "ready") > count(status, "active"):
        errs.append(invalid("status.ready", count(status, "ready"), "cannot set more ready pods than active"))
    met = _condition_true(status, "SuccessCriteriaMet")
    if met and failed:
        errs.append(invalid(conditions_path, _OMITTED, "cannot set SuccessCriteriaMet=True and Failed=true conditions"))
    if met and _condition_true(status, "FailureTarget"):
        errs.append(invalid(conditions_path, _OMITTED, "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions"))
    if spec.get("successPolicy") is not None and not met and complete:
        errs.append(invalid(conditions_path, _OMITTED, "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True"))
    for kind in TERMINAL_CONDITIONS:
        if _condition_true(old_status, kind) and not _condition_true(status, kind):
            errs.append(invalid(conditions_path, _OMITTED, f"cannot disable the terminal {kind}=True condition"))
    if count(status, "failed") < count(old_status, "failed"):
        errs.append(invalid("status.failed", count(status, "failed"), "cannot decrease the failed counter"))
    if (not indexed or completions != spec.get("parallelism")) and count(status, "succeeded") < count(old_status, "succeeded"):
        errs.append(invalid("status.succeeded", count(status, "succeeded"), "cannot decrease the succeeded counter"))
    if done is not None and old_status.get("completionTime") is not None and done != old_status.get("completionTime"):
        errs.append(invalid("status.completionTime", done, "field is immutable"))
    resuming = _condition_true(old_status, "Suspended") and _condition_is(status, "Suspended", "False")
    if changed("startTime") and not resuming and old_status.get("startTime") is not None and spec.get("suspend") is not True:
        errs.append(invalid("status.startTime", start, "field is immutable for unsuspended job once set"))
    if _condition_true(old_status, "SuccessCriteriaMet") and not met:
        errs.append(invalid(conditions_path, _OMITTED, "cannot disable the SuccessCriteriaMet=True condition"))
    if _condition_true(old_status, "Complete") and not _condition_true(old_status, "SuccessCriteriaMet") and met:
        errs.append(invalid(conditions_path, _OMITTED, "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions"))
    return errs


def _condition_is(status: Any, kind: str, value: str) -> bool:
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return any(isinstance(c, dict) and c.get("type") == kind and c.get("status") == value for c in conditions or [])


def _uncounted_errors(uncounted: Any) -> Errs:
    if not isinstance(uncounted, dict):
        return []
    errs: Errs = []
    seen: set[str] = set()
    for key in ("succeeded", "failed"):
        for index, uid in enumerate(uncounted.get(key) or []):
            path = f"status.uncountedTerminatedPods.{key}[{index}]"
            if not uid:
                errs.append(invalid(path, uid, "must not be empty"))
            elif uid in seen:
                errs.append(duplicate(path, uid))
            else:
                seen.add(uid)
    return errs
