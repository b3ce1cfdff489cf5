"""ControllerRevision (apps/v1, namespaced): an immutable snapshot of a DaemonSet's or
StatefulSet's template, the history their controllers roll updates and rollbacks from."""

from __future__ import annotations

from typing import Any

from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext
from app.registry.columns import age_column, name_column
from app.registry.objectmeta import validate_immutable, validate_nonnegative
from kube.errors import FieldError, required


def _controller(obj: Obj) -> str:
    """The controlling owner as ``kind.group/name`` (upstream's printer), or ``<none>``."""
    for ref in obj["metadata"].get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            api_version = str(ref.get("apiVersion") or "")
            group = api_version.split("/", 1)[0] if "/" in api_version else ""
            kind = str(ref.get("kind") or "")
            qualified = f"{kind}.{group}" if group else kind
            return f"{qualified.lower()}/{ref.get('name', '')}" if kind else str(ref.get("name", ""))
    return "<none>"


def validate_revision(obj: Obj) -> list[FieldError]:
    revision = obj.get("revision")
    return validate_nonnegative(revision if revision is not None else 0, "revision")


def validate_data(data: Any) -> list[FieldError]:
    """ValidateControllerRevisionCreate's data rules: present, and a JSON object."""
    if data is None:
        return [required("data", "data is mandatory")]
    if not isinstance(data, dict):
        return [required("data", "data must be a valid JSON object")]
    return []


class ControllerRevisionStrategy(KindStrategy):
    group = "apps"
    kind = "ControllerRevision"
    plural = "controllerrevisions"
    singular = "controllerrevision"
    namespaced = True
    spec_fields = ("data", "revision")
    # Upstream's strategy never sets a generation for it.
    tracks_generation = False
    create_example: Obj = {"data": {}, "revision": 1}
    printer_columns = (
        name_column(),
        PrinterColumn("Controller", "string", "Controller of the object", _controller),
        PrinterColumn("Revision", "string", "", lambda o: int(o.get("revision") or 0), doc=("io.k8s.api.apps.v1.ControllerRevision", "revision")),
        age_column(),
    )

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        # revision has no omitempty: upstream stores 0 when it is not sent.
        obj.setdefault("revision", 0)

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_revision(obj) + validate_data(obj.get("data"))

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_revision(new) + validate_immutable(new.get("data"), old.get("data"), "data")


STRATEGY: ControllerRevisionStrategy = ControllerRevisionStrategy()
