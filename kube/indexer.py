"""Secondary indexes over an informer's cache, like client-go's ``cache.Indexer``.

An index maps keys computed from each object (claim names a pod references, owner UIDs, ...)
to the objects that produce them, so a controller can answer "which pods use claim X" without
scanning the whole cache. It is kept current by informer handlers; register the index before
any handler that reads it (handlers run in registration order).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from kube.informer import Informer, object_key
from kube.objects import Obj

K = TypeVar("K", bound=Hashable)
ObjectKey = tuple[str, str]


class Index(Generic[K]):
    """``keys(obj)`` -> the index keys of one object; ``get(key)`` -> the cached objects with that key."""

    def __init__(self, informer: Informer, keys: Callable[[Obj], Iterable[K]]) -> None:
        self.informer = informer
        self._keys = keys
        self._by_key: dict[K, set[ObjectKey]] = {}
        self._of_object: dict[ObjectKey, frozenset[K]] = {}
        informer.on_add(self._set)
        informer.on_update(lambda _old, new: self._set(new))
        informer.on_delete(self._remove)

    def _set(self, obj: Obj) -> None:
        okey = object_key(obj)
        new = frozenset(self._keys(obj))
        old = self._of_object.get(okey, frozenset())
        if new == old:
            return
        for key in old - new:
            members = self._by_key.get(key)
            if members is not None:
                members.discard(okey)
                if not members:
                    del self._by_key[key]
        for key in new - old:
            self._by_key.setdefault(key, set()).add(okey)
        if new:
            self._of_object[okey] = new
        else:
            self._of_object.pop(okey, None)

    def _remove(self, obj: Obj) -> None:
        okey = object_key(obj)
        for key in self._of_object.pop(okey, frozenset()):
            members = self._by_key.get(key)
            if members is not None:
                members.discard(okey)
                if not members:
                    del self._by_key[key]

    def get(self, key: K) -> list[Obj]:
        """The cached objects indexed under ``key`` (sorted by namespace/name, for stable behaviour)."""
        found = []
        for namespace, name in sorted(self._by_key.get(key, ())):
            obj = self.informer.get(namespace, name)
            if obj is not None:
                found.append(obj)
        return found

    def __len__(self) -> int:
        return len(self._by_key)
