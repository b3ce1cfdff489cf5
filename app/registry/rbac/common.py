"""What the four RBAC kinds share: names that are path segments, no spec or status, and
upstream's escalation prevention (a requester may only grant what they hold, unless they may
``escalate`` a role or ``bind`` it)."""

from __future__ import annotations

from typing import Any

from app.registry.base import KindStrategy, Obj, RequestContext
from kube.errors import ApiError, forbidden_error

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
