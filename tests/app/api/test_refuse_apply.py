"""Server-side apply refused as kube-apiserver's applyPatcher and field
manager refuse it.

The configuration's apiVersion and kind must be the endpoint's (versionCheckManager); a field
manager is required and validated (ValidatePatchOptions); managedFields may not be sent
(structuredMergeManager); a configuration the schema cannot type is refused (upstream: a plain
error, a 500; here 400 with upstream's message); repeated keys are refused under Strict after the
apply; an apply that would create checks uid, namespace and name (patcher.applyPatch); changing
fields another manager owns is a 409 naming the managers and fields.
"""

from __future__ import annotations

import httpx
import pytest

from tests.app.api.refusals import ACCOUNT, APPLY, MERGE_PATCH, POD, STRATEGIC, Refusal, account, check, ids, seed, send, state
from tests.helpers import assert_status

MANAGER = (("fieldManager", "tests"),)
TYPED = "failed to create typed patch object (/existing; /v1, Kind=ServiceAccount): "
OPTIONS = 'PatchOptions.meta.k8s.io "" is invalid: '


def _apply(case: str, body: object, code: int, reason: str, message: str | None, upstream: str, path: str = ACCOUNT, params: tuple[tuple[str, str], ...] = MANAGER, **extra: object) -> Refusal:
    return Refusal(upstream, case, "PATCH", path, code, reason, message, body, APPLY, params, **extra)  # type: ignore[arg-type]


def _config(**fields: object) -> dict[str, object]:
    config = account()
    config.update(fields)
    return config


ROWS = [
    _apply("another kind", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "existing"}}, 400, "BadRequest", "invalid object type: /v1, Kind=Pod", "versionCheckManager.Apply"),
    _apply("another version", {"apiVersion": "v2", "kind": "ServiceAccount", "metadata": {"name": "existing"}}, 400, "BadRequest", "invalid object type: /v2, Kind=ServiceAccount", "versionCheckManager.Apply"),
    _apply(
        "another group", {"apiVersion": "resource.k8s.io/v1", "kind": "ServiceAccount", "metadata": {"name": "existing"}}, 400, "BadRequest",
        "invalid object type: resource.k8s.io/v1, Kind=ServiceAccount", "versionCheckManager.Apply",
    ),
    _apply("no apiVersion nor kind", {"metadata": {"name": "existing"}}, 400, "BadRequest", "invalid object type: /, Kind=", "versionCheckManager.Apply"),
    _apply("no kind, on a create", {"apiVersion": "v1", "metadata": {"name": "new"}}, 400, "BadRequest", "invalid object type: /v1, Kind=", "versionCheckManager.Apply", "serviceaccounts/new"),
    _apply("an empty document", b"", 400, "BadRequest", "invalid object type: /, Kind=", "versionCheckManager.Apply"),
    _apply(
        "no field manager", account(), 422, "Invalid", OPTIONS + "fieldManager: Required value: is required for apply patch", "validation.ValidatePatchOptions",
        params=(), causes=(("FieldValueRequired", "fieldManager"),),
    ),
    _apply(
        "an empty field manager", account(), 422, "Invalid", OPTIONS + "fieldManager: Required value: is required for apply patch", "validation.ValidatePatchOptions",
        params=(("fieldManager", ""),),
    ),
    _apply(
        "a field manager of 129 bytes", account(), 422, "Invalid", OPTIONS + "fieldManager: Too long: may not be more than 128 bytes", "validation.ValidateFieldManager",
        params=(("fieldManager", "m" * 129),),
    ),
    _apply(
        "a field manager with a control character", account(), 422, "Invalid",
        OPTIONS + 'fieldManager: Invalid value: "a\\tb": invalid character U+0009 (at position 1)', "validation.ValidateFieldManager",
        params=(("fieldManager", "a\tb"),),
    ),
    Refusal(
        "validation.ValidatePatchOptions", "force on a merge patch", "PATCH", ACCOUNT, 422, "Invalid",
        OPTIONS + "force: Forbidden: may not be specified for non-apply patch", {"metadata": {"labels": {"x": "y"}}}, MERGE_PATCH, (("force", "true"),),
    ),
    Refusal(
        "validation.ValidatePatchOptions", "force=false on a strategic merge patch", "PATCH", ACCOUNT, 422, "Invalid",
        OPTIONS + "force: Forbidden: may not be specified for non-apply patch", {"metadata": {"labels": {"x": "y"}}}, STRATEGIC, (("force", "false"),),
    ),
    _apply("managedFields sent", _config(metadata={"name": "existing", "managedFields": [{"manager": "x", "operation": "Apply"}]}), 400, "BadRequest", "metadata.managedFields must be nil", "structuredMergeManager.Apply"),
    _apply("an empty managedFields sent", _config(metadata={"name": "existing", "managedFields": []}), 400, "BadRequest", "metadata.managedFields must be nil", "structuredMergeManager.Apply"),
    _apply("an unknown field", _config(foo=1), 400, "BadRequest", TYPED + ".foo: field not declared in schema", "structuredMergeManager.Apply"),
    _apply(
        "an unknown field of a container", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "spec": {"containers": [{"name": "main", "bogus": 1}]}},
        400, "BadRequest", 'failed to create typed patch object (/web; /v1, Kind=Pod): .spec.containers[name="main"].bogus: field not declared in schema',
        "structuredMergeManager.Apply", POD,
    ),
    _apply("a repeated list key", _config(secrets=[{"name": "a"}, {"name": "a"}]), 400, "BadRequest", TYPED + '.secrets: duplicate entries for key [name="a"]', "structuredMergeManager.Apply"),
    _apply(
        "a list item without its key", _config(secrets=[{"namespace": "x"}]), 400, "BadRequest",
        TYPED + '.secrets: element 0: associative list with keys has an element that omits key field "name" (and doesn\'t have default value)', "structuredMergeManager.Apply",
    ),
    _apply("malformed YAML", b"metadata: [", 400, "BadRequest", None, "applyPatcher.applyPatchToCurrentObject", pattern=r"error decoding YAML: error converting YAML to JSON: .+"),
    _apply(
        "a list is no configuration", b"- a\n- b\n", 400, "BadRequest",
        "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}",
        "applyPatcher.applyPatchToCurrentObject",
    ),
    _apply(
        "a repeated key, under Strict", b"apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: existing\n  name: existing\n", 400, "BadRequest",
        'error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 5: key "name" already set in map', "applyPatcher.applyPatchToCurrentObject",
        params=(("fieldManager", "tests"), ("fieldValidation", "Strict")),
    ),
    _apply(
        "changing a field another manager owns", _config(metadata={"name": "existing", "labels": {"app": "other"}}), 409, "Conflict",
        'Apply failed with 1 conflict: conflict with "python-httpx" using v1: .metadata.labels.app', "merge.Conflicts",
        causes=(("FieldManagerConflict", ".metadata.labels.app"),),
    ),
    _apply(
        "changing two fields another manager owns", _config(metadata={"name": "existing", "labels": {"app": "other"}}, secrets=[{"name": "a", "namespace": "x"}]),
        409, "Conflict", None, "merge.Conflicts",
        pattern=r'Apply failed with 2 conflicts: conflicts with "python-httpx" using v1:\n- \.metadata\.labels\.app\n- \.secrets.*',
    ),
    _apply("another name", account("other"), 400, "BadRequest", "the name of the object (other) does not match the name on the URL (existing)", "handlers.checkName"),
    _apply(
        "a create without a name", {"apiVersion": "v1", "kind": "ServiceAccount"}, 400, "BadRequest",
        "the name of the object () does not match the name on the URL (new)", "handlers.checkName", "serviceaccounts/new",
    ),
    _apply(
        "a create naming a uid", account("new", uid="0b5cbb4c-0000-4000-8000-000000000000"), 409, "Conflict",
        'Operation cannot be fulfilled on serviceaccounts "new": uid mismatch: the provided object specified uid 0b5cbb4c-0000-4000-8000-000000000000, and no existing object was found',
        "patcher.applyPatch", "serviceaccounts/new",
    ),
    _apply(
        "another namespace", account(namespace="elsewhere"), 400, "BadRequest",
        "the namespace of the provided object does not match the namespace sent on the request", "rest.EnsureObjectNamespaceMatchesRequestNamespace",
    ),
    _apply(
        "a status that does not exist", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ghost"}, "status": {"phase": "Running"}}, 404, "NotFound",
        'pods "ghost" not found', "registry.Store.Update", "pods/ghost/status",
    ),
    _apply(
        "a dry run is refused the same", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}}, 400, "BadRequest",
        "invalid object type: /v1, Kind=Pod", "versionCheckManager.Apply", "serviceaccounts/web",
        params=(("fieldManager", "tests"), ("dryRun", "All")),
    ),
]


def _request(path: str, body: object, manager: str, force: bool = False) -> Refusal:
    """An apply that is meant to be answered (only ``send`` reads it)."""
    params = (("fieldManager", manager), ("force", "true")) if force else (("fieldManager", manager),)
    return Refusal("", "", "PATCH", path, 200, "", body=body, content_type=APPLY, params=params)


@pytest.mark.parametrize("row", ROWS, ids=ids(ROWS))
def test_refused(api: httpx.Client, ns: str, row: Refusal) -> None:
    check(api, ns, row)


def test_a_conflict_names_every_manager(api: httpx.Client, ns: str) -> None:
    seed(api, ns)
    first = send(api, ns, _request(POD, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"tier": "a"}}}, "first"))
    assert first.status_code == 200, first.text
    before = state(api, ns)
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"tier": "b"}}, "spec": {"containers": [{"name": "main", "image": "other"}]}}
    status = assert_status(send(api, ns, _request(POD, body, "second")), 409, "Conflict")
    assert status["message"] == (
        'Apply failed with 2 conflicts: conflicts with "first":\n- .metadata.labels.tier\n'
        'conflicts with "python-httpx" using v1:\n- .spec.containers[name="main"].image'
    )
    assert [(c["reason"], c["message"], c["field"]) for c in status["details"]["causes"]] == [
        ("FieldManagerConflict", 'conflict with "first"', ".metadata.labels.tier"),
        ("FieldManagerConflict", 'conflict with "python-httpx" using v1', '.spec.containers[name="main"].image'),
    ]
    assert state(api, ns) == before


def test_force_takes_the_fields(api: httpx.Client, ns: str) -> None:
    seed(api, ns)
    body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "existing", "labels": {"app": "other"}}}
    response = send(api, ns, _request(ACCOUNT, body, "m", force=True))
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["labels"] == {"app": "other"}


def test_repeated_keys_are_warned_of_by_default(api: httpx.Client, ns: str) -> None:
    seed(api, ns)
    body = b"apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: existing\n  labels:\n    x: a\n    x: b\n"
    response = send(api, ns, _request(ACCOUNT, body, "tests"))
    assert response.status_code == 200, response.text
    assert response.headers["warning"] == '299 - "line 7: key \\"x\\" already set in map"'
    assert response.json()["metadata"]["labels"]["x"] == "b"
