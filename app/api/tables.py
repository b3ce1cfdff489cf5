"""The ``meta.k8s.io`` conversions an Accept header may ask for (``app.api.negotiation`` reads it).

``kubectl get`` asks for ``application/json;as=Table;v=v1;g=meta.k8s.io`` and prints the
table verbatim; rows carry a ``PartialObjectMetadata`` (or the full object for
``includeObject=Object``) so that ``-A``, ``--show-labels`` and ``--sort-by`` work.
Metadata-only clients (client-go's metadata informers, garbage collectors) ask for
``as=PartialObjectMetadata`` on objects and watches and ``as=PartialObjectMetadataList`` on
lists, and get each object's metadata only.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.api.schemas import property_description
from app.registry.base import KindStrategy
from kube.errors import ApiError, not_acceptable
from kube.objects import Obj

TABLE_API_VERSION = "meta.k8s.io/v1"
TABLE_VERSIONS = ("v1", "v1beta1")
INCLUDE_METADATA = "Metadata"
INCLUDE_OBJECT = "Object"
INCLUDE_NONE = "None"
_LIST_META_KEYS = ("resourceVersion", "continue", "remainingItemCount")

TABLE = "Table"
PARTIAL = "PartialObjectMetadata"
PARTIAL_LIST = "PartialObjectMetadataList"
CONVERSIONS = (TABLE, PARTIAL, PARTIAL_LIST)


@dataclass(frozen=True)
class Conversion:
    """What the response is converted to: ``kind`` in ``meta.k8s.io/<version>``."""

    kind: str
    version: str


def _go_type(strategy: KindStrategy, kind: str) -> str:
    """How upstream's messages name the internal Go type (``*core.Pod``, ``*resource.ResourceClaimList``)."""
    package = strategy.group.split(".", 1)[0] if strategy.group else "core"
    return f"*{package}.{kind}"


def not_acceptable_for_object(strategy: KindStrategy, wanted: Conversion) -> ApiError | None:
    """The 406 upstream answers when a list conversion is asked of one object."""
    if wanted.kind != PARTIAL_LIST:
        return None
    return not_acceptable(f"you requested {PARTIAL_LIST}, but the requested object is not a list ({_go_type(strategy, strategy.kind)})")


def not_acceptable_for_list(strategy: KindStrategy, wanted: Conversion) -> ApiError | None:
    """The 406 upstream answers when an object conversion is asked of a list."""
    if wanted.kind != PARTIAL:
        return None
    return not_acceptable(f"you requested {PARTIAL}, but the requested object is a list ({_go_type(strategy, strategy.list_kind)})")


def convert_object(strategy: KindStrategy, obj: Obj, wanted: Conversion, include_object: str = INCLUDE_METADATA) -> Obj:
    """One object as ``wanted``: a one-row Table, its PartialObjectMetadata, or upstream's 406."""
    if wanted.kind == TABLE:
        meta = {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion", "")}
        return table_for(strategy, [obj], meta, include_object)
    refused = not_acceptable_for_object(strategy, wanted)
    if refused is not None:
        raise refused
    return partial_object(obj, wanted.version)


def _list_metadata(list_meta: Obj) -> Obj:
    return {key: list_meta[key] for key in _LIST_META_KEYS if list_meta.get(key) not in (None, "")}


def partial_object(obj: Obj, version: str) -> Obj:
    """An object's ``PartialObjectMetadata``: its metadata under ``meta.k8s.io/<version>``."""
    return {"kind": PARTIAL, "apiVersion": f"meta.k8s.io/{version}", "metadata": obj.get("metadata") or {}}


def partial_list(objs: list[Obj], list_meta: Obj, version: str) -> Obj:
    """A ``PartialObjectMetadataList`` of ``objs`` with the list's metadata."""
    return {
        "kind": PARTIAL_LIST,
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": _list_metadata(list_meta),
        "items": [partial_object(obj, version) for obj in objs],
    }


def column_definitions(strategy: KindStrategy) -> list[Obj]:
    """The Table ``columnDefinitions`` of a kind, from its printer columns."""
    return [
        {
            "name": column.name,
            "type": column.type,
            "format": column.format,
            "description": column.description or (property_description(*column.doc) if column.doc else ""),
            "priority": column.priority,
        }
        for column in strategy.printer_columns
    ]


def _row_object(obj: Obj, include_object: str) -> Obj | None:
    if include_object == INCLUDE_NONE:
        return None
    if include_object == INCLUDE_OBJECT:
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": TABLE_API_VERSION,
        "metadata": dict(obj.get("metadata") or {}),
    }


def _check_include_object(include_object: str | None) -> str:
    value = include_object or INCLUDE_METADATA
    if value not in (INCLUDE_METADATA, INCLUDE_OBJECT, INCLUDE_NONE):
        raise ValueError(f'unrecognized includeObject value: "{value}"')
    return value


def table_row(strategy: KindStrategy, obj: Obj, include_object: str | None = INCLUDE_METADATA) -> Obj:
    """One Table row for ``obj``: its printer-column cells plus the requested object form."""
    policy = _check_include_object(include_object)
    row: Obj = {"cells": [column.cell(obj) for column in strategy.printer_columns]}
    embedded = _row_object(obj, policy)
    if embedded is not None:
        row["object"] = embedded
    return row


def table_for(
    strategy: KindStrategy,
    objects: list[Obj],
    list_meta: Obj | None = None,
    include_object: str | None = INCLUDE_METADATA,
) -> Obj:
    """A ``meta.k8s.io/v1`` Table for ``objects``.

    ``list_meta`` is the list's metadata (resourceVersion, continue, remainingItemCount);
    when omitted for a single object, the object's resourceVersion is used, as upstream
    does for a single-object GET or a watch event. Raises ValueError for an unknown
    ``include_object`` (the server answers 400).
    """
    policy = _check_include_object(include_object)
    meta: Obj = {}
    if list_meta is not None:
        meta = _list_metadata(list_meta)
    elif len(objects) == 1:
        rv = (objects[0].get("metadata") or {}).get("resourceVersion")
        if rv:
            meta["resourceVersion"] = rv
    return {
        "kind": "Table",
        "apiVersion": TABLE_API_VERSION,
        "metadata": meta,
        "columnDefinitions": column_definitions(strategy),
        "rows": [table_row(strategy, obj, policy) for obj in objects],
    }


def table_for_object(strategy: KindStrategy, obj: Obj, include_object: str | None = INCLUDE_METADATA) -> Obj:
    """A one-row Table: a single-object GET or one watch event's object."""
    return table_for(strategy, [obj], None, include_object)


def table_bookmark(resource_version: str) -> Obj:
    """What a BOOKMARK event carries on a Table watch: an empty Table with the resourceVersion."""
    return {
        "kind": "Table",
        "apiVersion": TABLE_API_VERSION,
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [],
        "rows": [],
    }
