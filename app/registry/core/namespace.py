"""Namespace (v1, cluster-scoped, status and finalize subresources)."""

from __future__ import annotations

from app.registry.base import (
    ActionSubresource,
    KindStrategy,
    Obj,
    PrinterColumn,
    RequestContext,
    ScopeStrategy,
    StatusStrategy,
    StatusSubresource,
)
from app.registry.columns import age_column, dig, name_column
from app.registry.core.namespace_validation import validate_namespace_finalizers, validate_namespace_status
from kube.errors import ApiError, FieldError, not_found

# The finalizer the server's namespace lifecycle removes once the contents are gone.
NAMESPACE_FINALIZER = "kubernetes"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class NamespaceStrategy(ScopeStrategy):
    group = ""
    kind = "Namespace"
    plural = "namespaces"
    singular = "namespace"
    namespaced = False
    create_example: Obj = {}
    short_names = ("ns",)
    has_status = True
    tracks_generation = False
    name_rule = "label"
    # Upstream's namespace storage has no DeleteCollection.
    verbs = ("create", "delete", "get", "list", "patch", "update", "watch")
    field_selectors = {"status.phase": lambda o: dig(o, "status", "phase", default="") or ""}
    printer_columns = (
        name_column(),
        PrinterColumn("Status", "string", "The status of the namespace", lambda o: dig(o, "status", "phase", default="")),
        age_column(),
    )

    def prepare_for_create(self, obj: Obj, ctx: RequestContext) -> None:
        super().prepare_for_create(obj, ctx)
        obj["status"] = {"phase": "Active"}
        spec = obj.setdefault("spec", {})
        if not isinstance(spec, dict):
            return  # validation reports the wrong type
        finalizers = spec.get("finalizers")
        if not isinstance(finalizers, list):
            finalizers = spec["finalizers"] = []
        if NAMESPACE_FINALIZER not in finalizers:
            finalizers.append(NAMESPACE_FINALIZER)

    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_update(new, old, ctx)
        # spec.finalizers only change through /finalize.
        new["spec"] = old.get("spec", {})

    def blocks_deletion(self, obj: Obj) -> bool:
        return super().blocks_deletion(obj) or bool(dig(obj, "spec", "finalizers"))

    def prepare_for_delete(self, obj: Obj) -> None:
        obj.setdefault("status", {})["phase"] = "Terminating"

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        # Upstream labels every namespace with its own name (immutable).
        labels = obj["metadata"].setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = obj["metadata"].get("name", "")

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_namespace_finalizers(obj)

    def refuse_new_content(self, scope: Obj | None, name: str, creating: KindStrategy) -> ApiError | None:
        """Upstream's NamespaceLifecycle admission: no new objects in a namespace that does not
        exist or is being terminated."""
        if scope is None:
            return not_found(self.qualified_resource, name, self.group, self.plural)
        if scope["metadata"].get("deletionTimestamp") or (scope.get("status") or {}).get("phase") == "Terminating":
            return ApiError(
                403,
                "Forbidden",
                f"{creating.plural} is forbidden: unable to create new content in namespace {name} because it is being terminated",
                {"name": name, "kind": creating.plural, "causes": [{"reason": "NamespaceTerminating", "message": f"namespace {name} is being terminated", "field": "metadata.namespace"}]},
            )
        return None

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        # spec comes from the stored object (prepare_for_update), so only metadata can change.
        return []


class NamespaceStatusStrategy(StatusStrategy, NamespaceStrategy):
    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_namespace_status(new)


class NamespaceFinalize(ActionSubresource):
    """``namespaces/NAME/finalize``: only spec.finalizers changes (how the namespace lifecycle
    lets a Terminating namespace go once it is empty)."""

    name = "finalize"
    verbs = ("update",)
    records_managed_fields = False

    def apply(self, owner: KindStrategy, name: str, body: Obj, obj: Obj) -> Obj:
        wanted = (body.get("spec") or {}).get("finalizers") or []
        obj.setdefault("spec", {})["finalizers"] = list(wanted)
        if not wanted:
            obj["spec"].pop("finalizers")
        return obj


STATUS_STRATEGY = NamespaceStatusStrategy()
FINALIZE = NamespaceFinalize()
STRATEGY: NamespaceStrategy = NamespaceStrategy(subresources=(StatusSubresource(STATUS_STRATEGY), FINALIZE))
