"""Object metadata on create and update refused, or ignored, as kube-apiserver
does.

Names and generated names (ValidateObjectMetaAccessor, with the name generated first as
Store.Create does), finalizer names (ValidateFinalizers, and core's rule for names without a
domain), ownerReferences (ValidateOwnerReferences), managedFields (ValidateManagedFields, after
the field manager), the fields an update may not change (ValidateObjectMetaAccessorUpdate), a
client's uid and resourceVersion as preconditions of an update, and a resourceVersion on a create.
Fields the server owns that upstream silently replaces are shown replaced, not refused.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.app.api.refusals import ACCOUNT, POD, Refusal, account, check, ids, seed, state
from tests.helpers import pod

A_UID = "0b5cbb4c-0000-4000-8000-000000000000"
SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
QUALIFIED = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
    "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
INVALID = "FieldValueInvalid"
OWNER = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": A_UID}


def _create(upstream: str, case: str, metadata: dict[str, Any], message: str | None, code: int = 422, reason: str = "Invalid", **extra: Any) -> Refusal:
    """A POST of a ServiceAccount with ``metadata``."""
    body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata}
    return Refusal(upstream, case, "POST", "serviceaccounts", code, reason, message, body, **extra)


def _update(upstream: str, case: str, metadata: dict[str, Any], message: str | None, code: int = 422, reason: str = "Invalid", **extra: Any) -> Refusal:
    """A PUT of the seeded ServiceAccount with ``metadata`` (its name included)."""
    return Refusal(upstream, case, "PUT", ACCOUNT, code, reason, message, account(**metadata), **extra)


def _managed(manager: str, **entry: str) -> dict[str, Any]:
    """A readable managedFields entry owning the seeded label, so the field manager keeps it."""
    return {"manager": manager, "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}, **entry}


def _new(name: str) -> str:
    return f'ServiceAccount "{name}" is invalid: '


CREATES = [
    _create(
        "validation.ValidateObjectMetaAccessor", "neither name nor generateName", {}, _new("") + "metadata.name: Required value: name or generateName is required",
        causes=(("FieldValueRequired", "metadata.name"),),
    ),
    _create(
        "validation.ValidateObjectMetaAccessor", "an empty name and generateName", {"name": "", "generateName": ""},
        _new("") + "metadata.name: Required value: name or generateName is required",
    ),
    _create(
        "validation.ValidateObjectMetaAccessor", "a generateName no name can start with", {"generateName": "Bad_"}, None,
        pattern=rf'ServiceAccount "Bad_[a-z0-9]{{5}}" is invalid: \[metadata\.generateName: Invalid value: "Bad_": {re.escape(SUBDOMAIN)}, '
        rf'metadata\.name: Invalid value: "Bad_[a-z0-9]{{5}}": {re.escape(SUBDOMAIN)}\]',
        causes=((INVALID, "metadata.generateName"), (INVALID, "metadata.name")),
    ),
    _create(
        "validation.ValidateObjectMetaAccessor", "a generateName past 253 characters", {"generateName": "a" * 254}, None,
        pattern=r'ServiceAccount "a{58}[a-z0-9]{5}" is invalid: metadata\.generateName: Invalid value: "a{254}": must be no more than 253 characters',
        causes=((INVALID, "metadata.generateName"),),
    ),
    _create(
        "validation.ValidateObjectMetaAccessor", "a name past 253 characters", {"name": "a" * 254}, _new("a" * 254) + f'metadata.name: Invalid value: "{"a" * 254}": must be no more than 253 characters',
    ),
    _create("validation.ValidateObjectMetaAccessor", "a name with a capital", {"name": "Web"}, _new("Web") + f'metadata.name: Invalid value: "Web": {SUBDOMAIN}'),
    _create(
        "validation.ValidateObjectMetaAccessor", "a valid name, an invalid generateName", {"name": "fine", "generateName": "Bad_"},
        _new("fine") + f'metadata.generateName: Invalid value: "Bad_": {SUBDOMAIN}',
    ),
    _create(
        "validation.ValidateLabels", "a label key with a space", {"name": "new", "labels": {"bad key": "v"}},
        _new("new") + f'metadata.labels: Invalid value: "bad key": {QUALIFIED}', causes=((INVALID, "metadata.labels"),),
    ),
    _create(
        "validation.ValidateLabels", "a label value with a space", {"name": "new", "labels": {"k": "bad value"}}, None,
        pattern=r'ServiceAccount "new" is invalid: metadata\.labels: Invalid value: "bad value": a valid label must be an empty string or consist of .*',
        causes=((INVALID, "metadata.labels"),),
    ),
    _create(
        "validation.ValidateAnnotations", "an annotation key with a space", {"name": "new", "annotations": {"bad key": "v"}},
        _new("new") + f'metadata.annotations: Invalid value: "bad key": {QUALIFIED}', causes=((INVALID, "metadata.annotations"),),
    ),
    _create(
        "rest.EnsureObjectNamespaceMatchesRequestNamespace", "another namespace", {"name": "new", "namespace": "elsewhere"},
        "the namespace of the provided object does not match the namespace sent on the request", 400, "BadRequest",
    ),
    _create(
        "etcd3.store.Create", "a resourceVersion (upstream: a plain storage error, a 500)", {"name": "new", "resourceVersion": "7"},
        "resourceVersion should not be set on objects to be created", 400, "BadRequest",
    ),
    _create(
        "validation.ValidateFinalizerName", "a finalizer that is no qualified name", {"name": "new", "finalizers": ["example.com/bad name"]},
        _new("new") + f'metadata.finalizers: Invalid value: "example.com/bad name": {QUALIFIED}', causes=((INVALID, "metadata.finalizers"),),
    ),
    _create(
        "validation.validateKubeFinalizerName", "a finalizer without a domain", {"name": "new", "finalizers": ["keep"]},
        _new("new") + 'metadata.finalizers[0]: Invalid value: "keep": name is neither a standard finalizer name nor is it fully qualified',
        causes=((INVALID, "metadata.finalizers[0]"),),
    ),
    _create(
        "validation.ValidateFinalizers", "orphan and foregroundDeletion", {"name": "new", "finalizers": ["orphan", "foregroundDeletion"]},
        _new("new") + 'metadata.finalizers: Invalid value: []string{"orphan", "foregroundDeletion"}: finalizer orphan and foregroundDeletion cannot be both set',
    ),
    _create(
        "validation.validateOwnerReference", "an owner without a version", {"name": "new", "ownerReferences": [{**OWNER, "apiVersion": ""}]},
        _new("new") + 'metadata.ownerReferences.apiVersion: Invalid value: "": version must not be empty', causes=((INVALID, "metadata.ownerReferences.apiVersion"),),
    ),
    _create(
        "validation.validateOwnerReference", "an owner with only a group", {"name": "new", "ownerReferences": [{**OWNER, "apiVersion": "apps/"}]},
        _new("new") + 'metadata.ownerReferences.apiVersion: Invalid value: "apps/": version must not be empty',
    ),
    _create(
        "validation.validateOwnerReference", "an owner with neither kind, name nor uid", {"name": "new", "ownerReferences": [{"apiVersion": "v1", "kind": "", "name": "", "uid": ""}]},
        _new("new") + '[metadata.ownerReferences.kind: Invalid value: "": must not be empty, metadata.ownerReferences.name: Invalid value: "": must not be empty, '
        'metadata.ownerReferences.uid: Invalid value: "": must not be empty]',
        causes=((INVALID, "metadata.ownerReferences.kind"), (INVALID, "metadata.ownerReferences.name"), (INVALID, "metadata.ownerReferences.uid")),
    ),
    _create(
        "validation.validateOwnerReference", "an Event as owner", {"name": "new", "ownerReferences": [{**OWNER, "kind": "Event"}]}, None,
        pattern=r'ServiceAccount "new" is invalid: metadata\.ownerReferences: Invalid value: .*: /v1, Kind=Event is disallowed from being an owner',
    ),
    _create(
        "validation.ValidateOwnerReferences", "two controllers",
        {"name": "new", "ownerReferences": [{**OWNER, "controller": True}, {**OWNER, "name": "other", "uid": A_UID[:-1] + "1", "controller": True}]}, None,
        pattern=r'ServiceAccount "new" is invalid: metadata\.ownerReferences: Invalid value: .*: Only one reference can have Controller set to true\. '
        r'Found "true" in references for ConfigMap/owner and ConfigMap/other',
    ),
]

UPDATES = [
    _update(
        "handlers.checkName", "another name", {"name": "other"}, "the name of the object (other) does not match the name on the URL (existing)", 400, "BadRequest",
    ),
    _update(
        "handlers.checkName", "another namespace", {"namespace": "elsewhere"}, None, 400, "BadRequest",
        pattern=r"the namespace of the object \(elsewhere\) does not match the namespace on the request \(t-[0-9a-f]+\)",
    ),
    _update(
        "storage.Preconditions.Check", "another uid", {"uid": A_UID}, None, 409, "Conflict",
        pattern=r'Operation cannot be fulfilled on serviceaccounts "existing": StorageError: invalid object, Code: 4, Key: /registry/serviceaccounts/t-[0-9a-f]+/existing, '
        rf"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {A_UID}, UID in object meta: [0-9a-f-]{{36}}",
    ),
    _update(
        "registry.Store.Update", "a stale resourceVersion", {"resourceVersion": "1"},
        'Operation cannot be fulfilled on serviceaccounts "existing": the object has been modified; please apply your changes to the latest version and try again', 409, "Conflict",
    ),
    _update(
        "validation.ValidateObjectMetaAccessorUpdate", "a deletion started by hand", {"deletionTimestamp": "2030-01-01T00:00:00Z"}, None,
        pattern=r'ServiceAccount "existing" is invalid: metadata\.deletionTimestamp: Invalid value: .*2030-01-01.*: field is immutable',
        causes=((INVALID, "metadata.deletionTimestamp"),),
    ),
    _update(
        "validation.ValidateObjectMetaAccessorUpdate", "a deletion grace period set by hand", {"deletionGracePeriodSeconds": 30},
        'ServiceAccount "existing" is invalid: metadata.deletionGracePeriodSeconds: Invalid value: 30: field is immutable',
    ),
    _update(
        "validation.validateKubeFinalizerName", "a finalizer without a domain", {"finalizers": ["keep"]},
        'ServiceAccount "existing" is invalid: metadata.finalizers[0]: Invalid value: "keep": name is neither a standard finalizer name nor is it fully qualified',
    ),
    _update(
        "validation.ValidateManagedFields", "a managedFields manager past 128 bytes", {"labels": {"app": "seeded"}, "managedFields": [_managed("m" * 129)]}, None,
        pattern=r'ServiceAccount "existing" is invalid: metadata\.managedFields\[[01]\]\.manager: Too long: may not be more than 128 bytes',
    ),
    _update(
        "validation.ValidateManagedFields", "a managedFields manager with a control character", {"labels": {"app": "seeded"}, "managedFields": [_managed("a\nb")]}, None,
        pattern=r'ServiceAccount "existing" is invalid: metadata\.managedFields\[[01]\]\.manager: Invalid value: "a\\nb": invalid character U\+000A \(at position 1\)',
    ),
    _update(
        "validation.ValidateManagedFields", "a managedFields subresource past 256 bytes", {"labels": {"app": "seeded"}, "managedFields": [_managed("m", subresource="s" * 257)]}, None,
        pattern=r'ServiceAccount "existing" is invalid: metadata\.managedFields\[[01]\]\.subresource: Too long: may not be more than 256 bytes',
    ),
    _update(
        "validation.validateOwnerReference", "an owner without a uid", {"ownerReferences": [{**OWNER, "uid": ""}]},
        'ServiceAccount "existing" is invalid: metadata.ownerReferences.uid: Invalid value: "": must not be empty',
    ),
]

ROWS = CREATES + UPDATES


@pytest.mark.parametrize("row", ROWS, ids=ids(ROWS))
def test_refused(api: httpx.Client, ns: str, row: Refusal) -> None:
    check(api, ns, row)


def test_generated_names_are_cut_to_leave_room_for_the_suffix(api: httpx.Client, ns: str) -> None:
    """names.SimpleNameGenerator: a prefix of up to 253 characters is valid and cut to 58, then 5 random characters."""
    response = api.post(f"/api/v1/namespaces/{ns}/serviceaccounts", json={"metadata": {"generateName": "a" * 100}})
    assert response.status_code == 201, response.text
    name = response.json()["metadata"]["name"]
    assert len(name) == 63 and name.startswith("a" * 58), name


def test_fields_the_server_owns_are_replaced_on_create(api: httpx.Client, ns: str) -> None:
    """rest.FillObjectMetaSystemFields and rest.BeforeCreate: a client's uid, creationTimestamp and
    deletion fields give way to the server's, without a refusal."""
    sent = {"uid": A_UID, "creationTimestamp": "2001-01-01T00:00:00Z", "deletionTimestamp": "2030-01-01T00:00:00Z", "deletionGracePeriodSeconds": 30}
    response = api.post(f"/api/v1/namespaces/{ns}/serviceaccounts", json=account("new", **sent))
    assert response.status_code == 201, response.text
    metadata = response.json()["metadata"]
    assert metadata["uid"] != A_UID
    assert not metadata["creationTimestamp"].startswith("2001")
    assert "deletionTimestamp" not in metadata and "deletionGracePeriodSeconds" not in metadata


def test_fields_the_server_owns_are_kept_on_update(api: httpx.Client, ns: str) -> None:
    """rest.BeforeUpdate: creationTimestamp and generation keep their stored values, and an update
    without a uid keeps the stored one."""
    seed(api, ns)
    stored = state(api, ns)["pods"][0]
    changed = pod("web")
    changed["metadata"].update(creationTimestamp="2001-01-01T00:00:00Z", generation=42, finalizers=["example.com/keep"], labels={"x": "y"})
    response = api.put(f"/api/v1/namespaces/{ns}/{POD}", json=changed)
    assert response.status_code == 200, response.text
    metadata = response.json()["metadata"]
    assert metadata["uid"] == stored["metadata"]["uid"]
    assert metadata["creationTimestamp"] == stored["metadata"]["creationTimestamp"]
    assert metadata["generation"] == stored["metadata"]["generation"]
    assert metadata["labels"] == {"x": "y"}
