"""Strategic merge patches refused as kube-apiserver's patch handler refuses them.

The seeded ServiceAccount has ``secrets`` [a, b] (merged by name) and the Pod ``web`` one
container and a finalizer. Upstream's strategicpatch errors reach the client through
``interpretStrategicMergePatchError``: malformed directives are 400, lists of lists 422, and every
other error a plain one, which upstream answers 500 and this server 400 BadRequest with the same
message (it is the client's mistake; a 5xx would invite a retry).
"""

from __future__ import annotations

import httpx
import pytest

from tests.app.api.refusals import ACCOUNT, POD, STRATEGIC, Refusal, check, ids, seed, send

SMP = "strategicpatch"


def _row(upstream: str, case: str, patch: object, code: int, reason: str, message: str | None, path: str = ACCOUNT, **extra: object) -> Refusal:
    return Refusal(upstream, case, "PATCH", path, code, reason, message, patch, STRATEGIC, **extra)  # type: ignore[arg-type]


ROWS = [
    _row("handlers.strategicPatchObject", "an array is no patch", [{"a": 1}], 400, "BadRequest", "json: cannot unmarshal array into Go value of type map[string]interface {}"),
    _row("handlers.strategicPatchObject", "a string is no patch", "x", 400, "BadRequest", "json: cannot unmarshal string into Go value of type map[string]interface {}"),
    _row(f"{SMP}.applyRetainKeysDirective", "$retainKeys not a list", {"spec": {"$retainKeys": "hostname"}}, 400, "BadRequest", "invalid patch format of retainKeys", POD),
    _row(
        f"{SMP}.applyRetainKeysDirective", "a patched key missing from $retainKeys",
        {"spec": {"$retainKeys": ["hostname"], "nodeName": "n"}}, 400, "BadRequest", "invalid patch format of retainKeys", POD,
    ),
    _row(f"{SMP}.extractKey", "$setElementOrder without a list name", {"$setElementOrder": []}, 400, "BadRequest", "invalid patch format of setElementOrder list"),
    _row(f"{SMP}.extractKey", "$deleteFromPrimitiveList without a list name", {"metadata": {"$deleteFromPrimitiveList": ["x"]}}, 400, "BadRequest", "invalid patch format of primitive list"),
    _row(f"{SMP}.handleDirectiveInMergeMap", "an unknown $patch in a map", {"metadata": {"labels": {"$patch": "frob"}}}, 400, "BadRequest", "unknown patch type: frob in map: map[$patch:frob]"),
    _row(f"{SMP}.handleDirectiveInMergeMap", "an unknown $patch at the top", {"$patch": "frob"}, 400, "BadRequest", "unknown patch type: frob in map: map[$patch:frob]"),
    _row(f"{SMP}.handleDirectiveInMergeMap", "$patch: merge is no map directive", {"metadata": {"$patch": "merge"}}, 400, "BadRequest", "unknown patch type: merge in map: map[$patch:merge]"),
    _row(
        f"{SMP}.mergeSliceWithSpecialElements", "an unknown $patch in a merged list",
        {"secrets": [{"$patch": "frob", "name": "a"}]}, 400, "BadRequest", "unknown patch type: frob in map: map[$patch:frob name:a]",
    ),
    _row(
        f"{SMP}.mergeSliceWithSpecialElements", "$patch: merge in a merged list",
        {"secrets": [{"$patch": "merge", "name": "a"}]}, 400, "BadRequest", "merging lists cannot yet be specified in the patch",
    ),
    _row(
        f"{SMP}.mergeSliceWithSpecialElements", "$patch: delete without the merge key",
        {"secrets": [{"$patch": "delete"}]}, 400, "BadRequest", "map: map[$patch:delete] does not contain declared merge key: name",
    ),
    _row(
        f"{SMP}.mergeSliceWithoutSpecialElements", "an item without the merge key",
        {"secrets": [{"namespace": "x"}]}, 400, "BadRequest", "map: map[namespace:x] does not contain declared merge key: name",
    ),
    _row(
        f"{SMP}.mergeSliceWithoutSpecialElements", "a container without its name",
        {"spec": {"containers": [{"image": "x"}]}}, 400, "BadRequest", "map: map[image:x] does not contain declared merge key: name", POD,
    ),
    _row(
        f"{SMP}.sliceElementType", "a list item of another type",
        {"secrets": ["a"]}, 400, "BadRequest", "list element types are not identical: [[map[name:a] map[name:b]] [a]]",
    ),
    _row(
        f"{SMP}.sliceElementType", "a list of lists in a merged list",
        {"metadata": {"finalizers": [["x"]]}}, 400, "BadRequest", "list element types are not identical: [[example.com/keep] [[x]]]", POD,
    ),
    _row(
        f"{SMP}.validatePatchWithSetOrderList", "an order the patch list does not follow",
        {"$setElementOrder/secrets": [{"name": "a"}], "secrets": [{"name": "b"}]}, 400, "BadRequest",
        "the order in patch list:\n[map[name:b]]\n doesn't match $setElementOrder list:\n[map[name:a]]",
    ),
    _row(
        f"{SMP}.mergeKeyValueEqual", "an order item without the merge key",
        {"$setElementOrder/secrets": [{"namespace": "a"}], "secrets": [{"name": "a"}]}, 400, "BadRequest",
        "map: map[namespace:a] does not contain declared merge key: name",
    ),
    _row(
        f"{SMP}.mergePatchIntoOriginal", "an order for a field the kind does not have",
        {"$setElementOrder/bogus": [{"name": "a"}]}, 400, "BadRequest", 'unable to find api field in struct ServiceAccount for the json field "bogus"',
    ),
    _row(
        f"{SMP}.mergePatchIntoOriginal", "an order for a map",
        {"metadata": {"$setElementOrder/labels": ["app"]}}, 400, "BadRequest", "expected a []interface {}, but received a map[string]interface {}",
    ),
    _row(
        f"{SMP}.mergePatchIntoOriginal", "an order that is no list",
        {"$setElementOrder/secrets": {"name": "a"}}, 400, "BadRequest", "expected a []interface {}, but received a map[string]interface {}",
    ),
    _row(
        "handlers.applyPatchToObject", "a directive upstream does not know, under Strict",
        {"$foo": 1}, 422, "Invalid", ' "" is invalid: patch: Invalid value: "map[$foo:1]": strict decoding error: unknown field "$foo"',
        params=(("fieldValidation", "Strict"),), causes=(("FieldValueInvalid", "patch"),),
    ),
    _row(
        "handlers.applyPatchToObject", "a $retainKeys in a value with nothing to merge, under Strict",
        {"automountServiceAccountToken": True, "imagePullSecrets": [{"name": "p", "$retainKeys": ["name"]}]}, 422, "Invalid",
        ' "" is invalid: patch: Invalid value: "map[automountServiceAccountToken:true imagePullSecrets:[map[$retainKeys:[name] name:p]]]": '
        'strict decoding error: unknown field "imagePullSecrets[0].$retainKeys"',
        params=(("fieldValidation", "Strict"),),
    ),
    _row(
        "handlers.applyPatchToObject", "a repeated key, under Strict", b'{"metadata":{"labels":{"a":"1","a":"2"}}}', 422, "Invalid",
        ' "" is invalid: patch: Invalid value: "map[metadata:map[labels:map[a:2]]]": strict decoding error: duplicate field "metadata.labels.a"',
        params=(("fieldValidation", "Strict"),),
    ),
    _row(
        "handlers.applyPatchToObject", "an unknown field in a patched container, under Strict",
        {"spec": {"containers": [{"name": "main", "bogus": 1}]}}, 422, "Invalid", None, POD,
        params=(("fieldValidation", "Strict"),),
        pattern=r' "" is invalid: patch: Invalid value: "map\[spec:.*\]": strict decoding error: unknown field "spec\.containers\[0\]\.bogus"',
    ),
    _row("handlers.checkName", "a patch renaming the object", {"metadata": {"name": "other"}}, 400, "BadRequest", f"the name of the object (other) does not match the name on the URL ({ACCOUNT.split('/')[1]})"),
    _row(
        "rest.EnsureObjectNamespaceMatchesRequestNamespace", "a patch moving the object", {"metadata": {"namespace": "elsewhere"}}, 400, "BadRequest",
        "the namespace of the provided object does not match the namespace sent on the request",
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=ids(ROWS))
def test_refused(api: httpx.Client, ns: str, row: Refusal) -> None:
    check(api, ns, row)


def test_an_unknown_directive_is_warned_of_and_dropped(api: httpx.Client, ns: str) -> None:
    """Under Warn (the default) upstream's typed decoding warns of a directive it does not know
    and drops it: the patch applies as if it were absent, with a warning."""
    seed(api, ns)
    response = send(api, ns, Refusal("", "", "PATCH", ACCOUNT, 200, "", body={"$foo": 1, "metadata": {"labels": {"x": "y"}}}, content_type=STRATEGIC))
    assert response.status_code == 200, response.text
    assert response.headers["warning"] == '299 - "unknown field \\"$foo\\""'
    assert response.json()["metadata"]["labels"] == {"app": "seeded", "x": "y"}
    assert "$foo" not in response.json()
