"""Every served kind, registered once. Adding a kind = adding its module to ``KINDS``.

A kind may also be served in older versions (``KindStrategy.older_versions``), and in another group
from the same storage (``SHARED_STORAGE``); which of those a server serves is its
``--runtime-config`` (``app.registry.runtimeconfig``), applied with ``serve``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from app.registry.admissionregistration import validatingadmissionpolicy, validatingadmissionpolicybinding
from app.registry.apps import controllerrevision, daemonset, deployment, replicaset, statefulset
from app.registry.authentication import selfsubjectreview
from app.registry.authorization import localsubjectaccessreview, selfsubjectaccessreview, selfsubjectrulesreview, subjectaccessreview
from app.registry.base import KindStrategy, ScopeStrategy
from app.registry.batch import job
from app.registry.coordination import lease
from app.registry.core import (
    configmap,
    endpoints,
    event,
    namespace,
    node,
    persistentvolume,
    persistentvolumeclaim,
    pod,
    podtemplate,
    replicationcontroller,
    resourcequota,
    secret,
    service,
    serviceaccount,
)
from app.registry.discovery import endpointslice
from app.registry.events import event as events_event
from app.registry.policy import poddisruptionbudget
from app.registry.rbac import clusterrole, clusterrolebinding, role, rolebinding
from app.registry.resource import (
    deviceclass,
    devicetaintrule,
    resourceclaim,
    resourceclaimtemplate,
    resourcepoolstatusrequest,
    resourceslice,
)
from app.registry.scheduling import podgroup, priorityclass, workload
from app.registry.storage import csidriver, csinode, csistoragecapacity, storageclass, volumeattachment

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
    resourcepoolstatusrequest.STRATEGY,
    lease.STRATEGY,
    serviceaccount.STRATEGY,
    secret.STRATEGY,
    resourcequota.STRATEGY,
    role.STRATEGY,
    clusterrole.STRATEGY,
    rolebinding.STRATEGY,
    clusterrolebinding.STRATEGY,
    selfsubjectreview.STRATEGY,
    selfsubjectaccessreview.STRATEGY,
    selfsubjectrulesreview.STRATEGY,
    subjectaccessreview.STRATEGY,
    priorityclass.STRATEGY,
    localsubjectaccessreview.STRATEGY,
    workload.STRATEGY,
    podgroup.STRATEGY,
    validatingadmissionpolicy.STRATEGY,
    validatingadmissionpolicybinding.STRATEGY,
    # Workloads: their controllers are in controllers/.
    deployment.STRATEGY,
    replicaset.STRATEGY,
    statefulset.STRATEGY,
    daemonset.STRATEGY,
    controllerrevision.STRATEGY,
    job.STRATEGY,
    podtemplate.STRATEGY,
    # Served as storage only (app.registry.storageonly): upstream's components watch them.
    persistentvolume.STRATEGY,
    persistentvolumeclaim.STRATEGY,
    service.STRATEGY,
    replicationcontroller.STRATEGY,
    configmap.STRATEGY,
    poddisruptionbudget.STRATEGY,
    storageclass.STRATEGY,
    csinode.STRATEGY,
    csidriver.STRATEGY,
    csistoragecapacity.STRATEGY,
    volumeattachment.STRATEGY,
    # The server's own endpoints (default/kubernetes) are written in both.
    endpoints.STRATEGY,
    endpointslice.STRATEGY,
)

# Kinds served from another kind's storage, in another group (``KindStrategy.storage_group``):
# what is written in one is read in the other. ``KINDS`` holds each storage's own kind.
SHARED_STORAGE: tuple[KindStrategy, ...] = (events_event.STRATEGY,)

# The kind whose objects are the namespaces that namespaced objects live in.
NAMESPACE_KIND: ScopeStrategy = namespace.STRATEGY
# What the generic store asks about a request's namespace: the same kind, by its role.
SCOPE_KIND: ScopeStrategy = NAMESPACE_KIND

# Every kind in every version it can be served in: the stored versions (``KINDS``) first, the kinds
# sharing their storage, then the older ones in the order each kind lists them (upstream's version priority within a group).
ALL_KINDS: tuple[KindStrategy, ...] = KINDS + SHARED_STORAGE + tuple(k.at_version(v) for k in KINDS for v in k.older_versions)


class _Served:
    """The kinds and versions this server serves, with their indexes."""

    def __init__(self, kinds: Iterable[KindStrategy]) -> None:
        self.kinds = tuple(kinds)
        self.by_path = {(k.group, k.version, k.plural): k for k in self.kinds}
        self.by_kind = {(k.api_version, k.kind): k for k in self.kinds}
        groups: dict[str, list[str]] = {}
        for k in self.kinds:
            versions = groups.setdefault(k.group, [])
            if k.version not in versions:
                versions.append(k.version)
        self.group_versions = [(g, v) for g, versions in groups.items() for v in sorted(versions, key=version_priority)]


_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int]:
    """Sort key of upstream's version priority in a group: GA before beta before alpha, newer first."""
    match = _VERSION.match(version)
    if match is None:
        return (3, 0, 0)
    stability = {None: 0, "beta": 1, "alpha": 2}[match.group(2)]
    return (stability, -int(match.group(1)), -int(match.group(3) or 0))


_served = _Served(k for k in KINDS + SHARED_STORAGE if version_priority(k.version)[0] == 0)


def serve(kinds: Iterable[KindStrategy]) -> None:
    """Serve these kinds (from ``ALL_KINDS``) from now on, in ``ALL_KINDS``' order; the server
    calls it once at start with what its --runtime-config enables."""
    global _served
    wanted = set(map(id, kinds))
    _served = _Served(k for k in ALL_KINDS if id(k) in wanted)


def served_kinds() -> tuple[KindStrategy, ...]:
    return _served.kinds


def lookup(group: str, version: str, plural: str) -> KindStrategy | None:
    return _served.by_path.get((group, version, plural))


def lookup_kind(api_version: str, kind: str) -> KindStrategy | None:
    return _served.by_kind.get((api_version, kind))


def group_versions() -> list[tuple[str, str]]:
    """Served (group, version) pairs in a stable order, core first."""
    return list(_served.group_versions)


def kinds_in(group: str, version: str) -> list[KindStrategy]:
    return [k for k in _served.kinds if k.group == group and k.version == version]
