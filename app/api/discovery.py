"""Discovery documents: aggregated (``apidiscovery.k8s.io/v2``) and the legacy forms.

Everything is derived from the registry; only subresources that are not "the kind
itself" (binding, finalize) need a word here about what they return and accept.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from app.api.tables import parse_accept
from app.registry import KINDS, group_versions, kinds_in
from app.registry.base import KindStrategy

Obj = dict[str, Any]

AGGREGATED_DISCOVERY_CONTENT_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_GROUP = "apidiscovery.k8s.io"
AGGREGATED_VERSION = "v2"
AGGREGATED_KIND = "APIGroupDiscoveryList"

COLLECTION_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
def resource_verbs(strategy: KindStrategy) -> list[str]:
    """Verbs of the main resource, as discovery lists them (sorted)."""
    return sorted(strategy.verbs)


def subresource_info(strategy: KindStrategy, name: str) -> tuple[str, str, str, list[str]] | None:
    """(group, version, kind, verbs) answered by subresource ``name`` of ``strategy``, or None if unknown."""
    if name == "status":
        return strategy.group, strategy.version, strategy.kind, ["get", "patch", "update"]
    if name == "binding":
        return "", "v1", "Binding", ["create"]
    if name == "finalize":
        return strategy.group, strategy.version, strategy.kind, ["update"]
    return None


def storage_version_hash(strategy: KindStrategy) -> str:
    """Upstream's opaque storage version hash: base64 of the first 8 bytes of sha256("g/v/Kind")."""
    digest = hashlib.sha256(f"{strategy.group}/{strategy.version}/{strategy.kind}".encode()).digest()
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
    for name in sorted(strategy.subresources):
        info = subresource_info(strategy, name)
        if info is None:
            continue
        group, version, kind, verbs = info
        subresources.append(
            {"subresource": name, "responseKind": {"group": group, "version": version, "kind": kind}, "verbs": verbs}
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


def wants_aggregated(accept_header: str | None) -> bool:
    """Whether ``/api`` or ``/apis`` must answer the aggregated document.

    Upstream v1.37 serves only ``apidiscovery.k8s.io/v2`` (v2beta1 is gone): entries
    asking for another ``as=`` form or version are skipped, and the first plain entry
    (``application/json``, ``*/*``...) selects the legacy document.
    """
    for entry in parse_accept(accept_header):
        as_kind = entry.params.get("as")
        if as_kind is None:
            return False
        if (
            as_kind == AGGREGATED_KIND
            and entry.params.get("g") == AGGREGATED_GROUP
            and entry.params.get("v") == AGGREGATED_VERSION
            and entry.matches("application/json")
        ):
            return True
    return False


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


def _legacy_subresource(strategy: KindStrategy, name: str) -> Obj | None:
    info = subresource_info(strategy, name)
    if info is None:
        return None
    group, version, kind, verbs = info
    entry: Obj = {"name": f"{strategy.plural}/{name}", "singularName": "", "namespaced": strategy.namespaced}
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
        for name in strategy.subresources:
            sub = _legacy_subresource(strategy, name)
            if sub is not None:
                resources.append(sub)
    resources.sort(key=lambda r: r["name"])
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": _group_version(group, version),
        "resources": resources,
    }


def unknown_subresources() -> list[str]:
    """``plural/subresource`` names the registry declares but discovery cannot describe."""
    return [f"{k.plural}/{name}" for k in KINDS for name in k.subresources if subresource_info(k, name) is None]
