"""DaemonSet (apps/v1, namespaced, status subresource): one pod per eligible node, kept by the
DaemonSet controller (controllers/daemonset.py)."""

from __future__ import annotations

from app.registry.apps.common import EXAMPLE_LABELS, example_template, omit_empty_status_fields
from app.registry.apps.daemonset_validation import (
    default_daemon_set_spec,
    validate_daemon_set_spec,
    validate_daemon_set_status,
    validate_daemon_set_update,
)
from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext, StatusStrategy, StatusSubresource
from app.registry.columns import age_column, container_columns, dig, format_label_selector, format_labels, name_column
from app.registry.core.podtemplate import drop_disabled_template_fields
from kube.errors import FieldError, bad_request, go_quote

SPEC = "io.k8s.api.apps.v1.DaemonSetSpec"
STATUS = "io.k8s.api.apps.v1.DaemonSetStatus"
# apps/v1 keeps the internal spec.templateGeneration in this annotation (upstream's conversion).
TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"


def template_generation(obj: Obj) -> int:
    """The template generation an object's annotation states (0 without one); 400 for one that is
    not a number, as upstream's conversion refuses it."""
    value = (obj["metadata"].get("annotations") or {}).get(TEMPLATE_GENERATION_ANNOTATION)
    if value is None:
        return 0
    try:
        return int(str(value), 10)
    except ValueError:
        raise bad_request(f'DaemonSet in version "v1" cannot be handled as a DaemonSet: strconv.ParseInt: parsing {go_quote(str(value))}: invalid syntax') from None


def set_template_generation(obj: Obj, generation: int) -> None:
    annotations = obj["metadata"].get("annotations")
    if not isinstance(annotations, dict):
        annotations = obj["metadata"]["annotations"] = {}
    annotations[TEMPLATE_GENERATION_ANNOTATION] = str(generation)


def _counter(name: str, field: str) -> PrinterColumn:
    return PrinterColumn(name, "integer", "", lambda o: int(dig(o, "status", field, default=0) or 0), doc=(STATUS, field))


class DaemonSetStrategy(KindStrategy):
    group = "apps"
    kind = "DaemonSet"
    plural = "daemonsets"
    singular = "daemonset"
    namespaced = True
    short_names = ("ds",)
    categories = ("all",)
    has_status = True
    create_example: Obj = {"spec": {"selector": {"matchLabels": EXAMPLE_LABELS}, "template": example_template()}}
    printer_columns = (
        name_column(),
        _counter("Desired", "desiredNumberScheduled"),
        _counter("Current", "currentNumberScheduled"),
        _counter("Ready", "numberReady"),
        _counter("Up-to-date", "updatedNumberScheduled"),
        _counter("Available", "numberAvailable"),
        PrinterColumn("Node Selector", "string", "", lambda o: format_labels(dig(o, "spec", "template", "spec", "nodeSelector")), doc=("io.k8s.api.core.v1.PodSpec", "nodeSelector")),
        age_column(),
        *container_columns(),
        PrinterColumn("Selector", "string", "", lambda o: format_label_selector(dig(o, "spec", "selector")), priority=1, doc=(SPEC, "selector")),
    )

    def prepare_for_create(self, obj: Obj, ctx: RequestContext) -> None:
        super().prepare_for_create(obj, ctx)
        omit_empty_status_fields(self, obj)
        set_template_generation(obj, max(template_generation(obj), 1))

    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_update(new, old, ctx)
        template_generation(new)  # a malformed one is refused, as upstream's conversion refuses it
        # The template generation is the server's: it moves when (and only when) the template changes.
        self.default(new, ctx)
        generation = template_generation(old)
        set_template_generation(new, generation + 1 if dig(new, "spec", "template") != dig(old, "spec", "template") else generation)

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        default_daemon_set_spec(obj.get("spec"))

    def drop_disabled_fields(self, obj: Obj, old: Obj | None, ctx: RequestContext) -> None:
        drop_disabled_template_fields(dig(obj, "spec", "template"), dig(old, "spec", "template"), ctx.feature_gates)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_daemon_set_spec(obj.get("spec"), allow_privileged=ctx.allow_privileged)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_daemon_set_update(new.get("spec"), old.get("spec"), allow_privileged=ctx.allow_privileged)


class DaemonSetStatusStrategy(StatusStrategy, DaemonSetStrategy):
    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_update(new, old, ctx)
        omit_empty_status_fields(self, new)
        # The template generation is part of the spec internally: a status write keeps it too.
        set_template_generation(new, template_generation(old))

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_daemon_set_status(new.get("status"), old.get("status"))


STATUS_STRATEGY = DaemonSetStatusStrategy()
STRATEGY: DaemonSetStrategy = DaemonSetStrategy(subresources=(StatusSubresource(STATUS_STRATEGY),))
