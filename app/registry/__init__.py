"""Every served kind, registered once. Adding a kind = adding its module to ``KINDS``."""

from __future__ import annotations

from app.registry.authentication import selfsubjectreview
from app.registry.authorization import selfsubjectaccessreview, selfsubjectrulesreview, subjectaccessreview
from app.registry.base import KindStrategy
from app.registry.coordination import lease
from app.registry.core import event, namespace, node, pod, serviceaccount
from app.registry.rbac import clusterrole, clusterrolebinding, role, rolebinding
from app.registry.resource import (
    deviceclass,
    devicetaintrule,
    resourceclaim,
    resourceclaimtemplate,
    resourceslice,
)
from app.registry.scheduling import priorityclass

KINDS: tuple[KindStrategy, ...] = (
    namespace.STRATEGY,
    node.STRATEGY,
    pod.STRATEGY,
    event.STRATEGY,
    deviceclass.STRATEGY,
    resourceclaim.STRATEGY,
    resourceclaimtemplate.STRATEGY,
    resourceslice.STRATEGY,
    devicetaintrule.STRATEGY,
    lease.STRATEGY,
    serviceaccount.STRATEGY,
    role.STRATEGY,
    clusterrole.STRATEGY,
    rolebinding.STRATEGY,
    clusterrolebinding.STRATEGY,
    selfsubjectreview.STRATEGY,
    selfsubjectaccessreview.STRATEGY,
    selfsubjectrulesreview.STRATEGY,
    subjectaccessreview.STRATEGY,
    priorityclass.STRATEGY,
)

# The kind whose objects are the namespaces that namespaced objects live in.
NAMESPACE_KIND: KindStrategy = namespace.STRATEGY

_BY_PATH: dict[tuple[str, str, str], KindStrategy] = {(k.group, k.version, k.plural): k for k in KINDS}
_BY_KIND: dict[tuple[str, str], KindStrategy] = {(k.api_version, k.kind): k for k in KINDS}


def lookup(group: str, version: str, plural: str) -> KindStrategy | None:
    return _BY_PATH.get((group, version, plural))


def lookup_kind(api_version: str, kind: str) -> KindStrategy | None:
    return _BY_KIND.get((api_version, kind))


def group_versions() -> list[tuple[str, str]]:
    """Served (group, version) pairs in a stable order, core first."""
    seen: list[tuple[str, str]] = []
    for k in KINDS:
        if (k.group, k.version) not in seen:
            seen.append((k.group, k.version))
    return seen


def kinds_in(group: str, version: str) -> list[KindStrategy]:
    return [k for k in KINDS if k.group == group and k.version == version]
