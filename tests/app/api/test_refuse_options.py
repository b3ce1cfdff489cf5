"""Request options refused as kube-apiserver's option validation refuses them.

Create, Update and PatchOptions (ValidateCreateOptions, ValidateUpdateOptions,
ValidatePatchOptions: dryRun, fieldValidation, fieldManager), DeleteOptions from the query or the
body (ValidateDeleteOptions: propagationPolicy, orphanDependents, dryRun; the parameter codec for
gracePeriodSeconds; preconditions checked against the stored object by BeforeDelete) and List
options for a list, a watch and a collection delete (ValidateListOptions: resourceVersionMatch,
sendInitialEvents, continue). Every refused row leaves the namespace as it was.
"""

from __future__ import annotations

import httpx
import pytest

from tests.app.api.refusals import ACCOUNT, MERGE_PATCH, POD, Refusal, account, check, ids, seed, send, state
from tests.helpers import pod

CREATE = 'CreateOptions.meta.k8s.io "" is invalid: '
UPDATE = 'UpdateOptions.meta.k8s.io "" is invalid: '
PATCH = 'PatchOptions.meta.k8s.io "" is invalid: '
DELETE = 'DeleteOptions.meta.k8s.io "" is invalid: '
LIST = 'ListOptions.meta.k8s.io "" is invalid: '
DRY_RUN = 'dryRun: Unsupported value: []string{{{}}}: supported values: "All"'
FIELD_VALIDATION = 'fieldValidation: Unsupported value: "{}": supported values: "", "Ignore", "Strict", "Warn"'
POLICY = 'propagationPolicy: Unsupported value: "{}": supported values: "Foreground", "Background", "Orphan", "nil"'
BOTH_SET = 'propagationPolicy: Invalid value: "{}": orphanDependents and deletionPropagation cannot be both set'
NOT_SUPPORTED = "FieldValueNotSupported"
FORBIDDEN = "FieldValueForbidden"
A_UID = "0b5cbb4c-0000-4000-8000-000000000000"


def _write(upstream: str, case: str, method: str, prefix: str, detail: str, params: tuple[tuple[str, str], ...], **extra: object) -> Refusal:
    """A create (POST of a new ServiceAccount), update (PUT of the seeded one) or merge patch refused for its options."""
    path, body, content_type = {
        "POST": ("serviceaccounts", account("new"), "application/json"),
        "PUT": (ACCOUNT, account(), "application/json"),
        "PATCH": (ACCOUNT, {"metadata": {"labels": {"x": "y"}}}, MERGE_PATCH),
    }[method]
    return Refusal(upstream, case, method, path, 422, "Invalid", prefix + detail, body, content_type, params, **extra)  # type: ignore[arg-type]


def _delete(upstream: str, case: str, code: int, reason: str, message: str | None, body: object = None, params: tuple[tuple[str, str], ...] = (), path: str = ACCOUNT, **extra: object) -> Refusal:
    content_type = "application/json" if body is not None else None
    return Refusal(upstream, case, "DELETE", path, code, reason, message, body, content_type, params, **extra)  # type: ignore[arg-type]


def _list(case: str, message: str, params: tuple[tuple[str, str], ...], causes: tuple[tuple[str, str], ...], upstream: str = "validation.ValidateListOptions") -> Refusal:
    return Refusal(upstream, case, "GET", "pods", 422, "Invalid", LIST + message, None, None, params, causes=causes)


WRITES = [
    _write("validation.ValidateDryRun", "create, an unknown dryRun", "POST", CREATE, DRY_RUN.format('"bogus"'), (("dryRun", "bogus"),), causes=((NOT_SUPPORTED, "dryRun"),)),
    _write("validation.ValidateDryRun", "create, dryRun in lower case", "POST", CREATE, DRY_RUN.format('"all"'), (("dryRun", "all"),)),
    _write("validation.ValidateDryRun", "create, an empty dryRun", "POST", CREATE, DRY_RUN.format('""'), (("dryRun", ""),)),
    _write("validation.ValidateDryRun", "create, All and another dryRun", "POST", CREATE, DRY_RUN.format('"All", "Some"'), (("dryRun", "All"), ("dryRun", "Some"))),
    _write(
        "validation.ValidateFieldValidation", "create, an unknown fieldValidation", "POST", CREATE, FIELD_VALIDATION.format("Loose"), (("fieldValidation", "Loose"),),
        causes=((NOT_SUPPORTED, "fieldValidation"),),
    ),
    _write("validation.ValidateFieldValidation", "create, fieldValidation in lower case", "POST", CREATE, FIELD_VALIDATION.format("strict"), (("fieldValidation", "strict"),)),
    _write("validation.ValidateFieldManager", "create, a field manager of 129 bytes", "POST", CREATE, "fieldManager: Too long: may not be more than 128 bytes", (("fieldManager", "m" * 129),)),
    _write(
        "validation.ValidateFieldManager", "create, a field manager with DEL after a non-ASCII letter (Go's %q, byte positions)", "POST", CREATE,
        'fieldManager: Invalid value: "caf\u00e9\\x7f": invalid character U+007F (at position 5)', (("fieldManager", "caf\u00e9\x7f"),),
    ),
    _write(
        "validation.ValidateCreateOptions", "create, every option wrong", "POST", CREATE,
        "[" + DRY_RUN.format('"x"') + ", " + FIELD_VALIDATION.format("y") + "]", (("dryRun", "x"), ("fieldValidation", "y")),
        causes=((NOT_SUPPORTED, "dryRun"), (NOT_SUPPORTED, "fieldValidation")),
    ),
    _write("validation.ValidateUpdateOptions", "update, an unknown dryRun", "PUT", UPDATE, DRY_RUN.format('"bogus"'), (("dryRun", "bogus"),)),
    _write("validation.ValidateUpdateOptions", "update, an unknown fieldValidation", "PUT", UPDATE, FIELD_VALIDATION.format("Loose"), (("fieldValidation", "Loose"),)),
    _write(
        "validation.ValidateUpdateOptions", "update, a field manager with a newline", "PUT", UPDATE,
        'fieldManager: Invalid value: "a\\nb": invalid character U+000A (at position 1)', (("fieldManager", "a\nb"),),
    ),
    _write("validation.ValidatePatchOptions", "patch, an unknown dryRun", "PATCH", PATCH, DRY_RUN.format('"bogus"'), (("dryRun", "bogus"),)),
    _write("validation.ValidatePatchOptions", "patch, an unknown fieldValidation", "PATCH", PATCH, FIELD_VALIDATION.format("Loose"), (("fieldValidation", "Loose"),)),
    _write("validation.ValidatePatchOptions", "patch, force on a merge patch", "PATCH", PATCH, "force: Forbidden: may not be specified for non-apply patch", (("force", "1"),)),
]

DELETES = [
    _delete(
        "validation.ValidateDeleteOptions", "an unknown propagationPolicy in the query", 422, "Invalid", DELETE + POLICY.format("Sideways"),
        params=(("propagationPolicy", "Sideways"),), causes=((NOT_SUPPORTED, "propagationPolicy"),),
    ),
    _delete("validation.ValidateDeleteOptions", "an empty propagationPolicy in the query", 422, "Invalid", DELETE + POLICY.format(""), params=(("propagationPolicy", ""),)),
    _delete("validation.ValidateDeleteOptions", "propagationPolicy in lower case", 422, "Invalid", DELETE + POLICY.format("background"), params=(("propagationPolicy", "background"),)),
    _delete("validation.ValidateDeleteOptions", "an unknown propagationPolicy in the body", 422, "Invalid", DELETE + POLICY.format("Sideways"), body={"propagationPolicy": "Sideways"}),
    _delete(
        "validation.ValidateDeleteOptions", "orphanDependents and propagationPolicy in the query", 422, "Invalid", DELETE + BOTH_SET.format("Background"),
        params=(("orphanDependents", "false"), ("propagationPolicy", "Background")), causes=(("FieldValueInvalid", "propagationPolicy"),),
    ),
    _delete(
        "validation.ValidateDeleteOptions", "orphanDependents and propagationPolicy in the body", 422, "Invalid", DELETE + BOTH_SET.format("Orphan"),
        body={"orphanDependents": True, "propagationPolicy": "Orphan"},
    ),
    _delete("validation.ValidateDryRun", "an unknown dryRun in the query", 422, "Invalid", DELETE + DRY_RUN.format('"bogus"'), params=(("dryRun", "bogus"),)),
    _delete("validation.ValidateDryRun", "an unknown dryRun in the body", 422, "Invalid", DELETE + DRY_RUN.format('"All", "bogus"'), body={"dryRun": ["All", "bogus"]}),
    _delete(
        "validation.ValidateDeleteOptions", "every option wrong", 422, "Invalid", DELETE + "[" + POLICY.format("x") + ", " + DRY_RUN.format('"y"') + "]",
        params=(("propagationPolicy", "x"), ("dryRun", "y")), causes=((NOT_SUPPORTED, "propagationPolicy"), (NOT_SUPPORTED, "dryRun")),
    ),
    _delete(
        "runtime.Convert_Slice_string_To_Pointer_int64", "gracePeriodSeconds that is no integer", 400, "BadRequest", 'strconv.ParseInt: parsing "soon": invalid syntax',
        params=(("gracePeriodSeconds", "soon"),),
    ),
    _delete(
        "runtime.Convert_Slice_string_To_Pointer_int64", "a fractional gracePeriodSeconds", 400, "BadRequest", 'strconv.ParseInt: parsing "1.5": invalid syntax',
        params=(("gracePeriodSeconds", "1.5"),),
    ),
    _delete(
        "runtime.Convert_Slice_string_To_Pointer_int64", "an empty gracePeriodSeconds", 400, "BadRequest", 'strconv.ParseInt: parsing "": invalid syntax',
        params=(("gracePeriodSeconds", ""),),
    ),
    _delete(
        "runtime.Convert_Slice_string_To_Pointer_int64", "gracePeriodSeconds past int64", 400, "BadRequest", 'strconv.ParseInt: parsing "9223372036854775808": value out of range',
        params=(("gracePeriodSeconds", "9223372036854775808"),),
    ),
    _delete(
        "json.Unmarshal", "gracePeriodSeconds in the body as a string", 400, "BadRequest",
        "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64", body={"gracePeriodSeconds": "5"},
    ),
    _delete(
        "json.Unmarshal", "preconditions that are no object", 400, "BadRequest",
        "json: cannot unmarshal array into Go struct field DeleteOptions.preconditions of type v1.Preconditions", body={"preconditions": []},
    ),
    _delete(
        "rest.BeforeDelete", "another uid", 409, "Conflict", None, body={"preconditions": {"uid": A_UID}},
        pattern=rf'Operation cannot be fulfilled on ServiceAccount "existing": the UID in the precondition \({A_UID}\) does not match the UID in record \([0-9a-f-]{{36}}\)\. '
        r"The object might have been deleted and then recreated",
    ),
    _delete(
        "rest.BeforeDelete", "another resourceVersion", 409, "Conflict", None, body={"preconditions": {"resourceVersion": "1"}},
        pattern=r'Operation cannot be fulfilled on ServiceAccount "existing": the ResourceVersion in the precondition \(1\) does not match the ResourceVersion in record \([0-9]+\)\. '
        r"The object might have been modified",
    ),
    _delete(
        "rest.BeforeDelete", "another uid, for a pod deleted gracefully", 409, "Conflict", None, body={"preconditions": {"uid": A_UID}, "gracePeriodSeconds": 30}, path=POD,
        pattern=rf'Operation cannot be fulfilled on Pod "web": the UID in the precondition \({A_UID}\) does not match the UID in record \([0-9a-f-]{{36}}\)\. '
        r"The object might have been deleted and then recreated",
    ),
    _delete(
        "validation.ValidateDeleteOptions", "a collection delete, an unknown propagationPolicy", 422, "Invalid", DELETE + POLICY.format("Sideways"),
        params=(("propagationPolicy", "Sideways"),), path="serviceaccounts",
    ),
    _delete(
        "validation.ValidateListOptions", "a collection delete, resourceVersionMatch without resourceVersion", 422, "Invalid",
        LIST + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided", params=(("resourceVersionMatch", "NotOlderThan"),),
        path="serviceaccounts",
    ),
]

LISTS = [
    _list(
        "resourceVersionMatch without resourceVersion", "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        (("resourceVersionMatch", "Exact"),), ((FORBIDDEN, "resourceVersionMatch"),),
    ),
    _list(
        "an unknown resourceVersionMatch", 'resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""',
        (("resourceVersion", "1"), ("resourceVersionMatch", "Newest")), ((NOT_SUPPORTED, "resourceVersionMatch"),),
    ),
    _list(
        "resourceVersionMatch in lower case", 'resourceVersionMatch: Unsupported value: "exact": supported values: "Exact", "NotOlderThan", ""',
        (("resourceVersion", "1"), ("resourceVersionMatch", "exact")), ((NOT_SUPPORTED, "resourceVersionMatch"),),
    ),
    _list(
        "Exact at resourceVersion 0", 'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
        (("resourceVersion", "0"), ("resourceVersionMatch", "Exact")), ((FORBIDDEN, "resourceVersionMatch"),),
    ),
    _list(
        "resourceVersionMatch with continue", "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided",
        (("resourceVersion", "1"), ("resourceVersionMatch", "NotOlderThan"), ("continue", "abc")), ((FORBIDDEN, "resourceVersionMatch"),),
    ),
    _list("sendInitialEvents on a list", "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list", (("sendInitialEvents", "true"),), ((FORBIDDEN, "sendInitialEvents"),)),
    _list("sendInitialEvents=false on a list", "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list", (("sendInitialEvents", "false"),), ((FORBIDDEN, "sendInitialEvents"),)),
    _list(
        "a list, two errors", '[resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided, resourceVersionMatch: Unsupported value: "x": '
        'supported values: "Exact", "NotOlderThan", "", sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list]',
        (("resourceVersionMatch", "x"), ("sendInitialEvents", "1")), ((FORBIDDEN, "resourceVersionMatch"), (NOT_SUPPORTED, "resourceVersionMatch"), (FORBIDDEN, "sendInitialEvents")),
    ),
    _list(
        "a watch, sendInitialEvents without resourceVersionMatch", "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        (("watch", "1"), ("sendInitialEvents", "true")), ((FORBIDDEN, "resourceVersionMatch"),), "validation.validateWatchOptions",
    ),
    _list(
        "a watch, resourceVersionMatch without sendInitialEvents", "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        (("watch", "1"), ("resourceVersionMatch", "NotOlderThan")), ((FORBIDDEN, "resourceVersionMatch"),), "validation.validateWatchOptions",
    ),
    _list(
        "a watch, sendInitialEvents with Exact",
        '[resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan"]',
        (("watch", "true"), ("sendInitialEvents", "true"), ("resourceVersionMatch", "Exact")), ((FORBIDDEN, "resourceVersionMatch"), (NOT_SUPPORTED, "resourceVersionMatch")),
        "validation.validateWatchOptions",
    ),
    _list(
        "a watch, resourceVersionMatch with continue", "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided",
        (("watch", "true"), ("sendInitialEvents", "false"), ("resourceVersionMatch", "NotOlderThan"), ("continue", "abc")), ((FORBIDDEN, "resourceVersionMatch"),),
        "validation.validateWatchOptions",
    ),
    _list(
        "a watch with bookmarks, sendInitialEvents without resourceVersionMatch", "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        (("watch", "1"), ("allowWatchBookmarks", "true"), ("sendInitialEvents", "true")), ((FORBIDDEN, "resourceVersionMatch"),), "validation.validateWatchOptions",
    ),
    Refusal(
        "runtime.Convert_Slice_string_To_Pointer_int64", "a watch, timeoutSeconds that is no integer", "GET", "pods", 400, "BadRequest",
        'strconv.ParseInt: parsing "soon": invalid syntax', None, None, (("watch", "1"), ("timeoutSeconds", "soon")),
    ),
    Refusal(
        "runtime.Convert_Slice_string_To_int64", "a list, limit that is no integer", "GET", "pods", 400, "BadRequest",
        'strconv.ParseInt: parsing "ten": invalid syntax', None, None, (("limit", "ten"),),
    ),
    Refusal(
        "runtime.Convert_Slice_string_To_int64", "a list, limit quoted as Go quotes it", "GET", "pods", 400, "BadRequest",
        'strconv.ParseInt: parsing "1\\t\\"0\\"": invalid syntax', None, None, (("limit", '1\t"0"'),),
    ),
]

ROWS = WRITES + DELETES + LISTS


@pytest.mark.parametrize("row", ROWS, ids=ids(ROWS))
def test_refused(api: httpx.Client, ns: str, row: Refusal) -> None:
    check(api, ns, row)


@pytest.mark.parametrize("value", ["true", "maybe", "", "FALSE", "0"])
def test_any_allow_watch_bookmarks_is_read_not_refused(api: httpx.Client, ns: str, value: str) -> None:
    """upstream's Convert_Slice_string_To_bool: allowWatchBookmarks has no invalid value (only
    "0" and "false" in any case are false), on a list (where it is ignored) as on a watch."""
    seed(api, ns)
    listed = api.get(f"/api/v1/namespaces/{ns}/pods", params={"allowWatchBookmarks": value})
    assert listed.status_code == 200, listed.text
    with api.stream("GET", f"/api/v1/namespaces/{ns}/pods", params={"watch": "1", "allowWatchBookmarks": value, "timeoutSeconds": "1"}) as watched:
        assert watched.status_code == 200
        watched.read()


def test_matching_preconditions_delete(api: httpx.Client, ns: str) -> None:
    """The same preconditions that refuse another uid or resourceVersion let the matching ones through."""
    seed(api, ns)
    stored = state(api, ns)["serviceaccounts"][0]["metadata"]
    preconditions = {"uid": stored["uid"], "resourceVersion": stored["resourceVersion"]}
    deleted = send(api, ns, _delete("", "", 200, "", None, body={"preconditions": preconditions}))
    assert deleted.status_code == 200, deleted.text
    assert state(api, ns)["serviceaccounts"] == []


def test_a_negative_grace_period_is_one_second(api: httpx.Client, ns: str) -> None:
    """rest.BeforeDelete: a negative gracePeriodSeconds is no refusal; it is read as 1 (a pod on a node lingers for it)."""
    created = api.post(f"/api/v1/namespaces/{ns}/pods", json=pod("bound", node="node-1"))
    assert created.status_code == 201, created.text
    deleted = api.delete(f"/api/v1/namespaces/{ns}/pods/bound", params={"gracePeriodSeconds": "-5"})
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["metadata"]["deletionGracePeriodSeconds"] == 1
