"""Job (batch/v1, namespaced, status subresource): pods run to completion, counted by the Job
controller (controllers/job.py); finished Jobs with ttlSecondsAfterFinished are deleted by the
TTL-after-finished controller."""

from __future__ import annotations

from datetime import UTC, datetime

from app.registry.apps.common import omit_empty_status_fields
from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext, StatusStrategy, StatusSubresource
from app.registry.batch.job_validation import (
    default_job_labels,
    default_job_spec,
    generate_selector,
    validate_job_create,
    validate_job_status_update,
    validate_job_update,
)
from app.registry.columns import age_column, container_columns, dig, format_label_selector, name_column
from app.registry.core.podtemplate import drop_disabled_template_fields
from kube.errors import FieldError
from kube.gatedfields import JOB, drop_disabled
from kube.timeutil import human_duration, parse_time

SPEC = "io.k8s.api.batch.v1.JobSpec"
STATUS = "io.k8s.api.batch.v1.JobStatus"


def _condition(obj: Obj, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in dig(obj, "status", "conditions", default=[]) or [])


def job_status_cell(obj: Obj) -> str:
    """The STATUS column, as upstream's printer decides it."""
    if _condition(obj, "Complete"):
        return "Complete"
    if _condition(obj, "Failed"):
        return "Failed"
    if obj["metadata"].get("deletionTimestamp"):
        return "Terminating"
    for kind in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if _condition(obj, kind):
            return kind
    return "Running"


def completions_cell(obj: Obj) -> str:
    succeeded = dig(obj, "status", "succeeded", default=0) or 0
    completions = dig(obj, "spec", "completions")
    if completions is not None:
        return f"{succeeded}/{completions}"
    parallelism = dig(obj, "spec", "parallelism", default=0) or 0
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def duration_cell(obj: Obj) -> str:
    start = parse_time(str(dig(obj, "status", "startTime", default="") or ""))
    if start is None:
        return ""
    end = parse_time(str(dig(obj, "status", "completionTime", default="") or "")) or datetime.now(UTC)
    return human_duration(int((end - start).total_seconds()))


class JobStrategy(KindStrategy):
    group = "batch"
    kind = "Job"
    plural = "jobs"
    singular = "job"
    namespaced = True
    categories = ("all",)
    has_status = True
    # Upstream's batch/v1 Jobs orphan their pods unless a propagation policy says otherwise.
    default_propagation_policy = "Orphan"
    field_selectors = {"status.successful": lambda o: str(dig(o, "status", "succeeded", default=0) or 0)}
    create_example: Obj = {
        "spec": {
            "suspend": True,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}},
        }
    }
    printer_columns = (
        name_column(),
        PrinterColumn("Status", "string", "Status of the job.", job_status_cell),
        PrinterColumn("Completions", "string", "", completions_cell, doc=(STATUS, "succeeded")),
        PrinterColumn("Duration", "string", "Time required to complete the job.", duration_cell),
        age_column(),
        *container_columns(),
        PrinterColumn("Selector", "string", "", lambda o: format_label_selector(dig(o, "spec", "selector")), priority=1, doc=(SPEC, "selector")),
    )

    def prepare_for_create(self, obj: Obj, ctx: RequestContext) -> None:
        super().prepare_for_create(obj, ctx)
        omit_empty_status_fields(self, obj)

    def prepare_named(self, obj: Obj, ctx: RequestContext) -> None:
        # The selector names the Job: generated once it has its name. Upstream defaults (the Job's
        # labels from its template's, manualSelector) before that.
        self.default(obj, ctx)
        default_job_labels(obj)
        generate_selector(obj)

    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_update(new, old, ctx)
        default_job_labels(new)

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        default_job_spec(obj.get("spec"))

    def drop_disabled_fields(self, obj: Obj, old: Obj | None, ctx: RequestContext) -> None:
        drop_disabled(JOB, obj, old, ctx.feature_gates)
        drop_disabled_template_fields(dig(obj, "spec", "template"), dig(old, "spec", "template"), ctx.feature_gates)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_job_create(obj, allow_privileged=ctx.allow_privileged)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_job_update(new, old, allow_privileged=ctx.allow_privileged)


class JobStatusStrategy(StatusStrategy, JobStrategy):
    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_update(new, old, ctx)
        omit_empty_status_fields(self, new)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_job_status_update(new, old)


STATUS_STRATEGY = JobStatusStrategy()
STRATEGY: JobStrategy = JobStrategy(subresources=(StatusSubresource(STATUS_STRATEGY),))
