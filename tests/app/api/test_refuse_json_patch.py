"""JSON patches (RFC 6902, evanphx/json-patch v4) and merge patches (RFC
7386) refused as kube-apiserver's jsonPatcher refuses them.

Under fieldValidation Warn (the default) and Strict upstream first decodes a JSON patch into its
typed operations and a merge patch into an object (a 400 ``error decoding patch``); an operation
that does not apply is a 422 with the generic message and no causes; more than 10000 operations
a 413; a result that is not the object, a 422 on the field ``patch``.
"""

from __future__ import annotations

import httpx
import orjson
import pytest

from tests.app.api.refusals import ACCOUNT, GENERIC_INVALID, JSON_PATCH, MERGE_PATCH, POD, Refusal, check, ids, seed

APPLY = "jsonpatch.Patch.Apply"
IGNORE = (("fieldValidation", "Ignore"),)


def _json(case: str, ops: object, code: int = 422, reason: str = "Invalid", message: str | None = GENERIC_INVALID, upstream: str = APPLY, **extra: object) -> Refusal:
    return Refusal(upstream, case, "PATCH", ACCOUNT, code, reason, message, ops, JSON_PATCH, **extra)  # type: ignore[arg-type]


def _merge(
    case: str, patch: object, code: int, reason: str, message: str | None, upstream: str = "handlers.jsonPatcher.applyJSPatch", path: str = ACCOUNT, **extra: object
) -> Refusal:
    return Refusal(upstream, case, "PATCH", path, code, reason, message, patch, MERGE_PATCH, **extra)  # type: ignore[arg-type]


TOO_MANY = [{"op": "test", "path": "/metadata/name", "value": "existing"}] * 10001

ROWS = [
    _json("a failed test", [{"op": "test", "path": "/metadata/labels/app", "value": "other"}]),
    _json("a test of a missing member", [{"op": "test", "path": "/metadata/labels/missing", "value": "x"}]),
    _json("removing a missing member", [{"op": "remove", "path": "/metadata/labels/missing"}]),
    _json("removing past the end of a list", [{"op": "remove", "path": "/secrets/5"}]),
    _json("an index that is no number", [{"op": "replace", "path": "/secrets/first", "value": {"name": "c"}}]),
    _json("adding past the end of a list", [{"op": "add", "path": "/secrets/3", "value": {"name": "c"}}]),
    _json("a path under a missing member", [{"op": "add", "path": "/spec/missing/x", "value": 1}]),
    _json("moving from a missing member", [{"op": "move", "from": "/metadata/labels/missing", "path": "/metadata/labels/x"}]),
    _json("copying from past the end of a list", [{"op": "copy", "from": "/secrets/9", "path": "/secrets/-"}]),
    _json("moving a member into itself", [{"op": "move", "from": "/metadata/labels", "path": "/metadata/labels/inner"}]),
    _json("an unknown operation", [{"op": "frobnicate", "path": "/metadata/labels/x"}]),
    _json("an operation without a path", [{"op": "add", "value": 1}]),
    _json("an operation without an op", [{"path": "/metadata/labels/x", "value": "y"}]),
    _json("a move without a from", [{"op": "move", "path": "/metadata/labels/x"}]),
    _json("the second of two operations fails", [{"op": "add", "path": "/metadata/labels/x", "value": "y"}, {"op": "remove", "path": "/missing"}]),
    _json(
        "more than 10000 operations", TOO_MANY, 413, "RequestEntityTooLarge",
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001", "handlers.jsonPatcher.applyJSPatch",
    ),
    _json(
        "an object is no JSON patch", {"op": "add"}, 400, "BadRequest",
        "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp", "handlers.jsonPatcher.applyJSPatch",
    ),
    _json(
        "an operation that is no object", [1], 400, "BadRequest",
        "error decoding patch: json: cannot unmarshal number into Go value of type handlers.jsonPatchOp", "handlers.jsonPatcher.applyJSPatch",
    ),
    _json(
        "an op that is no string", [{"op": 1, "path": "/x"}], 400, "BadRequest",
        "error decoding patch: json: cannot unmarshal number into Go struct field jsonPatchOp.op of type string", "handlers.jsonPatcher.applyJSPatch",
    ),
    _json(
        "a path that is no string", [{"op": "add", "path": ["x"], "value": 1}], 400, "BadRequest",
        "error decoding patch: json: cannot unmarshal array into Go struct field jsonPatchOp.path of type string", "handlers.jsonPatcher.applyJSPatch",
    ),
    _json(
        "an object is no JSON patch, fieldValidation Ignore", {"op": "add"}, 400, "BadRequest",
        "json: cannot unmarshal object into Go value of type jsonpatch.Patch", "jsonpatch.DecodePatch", params=IGNORE,
    ),
    _json("an op that is no string, fieldValidation Ignore", [{"op": 1, "path": "/x"}], params=IGNORE),
    _json(
        "an unknown field of an operation, under Strict", [{"op": "add", "path": "/metadata/labels/x", "value": "y", "foo": "bar"}], 422, "Invalid", None,
        "handlers.jsonPatcher.applyPatchToCurrentObject", params=(("fieldValidation", "Strict"),),
        pattern=r' "" is invalid: patch: Invalid value: "\{.*\}": strict decoding error: json patch unknown field "\[0\]\.foo"',
    ),
    _json(
        "a repeated field of an operation and an unknown field of the result, under Strict",
        b'[{"op":"add","path":"/bogus","path":"/spec2","value":"v"}]', 422, "Invalid", None,
        "handlers.jsonPatcher.applyPatchToCurrentObject", params=(("fieldValidation", "Strict"),),
        pattern=r' "" is invalid: patch: Invalid value: "\{.*\}": strict decoding error: json patch duplicate field "\[0\]\.path", unknown field "spec2"',
    ),
    _json(
        "a result that is no object", [{"op": "replace", "path": "", "value": [1]}],
    ),
    _merge(
        "an array is no merge patch", [{"a": 1}], 400, "BadRequest",
        "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}",
    ),
    _merge(
        "a number is no merge patch", 5, 400, "BadRequest",
        "error decoding patch: json: cannot unmarshal number into Go value of type map[string]interface {}",
    ),
    _merge("null is no merge patch", b"null", 400, "BadRequest", "Invalid JSON Patch", "jsonpatch.MergePatch"),
    _merge(
        "an array replaces the object, fieldValidation Ignore", [1], 422, "Invalid",
        ' "" is invalid: patch: Invalid value: "[1]": json: cannot unmarshal array into Go value of type map[string]interface {}',
        "handlers.jsonPatcher.applyPatchToCurrentObject", params=IGNORE, causes=(("FieldValueInvalid", "patch"),),
    ),
    _merge(
        "a repeated key and an unknown field, under Strict", b'{"metadata":{"labels":{"a":"1","a":"2"}},"spec2":{"x":1}}', 422, "Invalid", None,
        "handlers.jsonPatcher.applyPatchToCurrentObject", params=(("fieldValidation", "Strict"),),
        pattern=r' "" is invalid: patch: Invalid value: "\{.*\}": strict decoding error: duplicate field "metadata\.labels\.a", unknown field "spec2"',
    ),
    _merge("malformed JSON", b'{"metadata":', 400, "BadRequest", None, "jsonpatch.MergePatch", pattern=r"error decoding patch: .*"),
    _merge("an empty body", b"", 400, "BadRequest", None, "handlers.PatchResource", pattern=r".+"),
    _merge(
        "a merge renaming the object", {"metadata": {"name": "renamed"}}, 400, "BadRequest",
        "the name of the object (renamed) does not match the name on the URL (existing)", "handlers.checkName",
    ),
    _merge(
        "a merge removing the name", {"metadata": {"name": None}}, 400, "BadRequest",
        "the name of the object () does not match the name on the URL (existing)", "handlers.checkName",
    ),
    _merge(
        "a merge on a missing object", {"metadata": {"labels": {"x": "y"}}}, 404, "NotFound", 'serviceaccounts "missing" not found',
        "handlers.jsonPatcher.createNewObject", "serviceaccounts/missing",
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=ids(ROWS))
def test_refused(api: httpx.Client, ns: str, row: Refusal) -> None:
    status = check(api, ns, row)
    if row.code == 422 and row.message == GENERIC_INVALID:
        # NewGenericServerResponse: no cause names the library's own error.
        assert status["details"] == {}


def test_a_json_patch_on_a_status_subresource_refused_the_same(api: httpx.Client, ns: str) -> None:
    row = Refusal(APPLY, "status", "PATCH", f"{POD}/status", 422, "Invalid", GENERIC_INVALID, [{"op": "remove", "path": "/status/missing"}], JSON_PATCH)
    check(api, ns, row)


def test_ten_thousand_operations_are_allowed(api: httpx.Client, ns: str) -> None:
    seed(api, ns)
    ops = [{"op": "test", "path": "/metadata/name", "value": "existing"}] * 10000
    response = api.patch(f"/api/v1/namespaces/{ns}/{ACCOUNT}", content=orjson.dumps(ops), headers={"content-type": JSON_PATCH})
    assert response.status_code == 200, response.text
