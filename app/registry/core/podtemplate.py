"""The pod template every workload kind embeds (core/v1 PodTemplateSpec): its defaults, its
validation and its gate drop rules, the pod's own rules applied to a template; and the PodTemplate
kind (core/v1, namespaced), a stored template and nothing more, as upstream serves it.

Upstream defaults a template's spec as it defaults a pod's (SetDefaults_PodSpec and the container
defaults) but leaves out what only pods get (``enableServiceLinks``); it validates the template's
labels and annotations at ``<template>.labels`` and ``<template>.annotations`` and its spec as a
pod spec, and refuses ephemeral containers in it.
"""

from __future__ import annotations

from typing import Any

from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext
from app.registry.columns import format_labels, name_column, template_containers
from app.registry.core.pod_validation import validate_pod_spec
from app.registry.objectmeta import validate_annotations, validate_labels
from kube.errors import FieldError, forbidden, required
from kube.gatedfields import POD, drop_disabled

# Upstream's default terminationGracePeriodSeconds.
DEFAULT_GRACE_PERIOD_SECONDS = 30


def default_pod_spec(spec: Any) -> None:
    """SetDefaults_PodSpec and the container defaults, in place (a non-object is left to validation)."""
    if not isinstance(spec, dict):
        return
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", DEFAULT_GRACE_PERIOD_SECONDS)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        for container in containers if isinstance(containers, list) else []:
            if isinstance(container, dict):
                container.setdefault("terminationMessagePath", "/dev/termination-log")
                container.setdefault("terminationMessagePolicy", "File")
                container.setdefault("imagePullPolicy", "IfNotPresent")
                container.setdefault("resources", {})


def default_pod_template(template: Any) -> None:
    """A workload's ``spec.template`` defaulted in place (its spec; metadata stays as sent)."""
    if isinstance(template, dict):
        default_pod_spec(template.setdefault("spec", {}))


def template_labels(template: Any) -> dict[str, str]:
    """The labels of a pod template (empty when absent or malformed)."""
    meta = template.get("metadata") if isinstance(template, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


def validate_pod_template_spec(template: Any, path: str, *, allow_privileged: bool) -> list[FieldError]:
    """upstream's ValidatePodTemplateSpec: labels, annotations, the spec as a pod's, no ephemeral containers."""
    if not isinstance(template, dict):
        return [required(path)]
    meta = template.get("metadata") if isinstance(template.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    errs = validate_labels(meta.get("labels"), f"{path}.labels")
    errs += validate_annotations(meta.get("annotations"), f"{path}.annotations")
    spec = template.get("spec")
    errs += validate_pod_spec(spec, f"{path}.spec", allow_privileged=allow_privileged)
    if isinstance(spec, dict) and spec.get("ephemeralContainers"):
        errs.append(forbidden(f"{path}.spec.ephemeralContainers", "ephemeral containers not allowed in pod template"))
    return errs


def drop_disabled_template_fields(template: Any, old_template: Any, gates: Any) -> None:
    """upstream's DropDisabledTemplateFields: the pod drop rules applied to a template's spec."""
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        return
    old = {"spec": old_template.get("spec")} if isinstance(old_template, dict) and isinstance(old_template.get("spec"), dict) else None
    drop_disabled(POD, {"spec": template["spec"]}, old, gates)


def restart_policy_of(template: Any) -> str:
    """A template's spec.restartPolicy ("" when unset or malformed)."""
    spec = template.get("spec") if isinstance(template, dict) else None
    policy = spec.get("restartPolicy") if isinstance(spec, dict) else None
    return policy if isinstance(policy, str) else ""


def template_spec(template: Any) -> Obj:
    """A template's spec (empty when absent or malformed)."""
    spec = template.get("spec") if isinstance(template, dict) else None
    return spec if isinstance(spec, dict) else {}


def _template_column(name: str, description: str, cell: int) -> PrinterColumn:
    return PrinterColumn(name, "string", description, lambda o: template_containers(o, "template")[cell])


class PodTemplateStrategy(KindStrategy):
    """upstream's podTemplateStrategy: the template defaulted, dropped and validated as a
    workload's, and the generation moved by any change of the template."""

    kind = "PodTemplate"
    plural = "podtemplates"
    singular = "podtemplate"
    namespaced = True
    spec_fields = ("template",)
    create_example: Obj = {"template": {"metadata": {"labels": {"app": "example"}}, "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}}
    printer_columns = (
        name_column(),
        _template_column("Containers", "Names of each container in the template.", 0),
        _template_column("Images", "Images referenced by each container in the template.", 1),
        PrinterColumn("Pod Labels", "string", "The labels for the pod template.", lambda o: format_labels(template_labels(o.get("template")))),
    )

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        default_pod_template(obj.get("template"))

    def drop_disabled_fields(self, obj: Obj, old: Obj | None, ctx: RequestContext) -> None:
        drop_disabled_template_fields(obj.get("template"), old.get("template") if old else None, ctx.feature_gates)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_pod_template_spec(obj.get("template"), "template", allow_privileged=ctx.allow_privileged)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_pod_template_spec(new.get("template"), "template", allow_privileged=ctx.allow_privileged)


STRATEGY: PodTemplateStrategy = PodTemplateStrategy()
