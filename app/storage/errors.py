"""What storage answers when it cannot do what was asked; the REST layer turns each into an
API status (the messages of the 410s are the ones clients see)."""

from __future__ import annotations


class StorageError(Exception):
    """Base class for outcomes the request layer turns into API errors."""


class KeyExists(StorageError):
    pass


class RevisionMismatch(StorageError):
    """The stored object is not at the revision the write expected (or is gone)."""


class RevisionCompacted(StorageError):
    """The history a read or watch needs no longer reaches back to ``requested``."""

    def __init__(self, requested: int, compacted: int) -> None:
        super().__init__(f"too old resource version: {requested} ({compacted})")
        self.requested = requested
        self.compacted = compacted


class ContinueExpired(StorageError):
    """A continued list can no longer be served at its first page's revision."""

    def __init__(self, revision: int) -> None:
        super().__init__(f"continue token at revision {revision} is too old")
        self.revision = revision


class ResourceVersionTooLarge(StorageError):
    """The watch cache did not reach the revision a read needs in time.

    ``requested`` is None for a consistent read (the newest revision in the database)."""

    def __init__(self, requested: int | None, current: int) -> None:
        super().__init__(f"too large resource version: {requested}, current: {current}")
        self.requested = requested
        self.current = current


class StorageUnavailable(StorageError):
    """The database cannot be reached: connection refused or lost, or it is starting up or shutting
    down. The request may succeed when retried once the database is back."""


class CommitOutcomeUnknown(StorageUnavailable):
    """The connection was lost while a write was being committed, and the database could not be
    asked in time whether the commit took place: the write may or may not be stored."""


class StorageFailure(StorageError):
    """The database refused the operation for a reason of its own: a full disk, a read-only or a
    damaged file. Nothing of the operation was written."""


class RequestTooLarge(StorageError):
    """An object larger than the storage takes in one request (etcd's --max-request-bytes)."""

    def __init__(self) -> None:
        # etcd's own words, which kube-apiserver passes on unchanged.
        super().__init__("etcdserver: request is too large")
