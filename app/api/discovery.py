"""Discovery documents: aggregated (``apidiscovery.k8s.io/v2``) and the legacy forms.

Everything is derived from the registry, subresources from what each kind declares.
"""

from __future__ import annotations

import base64
import hashlib

from app.registry import group_versions, kinds_in
from app.registry.base import KindStrategy, Subresource
from kube.objects import Obj

AGGREGATED_DISCOVERY_CONTENT_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_GROUP = "apidiscovery.k8s.io"
AGGREGATED_VERSION = "v2"
AGGREGATED_KIND = "APIGroupDiscoveryList"

COLLECTION_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
def resource_verbs(strategy: KindStrategy) -> list[str]:
    """Verbs of the main resource, as discovery lists them (sorted)."""
    return sorted(strategy.verbs)


def subresource_info(strategy: KindStrategy, subresource: Subresource) -> tuple[str, str, str, list[str]]:
    """(group, version, kind, verbs) of what a subresource of ``strategy`` answers."""
    group, version, kind = subresource.group_version_kind(strategy)
    return group, version, kind, sorted(subresource.verbs)


def storage_version_hash(strategy: KindStrategy) -> str:
    """Upstream's opaque storage version hash: base64 of the first 8 bytes of sha256("g/v/Kind") of the
    version objects are stored in, the same in every version and group the kind is served in."""
    stored_version = strategy.storage_version or strategy.version
    digest = hashlib.sha256(f"{strategy.stored_group}/{stored_version}/{strategy.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _group_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


# ---- aggregated -------------------------------------------------------------


def _aggregated_resource(strategy: KindStrategy) -> Obj:
    entry: Obj = {
        "resource": strategy.plural,
        "responseKind": {"group": strategy.group, "version": strategy.version, "kind": strategy.kind},
        "scope": "Namespaced" if strategy.namespaced else "Cluster",
        "singularResource": strategy.singular,
        "verbs": resource_verbs(strategy),
    }
    if strategy.short_names:
        entry["shortNames"] = list(strategy.short_names)
    if strategy.categories:
        entry["categories"] = list(strategy.categories)
    subresources = []
    for sub in sorted(strategy.subresources, key=lambda s: s.name):
        group, version, kind, verbs = subresource_info(strategy, sub)
        subresources.append(
            {"subresource": sub.name, "responseKind": {"group": group, "version": version, "kind": kind}, "verbs": verbs}
        )
    if subresources:
        entry["subresources"] = subresources
    return entry


def _aggregated_group(group: str, versions: list[str]) -> Obj:
    metadata: Obj = {"creationTimestamp": None}
    if group:
        metadata["name"] = group
    return {
        "metadata": metadata,
        "versions": [
            {
                "version": version,
                "resources": [
                    _aggregated_resource(k) for k in sorted(kinds_in(group, version), key=lambda k: k.plural)
                ],
                "freshness": "Current",
            }
            for version in versions
        ],
    }


def _served_groups(legacy: bool) -> list[tuple[str, list[str]]]:
    groups: dict[str, list[str]] = {}
    for group, version in group_versions():
        if (group == "") == legacy:
            groups.setdefault(group, []).append(version)
    return list(groups.items())


def aggregated_discovery(legacy: bool) -> Obj:
    """The ``APIGroupDiscoveryList`` for ``/api`` (``legacy=True``, core group) or ``/apis``."""
    return {
        "kind": AGGREGATED_KIND,
        "apiVersion": f"{AGGREGATED_GROUP}/{AGGREGATED_VERSION}",
        "metadata": {},
        "items": [_aggregated_group(group, versions) for group, versions in _served_groups(legacy)],
    }


# ---- legacy -----------------------------------------------------------------


def api_versions(server_address: str = "") -> Obj:
    """``/api`` without aggregation: ``APIVersions``."""
    addresses = [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}] if server_address else []
    return {
        "kind": "APIVersions",
        "versions": [version for group, version in group_versions() if not group],
        "serverAddressByClientCIDRs": addresses,
    }


def _api_group_body(group: str, versions: list[str]) -> Obj:
    entries = [{"groupVersion": _group_version(group, v), "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_group_list() -> Obj:
    """``/apis`` without aggregation: ``APIGroupList``."""
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_api_group_body(group, versions) for group, versions in _served_groups(legacy=False)],
    }


def api_group(group: str) -> Obj | None:
    """``/apis/<group>``: ``APIGroup``, or None when the group is not served."""
    for name, versions in _served_groups(legacy=False):
        if name == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **_api_group_body(name, versions)}
    return None


def _legacy_resource(strategy: KindStrategy) -> Obj:
    entry: Obj = {
        "name": strategy.plural,
        "singularName": strategy.singular,
        "namespaced": strategy.namespaced,
        "kind": strategy.kind,
        "verbs": resource_verbs(strategy),
    }
    if strategy.short_names:
        entry["shortNames"] = list(strategy.short_names)
    if strategy.categories:
        entry["categories"] = list(strategy.categories)
    entry["storageVersionHash"] = storage_version_hash(strategy)
    return entry


def _legacy_subresource(strategy: KindStrategy, sub: Subresource) -> Obj:
    group, version, kind, verbs = subresource_info(strategy, sub)
    entry: Obj = {"name": f"{strategy.plural}/{sub.name}", "singularName": "", "namespaced": strategy.namespaced}
    # Like upstream, group/version appear only when they differ from the list's group-version.
    if (group, version) != (strategy.group, strategy.version):
        entry["group"] = group
        entry["version"] = version
    entry["kind"] = kind
    entry["verbs"] = verbs
    return entry


def api_resource_list(group: str, version: str) -> Obj | None:
    """``/api/v1`` or ``/apis/<group>/<version>``: ``APIResourceList``, or None when not served."""
    kinds = kinds_in(group, version)
    if not kinds:
        return None
    resources: list[Obj] = []
    for strategy in kinds:
        resources.append(_legacy_resource(strategy))
        resources.extend(_legacy_subresource(strategy, sub) for sub in strategy.subresources)
    resources.sort(key=lambda r: r["name"])
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": _group_version(group, version),
        "resources": resources,
    }
