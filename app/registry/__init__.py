"""Every served kind, registered once. Adding a kind = adding its module to ``KINDS``."""

from __future__ import annotations

from typing import Any

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
from app.registry.scheduling import podgroup, workload

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
    workload.STRATEGY,
    podgroup.STRATEGY,
)

# The kind whose objects are the namespaces that namespaced objects live in.
NAMESPACE_KIND: KindStrategy = namespace.STRATEGY

# Kinds whose enabling feature gate is off in this process (``serve_gated``): not served.
_unserved: frozenset[KindStrategy] = frozenset(k for k in KINDS if k.feature_gate)


def serve_gated(gates: Any) -> None:
    """Serve the gated kinds whose gate is on in ``gates``; the server calls this once at start."""
    global _unserved
    _unserved = frozenset(k for k in KINDS if k.feature_gate and not gates.enabled(k.feature_gate))


def served_kinds() -> tuple[KindStrategy, ...]:
    return tuple(k for k in KINDS if k not in _unserved)


def lookup(group: str, version: str, plural: str) -> KindStrategy | None:
    return next((k for k in served_kinds() if (k.group, k.version, k.plural) == (group, version, plural)), None)


def lookup_kind(api_version: str, kind: str) -> KindStrategy | None:
    return next((k for k in served_kinds() if (k.api_version, k.kind) == (api_version, kind)), None)


def group_versions() -> list[tuple[str, str]]:
    """Served (group, version) pairs in a stable order, core first."""
    seen: list[tuple[str, str]] = []
    for k in served_kinds():
        if (k.group, k.version) not in seen:
            seen.append((k.group, k.version))
    return seen


def kinds_in(group: str, version: str) -> list[KindStrategy]:
    return [k for k in served_kinds() if k.group == group and k.version == version]
