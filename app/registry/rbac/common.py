"""What the four RBAC kinds share: names that are path segments, no spec or status, and
upstream's escalation prevention (a requester may only grant what they hold, unless they may
``escalate`` a role or ``bind`` it)."""

from __future__ import annotations

from typing import Any

from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext
from app.registry.columns import age_column, name_column
from app.registry.rbac.rbac_validation import validate_role_ref, validate_role_ref_update, validate_rules, validate_subjects
from kube.errors import ApiError, FieldError, forbidden_error

GROUP = "rbac.authorization.k8s.io"
# Metadata whose change never grants anything (what the garbage collector writes).
_GC_METADATA = ("ownerReferences", "finalizers", "managedFields", "resourceVersion", "generation")


class RBACStrategy(KindStrategy):
    group = GROUP
    name_rule = "path"
    tracks_generation = False
    spec_fields = ()

    def forbidden(self, name: str, why: str) -> ApiError:
        return forbidden_error(f'{self.plural}.{GROUP} "{name}" is forbidden: {why}', name, GROUP, self.plural)

    def spec_changed(self, new: Obj, old: Obj) -> bool:
        return False


def only_gc_fields_changed(new: Obj, old: Obj) -> bool:
    """Whether ``new`` differs from ``old`` only in what the garbage collector changes."""

    def stripped(obj: Obj) -> dict[str, Any]:
        meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _GC_METADATA}
        return {**obj, "metadata": meta}

    return stripped(new) == stripped(old)


# Every permission there is: what setting up an aggregationRule takes.
FULL_AUTHORITY = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]


def check_role_grant(strategy: RBACStrategy, obj: Obj, ctx: RequestContext, namespace: str, aggregation: bool = False) -> None:
    """A Role or ClusterRole may hold only rules its writer holds, unless they may escalate it;
    an aggregationRule (which may pull in any rule) takes holding every permission."""
    requester = ctx.requester
    if requester is None or requester.privileged:
        return
    name = obj["metadata"].get("name", "")
    if requester.authorize("escalate", GROUP, strategy.plural, namespace=namespace, name=name) is None:
        return
    if aggregation and requester.escalation("", FULL_AUTHORITY) is not None:
        raise strategy.forbidden(name, "must have cluster-admin privileges to use the aggregationRule")
    why = requester.escalation(namespace, obj.get("rules") or [])
    if why is not None:
        raise strategy.forbidden(name, why)


def check_binding_grant(strategy: RBACStrategy, obj: Obj, ctx: RequestContext, namespace: str) -> None:
    """A binding may grant only a role its writer holds all of, unless they may bind that role."""
    requester = ctx.requester
    if requester is None or requester.privileged:
        return
    name = obj["metadata"].get("name", "")
    ref = obj.get("roleRef") or {}
    role_kind, role_name = ref.get("kind"), str(ref.get("name") or "")
    resource = "clusterroles" if role_kind == "ClusterRole" else "roles"
    if requester.authorize("bind", str(ref.get("apiGroup") or ""), resource, namespace=namespace, name=role_name) is None:
        return
    rules, error = requester.rbac.role_rules(str(role_kind), role_name, namespace) if requester.rbac is not None else ((), "no RBAC rules")
    if error:
        raise strategy.forbidden(name, error)
    why = requester.escalation(namespace, [r.to_api() for r in rules])
    if why is not None:
        raise strategy.forbidden(name, why)


class RoleKindStrategy(RBACStrategy):
    """Role and ClusterRole: rules, which their writer must hold (``escalate`` aside)."""

    create_example: Obj = {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}

    def validation_errors(self, obj: Obj) -> list[FieldError]:
        return validate_rules(obj.get("rules"), namespaced=self.namespaced)

    def check_grant(self, obj: Obj, ctx: RequestContext) -> None:
        check_role_grant(self, obj, ctx, obj["metadata"].get("namespace", "") if self.namespaced else "")

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = self.validation_errors(obj)
        if not errs:
            self.check_grant(obj, ctx)
        return errs

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = self.validation_errors(new)
        if not errs and not only_gc_fields_changed(new, old):
            self.check_grant(new, ctx)
        return errs


def role_column(obj: Obj) -> str:
    ref = obj.get("roleRef") or {}
    return f"{ref.get('kind', '')}/{ref.get('name', '')}"


def subject_column(kind: str) -> PrinterColumn:
    """The -o wide column listing a binding's subjects of one kind."""

    def cell(obj: Obj) -> str:
        names = []
        for s in obj.get("subjects") or ():
            if s.get("kind") == kind:
                names.append(f"{s.get('namespace', '')}/{s.get('name', '')}" if kind == "ServiceAccount" else s.get("name", ""))
        return ", ".join(names)

    label = {"User": "Users", "Group": "Groups", "ServiceAccount": "ServiceAccounts"}[kind]
    return PrinterColumn(label, "string", "", cell, priority=1)


class BindingKindStrategy(RBACStrategy):
    """RoleBinding and ClusterRoleBinding: a role granted to subjects, which their writer must
    hold all of (``bind`` aside); the role they name never changes."""

    # The kinds of role the binding may name.
    role_kinds: tuple[str, ...] = ()
    create_example: Obj = {
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "example"}],
    }
    printer_columns = (
        name_column(),
        PrinterColumn("Role", "string", "", role_column),
        age_column(),
        subject_column("User"),
        subject_column("Group"),
        subject_column("ServiceAccount"),
    )

    def _namespace(self, obj: Obj) -> str:
        return obj["metadata"].get("namespace", "") if self.namespaced else ""

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_role_ref(obj.get("roleRef"), self.role_kinds) + validate_subjects(obj.get("subjects"), cluster=not self.namespaced)
        if not errs:
            check_binding_grant(self, obj, ctx, self._namespace(obj))
        return errs

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        errs = validate_role_ref_update(new, old) + validate_subjects(new.get("subjects"), cluster=not self.namespaced)
        if not errs and not only_gc_fields_changed(new, old):
            check_binding_grant(self, new, ctx, self._namespace(new))
        return errs
