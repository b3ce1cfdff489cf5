"""ControllerRevisions, the history DaemonSets and StatefulSets roll updates from (upstream's
pkg/controller/history and the DaemonSet controller's use of it): a parent's revisions are those
it controls or adopts by selector, named ``<parent>-<hash>``, with a ``controller-revision-hash``
label; a hash collision with another revision's data moves the parent's collisionCount."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from controllers.objects import metadata
from controllers.workloads import Claimer, fnv32, owner_reference, parse_selector, safe_encode
from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.indexer import Index
from kube.objects import Obj

HASH_LABEL = "controller-revision-hash"
MAX_PREFIX = 223


def revisions_path(namespace: str, name: str = "") -> str:
    return resource_path("apps", "v1", "controllerrevisions", namespace, name or None)


def _revision_path(revision: Obj) -> str:
    meta = metadata(revision)
    return revisions_path(str(meta.get("namespace") or ""), str(meta["name"]))


def revision_name(prefix: str, revision_hash: str) -> str:
    """ControllerRevisionName: ``<parent>-<hash>`` with the parent's name cut at 223 characters."""
    return f"{prefix[:MAX_PREFIX]}-{revision_hash}"


def hash_revision(data: Any, probe: int | None = None) -> str:
    """HashControllerRevision: FNV-1 of the revision's data (and the collision count), safely encoded."""
    raw = orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
    if probe is not None:
        raw += str(probe).encode()
    return safe_encode(str(fnv32(raw)))


def revision_number(revision: Obj) -> int:
    return int(revision.get("revision") or 0)


def max_revision(revisions: list[Obj]) -> int:
    return max((revision_number(r) for r in revisions), default=0)


async def controlled_revisions(
    client: KubeClient, by_namespace: Index[str], parent: Obj, parent_api_version: str, parent_kind: str, fresh_parent: Callable[[], Awaitable[Obj | None]]
) -> list[Obj]:
    """The parent's revisions: those it controls whose labels its selector matches, and matching
    orphans it adopts (ControllerRevisionControllerRefManager)."""
    selector = parse_selector((parent.get("spec") or {}).get("selector"))
    if selector is None:
        return []
    claimer = Claimer(client, parent, owner_reference(parent, parent_api_version, parent_kind), selector, fresh_parent, _revision_path)
    namespace = str(metadata(parent).get("namespace") or "")
    return [copy.deepcopy(r) for r in await claimer.claim(by_namespace.get(namespace))]


async def update_revision_number(client: KubeClient, revision: Obj, number: int) -> Obj:
    """UpdateControllerRevision: the revision renumbered (a rollback to it makes it current)."""
    if revision_number(revision) == number:
        return revision
    return await client.update(_revision_path(revision), {**revision, "apiVersion": "apps/v1", "kind": "ControllerRevision", "revision": number})


async def delete_revision(client: KubeClient, revision: Obj) -> None:
    try:
        await client.delete(_revision_path(revision))
    except ApiError as exc:
        if exc.code != 404:
            raise
