"""Kinds served as storage only: upstream's identity, scope, status subresource, generation and
printer columns, with ObjectMeta validation (the shared machinery's) but none of the kind's own
field validation or defaults.

The server serves them because upstream's components list and watch them at start (an informer
that gets a 404 never syncs, so the component never starts) and because the namespace controller
and the garbage collector work on every served resource (docs/upstream-components.md). Nothing in
this project acts on them, so their fields are stored as sent (pruned to the official schema like
every kind's). Each kind's module states its identity with one ``StorageOnlyKind``.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.registry.base import KindStrategy, Obj, PrinterColumn, StatusStrategy, StatusSubresource

# The pod template of the workload kinds' create examples.
EXAMPLE_POD_TEMPLATE: Obj = {
    "metadata": {"labels": {"app": "example"}},
    "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
}


@dataclass(frozen=True)
class StorageOnlyKind:
    """What a storage-only kind states about itself (see ``KindStrategy`` for each field)."""

    group: str
    kind: str
    plural: str
    namespaced: bool
    printer_columns: tuple[PrinterColumn, ...]
    # A minimal object creatable any number of times (the OpenAPI documents' example).
    create_example: Obj
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # Whether it has a /status subresource (whose writes change status only).
    status: bool = False
    # Whether metadata.generation starts at 1 and moves with the spec (the upstream strategies that set it).
    tracks_generation: bool = False
    name_rule: str = "subdomain"


class StorageOnlyStrategy(KindStrategy):
    """The strategy of a storage-only kind: the base hooks, with the kind's identity."""

    def __init__(self, identity: StorageOnlyKind) -> None:
        super().__init__()
        self._identify(identity)
        if identity.status:
            self.subresources = (StatusSubresource(StorageOnlyStatusStrategy(identity)),)

    def _identify(self, identity: StorageOnlyKind) -> None:
        self.group = identity.group
        self.kind = identity.kind
        self.plural = identity.plural
        self.singular = identity.kind.lower()
        self.namespaced = identity.namespaced
        self.printer_columns = identity.printer_columns
        self.create_example = identity.create_example
        self.short_names = identity.short_names
        self.categories = identity.categories
        self.has_status = identity.status
        self.tracks_generation = identity.tracks_generation
        self.name_rule = identity.name_rule


class StorageOnlyStatusStrategy(StatusStrategy, StorageOnlyStrategy):
    """Writes through a storage-only kind's ``/status``."""

    def __init__(self, identity: StorageOnlyKind) -> None:
        KindStrategy.__init__(self)
        self._identify(identity)
