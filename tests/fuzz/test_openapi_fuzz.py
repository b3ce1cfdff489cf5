"""The API contract: schemathesis against the server's own OpenAPI v3 documents.

For each served group-version (``/openapi/v3`` -> ``/openapi/v3/<gv>?hash=...``) this
generates requests for every operation (positive and negative data) and checks:

* no 5xx (``not_a_server_error``),
* the status code, content type, headers and body match the document
  (``status_code_conformance``, ``content_type_conformance``,
  ``response_headers_conformance``, ``response_schema_conformance``),
* every JSON body validates against the official v1.37 schema
  (``official_v137_schema``, which calls ``tests.contract.check_response_body``),
* every refusal (4xx) is a Status carrying its code and a reason (``refusal_is_a_status``).

Query options are also sent with values kube-apiserver refuses (``REFUSED_OPTION_VALUES``:
dryRun, fieldValidation, fieldManager, propagationPolicy, gracePeriodSeconds,
resourceVersionMatch, sendInitialEvents, allowWatchBookmarks, ...), so each run sends those
shapes and must get a 4xx, never a 5xx, for them.

A stateful run follows OpenAPI links added here (create -> get/put/patch/delete of the
created name, and of its ``/status``; a put sends the created object back). Creates get past
validation thanks to the documents' request examples (app/api/openapi.py), and the run asserts
that creates and the linked steps after them did succeed. Watch is excluded (``watch=true``
streams never end).

Size: the stateless runs (``test_operations*``) try ``DRA_FUZZ_EXAMPLES`` examples per operation
(default 10: api/v1 alone has over a hundred operations, and generating an example costs more
than the server's answer to it); the stateful runs (``test_stateful*``) ``DRA_FUZZ_STATEFUL_EXAMPLES``
scenarios of up to 6 steps (default 25, or ``DRA_FUZZ_EXAMPLES`` when that is set: they need enough
scenarios for creates and the linked steps after them to succeed). ``make fuzz`` sets both to 300
with a random seed; ``make test`` uses the defaults, derandomized.
Runs on the SQLite backend only, in a fresh namespace per group-version.
"""

from __future__ import annotations

import collections
import copy
import os
import uuid
from typing import Any

import httpx
import orjson
import pytest

from kube.features import Gate, gates_flag

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

from tests.contract import check_response_body  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(int(os.environ.get("DRA_FUZZ_TIMEOUT", "1800")))]

EXAMPLES = int(os.environ.get("DRA_FUZZ_EXAMPLES", "10"))
# api/v1 serves many kinds (ServiceAccount and its token request among them): each run of the state
# machine spreads its examples over every operation, so it needs at least as many as the stateless runs.
STATEFUL_EXAMPLES = int(os.environ.get("DRA_FUZZ_STATEFUL_EXAMPLES", os.environ.get("DRA_FUZZ_EXAMPLES", "25")))
GROUP_VERSIONS = ["api/v1", "apis/resource.k8s.io/v1", "apis/coordination.k8s.io/v1", "apis/events.k8s.io/v1"]
# Served only with --runtime-config (and ResourcePoolStatusRequest with its gate): a server of their own.
OLDER_GROUP_VERSIONS = ["apis/resource.k8s.io/v1beta2", "apis/resource.k8s.io/v1alpha3"]
# The query parameter that turns a list into a never-ending stream. allowWatchBookmarks and
# sendInitialEvents stay: without watch a list ignores the one and refuses the other (422).
STREAM_PARAMETERS = {"watch"}
# Values of options kube-apiserver refuses (option validation, the parameter codec), offered
# beside each parameter's documented schema so that every run sends them, not only the rare
# negative case that happens to hit them (tests/app/api/test_refuse_options.py has the cases).
REFUSED_OPTION_VALUES: dict[str, list[Any]] = {
    "dryRun": ["all", "", "None"],
    "fieldValidation": ["strict", "Loose"],
    "fieldManager": ["m" * 129, "a\tb"],
    "propagationPolicy": ["background", "", "Sideways"],
    "gracePeriodSeconds": ["soon", "1.5", ""],
    "orphanDependents": ["maybe"],
    "resourceVersionMatch": ["exact", "Newest", ""],
    "sendInitialEvents": ["true", "false"],
    "allowWatchBookmarks": ["maybe", ""],
    "limit": ["ten", ""],
    "timeoutSeconds": ["soon"],
}
CHECKS = [
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
]


@schemathesis.check
def refusal_is_a_status(ctx: Any, response: Any, case: Any) -> bool | None:
    """A refused request (4xx) is answered as kube-apiserver answers one: a Status of kind Status,
    status Failure, the HTTP code as its code, and a reason."""
    if not 400 <= response.status_code < 500:
        return None
    status = _status(response)
    if status.get("kind") != "Status" or status.get("status") != "Failure" or status.get("code") != response.status_code or not status.get("reason"):
        raise AssertionError(f"{case.method} {case.formatted_path} answered {response.status_code} without a Status saying so: {response.content[:300]!r}")
    return None


@schemathesis.check
def official_v137_schema(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every JSON object the server returns validates against the official v1.37 schema."""
    content_type = response.headers.get("content-type") or response.headers.get("Content-Type") or [""]
    check_response_body(response.content, content_type[0] if isinstance(content_type, list) else content_type, f"{case.method} {case.formatted_path}")
    return None


# ---- known bugs -----------------------------------------------------------------------
# Each entry: (predicate over (case, response), reason). Matching cases are not judged by the
# fuzz run. Bugs the fuzzer found and that are fixed keep a regression test below.


def _status(response: Any) -> dict[str, Any]:
    try:
        body = orjson.loads(response.content or b"{}")
    except orjson.JSONDecodeError:
        return {}
    return body if isinstance(body, dict) else {}


def _too_large_resource_version(case: Any, response: Any) -> bool:
    return response.status_code == 504 and "Too large resource version" in str(_status(response).get("message", ""))


KNOWN_BUGS: list[tuple[Any, str]] = [
    # Not a bug: upstream answers a list at a resourceVersion far in the future with 504 Timeout
    # "Too large resource version" (ResourceVersionTooLarge) after waiting; this server does the same.
    (_too_large_resource_version, "upstream behaviour: 504 for resourceVersion > current"),
]


def _known_bug(case: Any, response: Any) -> str | None:
    for predicate, reason in KNOWN_BUGS:
        if predicate(case, response):
            return reason
    return None


# ---- the documents ----------------------------------------------------------------------


def _fetch_document(base_url: str, gv: str) -> dict[str, Any]:
    with httpx.Client(base_url=base_url, timeout=30.0) as client:
        index = client.get("/openapi/v3")
        index.raise_for_status()
        url = index.json()["paths"][gv]["serverRelativeURL"]
        doc = client.get(url)
        doc.raise_for_status()
        return doc.json()  # type: ignore[no-any-return]


def _prepare(doc: dict[str, Any], namespace: str, favour_examples: bool = False) -> dict[str, Any]:
    """Drop watch, write the run's namespace into the paths, add create -> item links.

    The namespace goes into the path itself rather than into a parameter: schemathesis takes a
    ``{namespace}`` parameter for a reference to a Namespace object, so it would never start a
    stateful scenario with a namespaced create.

    ``favour_examples`` (the stateful run) makes each create body "the kind's schema, or its
    example": schemathesis then sends the example about half the time instead of a fifth, so
    most scenarios get past their create whatever the seed. Otherwise (the stateless run) the
    options also allow the values upstream refuses (``REFUSED_OPTION_VALUES``).
    """
    doc = copy.deepcopy(doc)
    # The stateful run needs its creates to succeed: refused option values are for the stateless one.
    widen = (lambda parameter: parameter) if favour_examples else _with_refused_values
    paths: dict[str, Any] = {}
    for path, item in doc["paths"].items():
        if "/watch/" not in path:
            paths[path.replace("{namespace}", namespace)] = item
    doc["paths"] = paths
    for item in paths.values():
        for key, op in list(item.items()):
            if key == "parameters":
                item[key] = [widen(p) for p in op if _kept(p)]
            elif isinstance(op, dict) and "parameters" in op:
                # A dry-run create stores nothing, so the stateful run's links would have no object to follow.
                dry = favour_examples and key == "post"
                op["parameters"] = [widen(p) for p in op["parameters"] if _kept(p) and not (dry and p.get("name") == "dryRun")]
    for path, item in paths.items():
        create = item.get("post")
        if not create or "{name}" in path:
            continue
        for media in create.get("requestBody", {}).get("content", {}).values():
            example = media.get("example")
            if isinstance(example, dict) and example.get("kind") == "Event":
                # An Event must name its involved object's namespace; the document's is "default".
                example["regarding" if "regarding" in example else "involvedObject"]["namespace"] = namespace  # events.k8s.io or core
            if example is not None and favour_examples:
                media["schema"] = {"anyOf": [media["schema"], {"enum": [example]}]}
        links: dict[str, Any] = {}
        for target_path in (f"{path}/{{name}}", f"{path}/{{name}}/status"):
            target = paths.get(target_path)
            if not target:
                continue
            for method, op in target.items():
                if method == "parameters" or not isinstance(op, dict) or "operationId" not in op:
                    continue
                link: dict[str, Any] = {"operationId": op["operationId"], "parameters": {"name": "$response.body#/metadata/name"}}
                if method == "put":
                    # Replace the object (or its status) with itself as created: a valid update.
                    link["requestBody"] = "$response.body"
                links[op["operationId"]] = link
        for status in ("200", "201", "202"):
            if status in create["responses"] and links:
                create["responses"][status]["links"] = links
    return doc


def _kept(parameter: dict[str, Any]) -> bool:
    if parameter.get("in") == "path" and parameter.get("name") == "namespace":
        return False
    return parameter.get("name") not in STREAM_PARAMETERS


def _with_refused_values(parameter: dict[str, Any]) -> dict[str, Any]:
    """A query parameter whose schema also allows the values upstream refuses for it."""
    refused = REFUSED_OPTION_VALUES.get(parameter.get("name", "")) if parameter.get("in") == "query" else None
    if refused and "schema" in parameter:
        parameter = {**parameter, "schema": {"anyOf": [parameter["schema"], {"enum": refused}]}}
    return parameter


def _config(base_url: str) -> Any:
    checks: dict[str, Any] = {"enabled": False}
    for name in CHECKS:
        checks[name] = {"enabled": True}
    return schemathesis.Config.from_dict(
        {
            "base-url": base_url,
            "checks": checks,
            "request-timeout": 30,
            "generation": {"max-examples": EXAMPLES},
        }
    )


@pytest.fixture(scope="module")
def fuzz_server(server: Any, backend: str) -> Any:
    if backend != "sqlite":
        pytest.skip("the fuzz run uses the SQLite backend only (time)")
    return server


@pytest.fixture(scope="module")
def older_versions_server(start_server: Any, backend: str) -> Any:
    if backend != "sqlite":
        pytest.skip("the fuzz run uses the SQLite backend only (time)")
    return start_server("--runtime-config", "api/all=true", "--feature-gates", gates_flag({Gate.DRAResourcePoolStatus: True}))


def _namespace(base_url: str) -> str:
    name = f"fuzz-{uuid.uuid4().hex[:8]}"
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    response = httpx.post(f"{base_url}/api/v1/namespaces", json=body, timeout=30.0)
    assert response.status_code == 201, response.text
    return name


def _schema(base_url: str, gv: str, favour_examples: bool = False) -> Any:
    doc = _prepare(_fetch_document(base_url, gv), _namespace(base_url), favour_examples)
    return schemathesis.openapi.from_dict(doc, config=_config(base_url))


def _validate(case: Any, response: Any) -> None:
    if _known_bug(case, response):
        return
    checks = [c for c in _all_checks() if c.__name__ in CHECKS] + [official_v137_schema, refusal_is_a_status]
    case.validate_response(response, checks=checks)


def _all_checks() -> list[Any]:
    from schemathesis.checks import CHECKS as registry
    from schemathesis.checks import load_all_checks

    load_all_checks()
    return list(registry.get_all())


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=os.environ.get("DRA_FUZZ_SEED") is None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate, Phase.shrink] if os.environ.get("DRA_FUZZ_SHRINK") else [Phase.explicit, Phase.generate],
)


@pytest.mark.parametrize("gv", GROUP_VERSIONS)
def test_operations(fuzz_server: Any, gv: str) -> None:
    """Every operation: generated requests (valid and invalid) get conforming answers."""
    _fuzz_operations(fuzz_server.url, gv)


@pytest.mark.parametrize("gv", OLDER_GROUP_VERSIONS)
def test_operations_in_older_versions(older_versions_server: Any, gv: str) -> None:
    _fuzz_operations(older_versions_server.url, gv)


def _fuzz_operations(base_url: str, gv: str) -> None:
    schema = _schema(base_url, gv)
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @SETTINGS
        @given(case=operation.as_strategy())
        def run(case: Any) -> None:
            response = case.call()
            _validate(case, response)

        try:
            run()
        except BaseException as exc:  # FailureGroup is a BaseExceptionGroup; collect every failing operation
            failures.append(f"{operation.label}: {exc}")
    assert operations, f"no operations in {gv}"
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("gv", GROUP_VERSIONS)
def test_stateful(fuzz_server: Any, gv: str) -> None:
    """Links: create an object, then get, replace, patch and delete it by the returned name.

    Generated bodies are rarely valid objects; the documents' request examples (app/api/openapi.py),
    favoured here, are what makes creates succeed, so that the links have an object to follow. The
    run must show that: some creates answered 2xx and some linked steps after them too.
    """
    _fuzz_stateful(fuzz_server.url, gv)


@pytest.mark.parametrize("gv", OLDER_GROUP_VERSIONS)
def test_stateful_in_older_versions(older_versions_server: Any, gv: str) -> None:
    _fuzz_stateful(older_versions_server.url, gv)


def _fuzz_stateful(base_url: str, gv: str) -> None:
    schema = _schema(base_url, gv, favour_examples=True)
    machine = schema.as_state_machine()
    steps: collections.Counter[tuple[str, str, str, int]] = collections.Counter()

    class Machine(machine):  # type: ignore[misc,valid-type]
        def step(self, input: Any) -> Any:
            self._linked = input.transition is not None
            return super().step(input)

        def after_call(self, response: Any, case: Any) -> None:
            super().after_call(response, case)
            steps[("link" if self._linked else "root", case.method, case.operation.path, response.status_code)] += 1

        def validate_response(self, response: Any, case: Any, additional_checks: Any = None, **kwargs: Any) -> None:
            if _known_bug(case, response):
                return
            super().validate_response(response, case, additional_checks=[*(additional_checks or []), official_v137_schema, refusal_is_a_status], **kwargs)

    Machine.run(
        settings=settings(
            max_examples=STATEFUL_EXAMPLES,
            stateful_step_count=6,
            deadline=None,
            database=None,
            derandomize=os.environ.get("DRA_FUZZ_SEED") is None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.generate],
        )
    )
    summary = "\n".join(f"  {n:4d} {kind} {method} {path} -> {code}" for (kind, method, path, code), n in sorted(steps.items()))
    print(f"stateful steps ({gv}):\n{summary}")
    created = sum(n for (kind, method, _, code), n in steps.items() if kind == "root" and method == "POST" and 200 <= code < 300)
    chained = sum(n for (kind, _, _, code), n in steps.items() if kind == "link" and 200 <= code < 300)
    assert created, f"no create succeeded, so no link was followed:\n{summary}"
    assert chained, f"no linked step (get/replace/patch/delete of a created object) succeeded:\n{summary}"


# ---- regressions: bugs the fuzzer found (all fixed) ----
# Later ones, found once creates succeeded, are in tests/app/api/test_openapi_fuzz_regressions.py.


def test_bug_pod_null_spec(fuzz_server: Any) -> None:
    ns = _namespace(fuzz_server.url)
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": None}
    response = httpx.post(f"{fuzz_server.url}/api/v1/namespaces/{ns}/pods", json=body, timeout=30.0)
    assert response.status_code < 500, response.text


def test_bug_namespace_null_finalizers(fuzz_server: Any) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"fz-{uuid.uuid4().hex[:8]}"}, "spec": {"finalizers": None}}
    response = httpx.post(f"{fuzz_server.url}/api/v1/namespaces", json=body, timeout=30.0)
    assert response.status_code < 500, response.text


def test_bug_warning_header_non_latin1_field(fuzz_server: Any) -> None:
    ns = _namespace(fuzz_server.url)
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "\U0002c312": 1}
    response = httpx.post(f"{fuzz_server.url}/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", json=body, timeout=30.0)
    assert response.status_code < 500, response.text


def test_bug_apply_unknown_field(fuzz_server: Any) -> None:
    response = httpx.patch(
        f"{fuzz_server.url}/apis/resource.k8s.io/v1/deviceclasses/fz-apply?fieldManager=fz&dryRun=All",
        content=b"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: fz-apply\nbogus: 1\n",
        headers={"Content-Type": "application/apply-patch+yaml"},
        timeout=30.0,
    )
    assert response.status_code < 500, response.text


def test_bug_warning_header_control_characters(fuzz_server: Any) -> None:
    """An unknown field whose name holds a newline once made uvicorn drop the connection."""
    ns = _namespace(fuzz_server.url)
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "ctl"}, "a\nb\x00": 1}
    response = httpx.post(f"{fuzz_server.url}/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", json=body, timeout=30.0)
    assert response.status_code == 201, response.text
    assert "unknown field" in response.headers["warning"]
