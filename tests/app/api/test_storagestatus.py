"""What a client sees when the database cannot serve its request: upstream's interpretation of an
unreachable storage per operation, a watch's 503, and a refused write's InternalError; which
driver errors mean an unreachable database."""

from __future__ import annotations

from app.api.negotiation import status_response
from app.api.storagestatus import storage_status
from app.registry import lookup
from app.storage.dialects import PostgresDialect
from app.storage.errors import StorageFailure, StorageUnavailable

CLAIMS = lookup("resource.k8s.io", "v1", "resourceclaims")
PODS = lookup("", "v1", "pods")
DOWN = StorageUnavailable("ConnectionRefusedError: [Errno 111] Connect call failed")


def test_an_unreachable_database_is_a_server_timeout_to_retry_after_two_seconds() -> None:
    assert CLAIMS is not None and PODS is not None
    error = storage_status(DOWN, CLAIMS, "create", "ns")
    assert error.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "The create operation against resourceclaims.resource.k8s.io could not be completed at this time, please try again.",
        "reason": "ServerTimeout",
        "details": {"name": "create", "group": "resource.k8s.io", "kind": "resourceclaims", "retryAfterSeconds": 2},
        "code": 500,
    }
    assert status_response(error).headers["retry-after"] == "2"
    core = storage_status(DOWN, PODS, "list", None)
    assert core.message == "The list operation against pods could not be completed at this time, please try again."
    assert core.details == {"name": "list", "kind": "pods", "retryAfterSeconds": 2}, "no group for the core group"


def test_each_verb_names_its_storage_operation() -> None:
    assert CLAIMS is not None
    operations = {verb: storage_status(DOWN, CLAIMS, verb, "ns").details["name"] for verb in ("get", "list", "create", "update", "patch", "delete", "deletecollection")}  # type: ignore[index]
    assert operations == {"get": "get", "list": "list", "create": "create", "update": "update", "patch": "update", "delete": "delete", "deletecollection": "delete"}


def test_a_watch_gets_the_generic_503_of_an_unreachable_storage() -> None:
    assert CLAIMS is not None
    error = storage_status(DOWN, CLAIMS, "watch", "ns")
    assert (error.code, error.reason) == (503, "ServiceUnavailable")
    assert error.message == f"StorageError: server unreachable, Code: 5, Key: /registry/resourceclaims/ns, ResourceVersion: 0, AdditionalErrorMsg: {DOWN}"
    assert "retry-after" not in status_response(error).headers


def test_a_refused_write_is_an_internal_error_naming_the_reason() -> None:
    assert CLAIMS is not None
    error = storage_status(StorageFailure("database or disk is full (SQLITE_FULL)"), CLAIMS, "create", "ns")
    assert error.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Internal error occurred: database or disk is full (SQLITE_FULL)",
        "reason": "InternalError",
        "details": {"causes": [{"message": "database or disk is full (SQLITE_FULL)"}]},
        "code": 500,
    }


def test_a_connection_the_database_hung_up_on_mid_operation_is_an_unreachable_database() -> None:
    """What asyncpg raises for a statement on a connection that got Postgres's goodbye (seen as an
    outage begins): a ServerTimeout to retry, not an InternalError."""
    import asyncpg

    assert CLAIMS is not None
    error = PostgresDialect.interpret(asyncpg.InternalClientError("cannot switch to state 11; another operation (2) is in progress"))
    assert isinstance(error, StorageUnavailable)
    assert (storage_status(error, CLAIMS, "list", "ns").reason, storage_status(error, CLAIMS, "list", "ns").code) == ("ServerTimeout", 500)
    assert PostgresDialect.interpret(asyncpg.InternalClientError("something else")) is None, "other client errors stay internal errors"
