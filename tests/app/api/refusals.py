"""Table-driven refusals: each row is a request kube-apiserver refuses, the upstream function
whose behaviour it pins, and upstream's answer. ``check`` sends a row to a real server (the
``api`` fixture: SQLite and Postgres) in a namespace seeded with a ServiceAccount and a Pod, and
asserts the code, the reason, the message where upstream's is deterministic, and that neither
kind was stored or changed."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from tests.helpers import assert_status, pod

# What the seeded namespace holds: a ServiceAccount with a label and two secrets (a list merged
# by name), a Pod with one container (merged by name) and a finalizer.
SEEDED_ACCOUNT = "existing"
SEEDED_POD = "web"
ACCOUNT = f"serviceaccounts/{SEEDED_ACCOUNT}"
POD = f"pods/{SEEDED_POD}"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
GENERIC_INVALID = "the server rejected our request due to an error in our request"


def account(name: str = SEEDED_ACCOUNT, **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, **metadata}}


def seed(api: httpx.Client, ns: str) -> None:
    """The objects every row runs against."""
    seeded = account(labels={"app": "seeded"})
    seeded["secrets"] = [{"name": "a"}, {"name": "b"}]
    response = api.post(f"/api/v1/namespaces/{ns}/serviceaccounts", json=seeded)
    assert response.status_code == 201, response.text
    web = pod(SEEDED_POD)
    web["metadata"]["finalizers"] = ["example.com/keep"]
    response = api.post(f"/api/v1/namespaces/{ns}/pods", json=web)
    assert response.status_code == 201, response.text


def state(api: httpx.Client, ns: str) -> dict[str, list[dict[str, Any]]]:
    """Everything a refused request must leave as it was."""
    found = {}
    for plural in ("serviceaccounts", "pods"):
        listed = api.get(f"/api/v1/namespaces/{ns}/{plural}")
        assert listed.status_code == 200, listed.text
        found[plural] = listed.json()["items"]
    return found


@dataclass(frozen=True)
class Refusal:
    """One request upstream refuses and its answer. ``path`` is below the namespace (``ACCOUNT``,
    ``pods/web/binding``...); ``body`` is sent as it is when bytes, else as JSON; ``params`` are
    pairs (a parameter may repeat). ``message`` is the whole message, ``pattern`` a regular
    expression it must match where upstream's has random parts."""

    upstream: str
    case: str
    method: str
    path: str
    code: int
    reason: str
    message: str | None = None
    body: Any = None
    content_type: str | None = "application/json"
    params: tuple[tuple[str, str], ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    pattern: str | None = None
    causes: tuple[tuple[str, str], ...] = field(default=())

    @property
    def id(self) -> str:
        return f"{self.upstream}: {self.case}"


def ids(rows: list[Refusal]) -> list[str]:
    return [row.id for row in rows]


def send(api: httpx.Client, ns: str, row: Refusal) -> httpx.Response:
    content = row.body if isinstance(row.body, bytes) or row.body is None else orjson.dumps(row.body)
    headers = dict(row.headers)
    if row.content_type is not None:
        headers["content-type"] = row.content_type
    return api.request(row.method, f"/api/v1/namespaces/{ns}/{row.path}", content=content, params=list(row.params), headers=headers)


def check(api: httpx.Client, ns: str, row: Refusal) -> dict[str, Any]:
    """Seed, send the row, assert upstream's answer and that nothing was stored or changed."""
    seed(api, ns)
    before = state(api, ns)
    status = assert_status(send(api, ns, row), row.code, row.reason)
    if row.message is not None:
        assert status["message"] == row.message, status["message"]
    if row.pattern is not None:
        assert re.fullmatch(row.pattern, status["message"], re.DOTALL), status["message"]
    if row.causes:
        assert [(c.get("reason"), c.get("field")) for c in status["details"]["causes"]] == list(row.causes)
    assert state(api, ns) == before, "a refused request must not store or change anything"
    return status
