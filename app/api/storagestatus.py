"""The API status of a request the database could not serve, as upstream's registry interprets
the storage errors of each operation.

An unreachable database makes get, list, create, update and delete a 500 ``ServerTimeout``
("The create operation against pods could not be completed at this time, please try again.")
that asks the client to retry after 2 seconds (``Retry-After: 2``); a watch, whose storage errors
upstream does not interpret, gets the generic conversion of an unreachable storage, a 503
``ServiceUnavailable``. A database that refuses the operation (a full disk, a read-only or damaged
file) makes it a 500 ``InternalError`` naming the reason. A write whose commit lost its connection,
when the database could not tell in time whether it was stored, is a 504 ``Timeout`` (the generic
answer to a gateway timeout): it may have been.
"""

from __future__ import annotations

from app.registry.base import KindStrategy
from app.storage.errors import CommitOutcomeUnknown, StorageError, StorageUnavailable
from kube.errors import ApiError

RETRY_AFTER_SECONDS = 2
# The storage operation behind each verb (a patch is an update of the stored object).
_OPERATIONS = {"get": "get", "list": "list", "create": "create", "update": "update", "patch": "update", "delete": "delete", "deletecollection": "delete"}


def storage_status(exc: StorageError, strategy: KindStrategy, verb: str, namespace: str | None) -> ApiError:
    if not isinstance(exc, StorageUnavailable):
        return ApiError(500, "InternalError", f"Internal error occurred: {exc}", {"causes": [{"message": str(exc)}]})
    if verb == "watch":
        key = f"/registry/{strategy.plural}" + (f"/{namespace}" if namespace else "")
        return ApiError(503, "ServiceUnavailable", f"StorageError: server unreachable, Code: 5, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: {exc}")
    operation = _OPERATIONS.get(verb, verb)
    details: dict[str, object] = {} if isinstance(exc, CommitOutcomeUnknown) else {"name": operation}
    if strategy.group:
        details["group"] = strategy.group
    details["kind"] = strategy.plural
    details["retryAfterSeconds"] = RETRY_AFTER_SECONDS
    if isinstance(exc, CommitOutcomeUnknown):
        message = "the server was unable to return a response in the time allotted, but may still be processing the request"
        return ApiError(504, "Timeout", f"{message} ({verb} {strategy.qualified_resource})", details)
    return ApiError(
        500,
        "ServerTimeout",
        f"The {operation} operation against {strategy.qualified_resource} could not be completed at this time, please try again.",
        details,
    )
