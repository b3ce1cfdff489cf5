"""This server's protobuf against upstream's own serializers (interop/protocheck, built on
k8s.io/apimachinery and k8s.io/api v0.37.2), both ways, for every kind it serves:

- the checked-in schema is what the Go types say;
- every stored object of a running stack (the examples applied: allocated claims, published
  slices, running pods, nodes, events, leases, RBAC, ...) read in protobuf is byte for byte what
  Go writes for the same object read in JSON, and Go reads it back as that object;
- lists and watch streams in protobuf are read by client-go's decoders;
- objects Go encodes are created through protobuf bodies, and Go reads the answers back with
  every field it sent.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from app import protobuf
from app.registry import ALL_KINDS
from devtools.server import REPO_ROOT
from kube.objects import Obj
from tests.interop.golang import go_program, needs_go
from tests.processes import eventually
from tests.stack import Stack, running_stack

pytestmark = needs_go

PROTOBUF = "application/vnd.kubernetes.protobuf"


class GoCodec:
    """``protocheck serve``: upstream's serializers, one request per line."""

    def __init__(self, binary: Path) -> None:
        self.process = subprocess.Popen([str(binary), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def _call(self, line: bytes) -> Obj:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()
        answer: Obj = json.loads(self.process.stdout.readline())
        assert "error" not in answer, f"{line[:40]!r}: {answer['error']}"
        return answer

    def _op(self, op: str, data: bytes) -> Obj:
        return self._call(orjson.dumps({"op": op, "data": base64.b64encode(data).decode()}))

    def encode(self, obj: Obj | bytes) -> bytes:
        """Upstream's protobuf of a JSON object; given as the bytes a server answered, Go keeps
        raw JSON (managedFields' fieldsV1, opaque parameters) exactly as it was written."""
        raw = obj if isinstance(obj, bytes) else orjson.dumps(obj)
        return base64.b64decode(self._call(b'{"op":"encode","object":' + raw + b"}")["data"])

    def decode(self, data: bytes) -> Obj:
        return _without_nulls(self._op("decode", data)["object"])

    def watch(self, data: bytes) -> list[Obj]:
        return [_without_nulls(e) for e in self._op("watch", data)["events"]]

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


def _without_nulls(value: Any) -> Any:
    """Go's JSON with its nulls left out: null and absent are one unset field to upstream."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


@pytest.fixture(scope="module")
def go() -> Iterator[GoCodec]:
    codec = GoCodec(go_program("protocheck"))
    yield codec
    codec.close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("protobuf-go"), nodes=2) as running:
        with running.admin() as admin:
            for path in sorted((REPO_ROOT / "examples").glob("*.yaml")):
                for doc in yaml.safe_load_all(path.read_text()):
                    if doc:
                        _apply(admin, doc)

            def some_pod_runs() -> bool:
                pods = admin.get("/api/v1/pods").json()["items"]
                return any(p.get("status", {}).get("phase") == "Running" for p in pods)

            eventually(some_pod_runs, "a pod of the examples runs", timeout=60)
        yield running


def _apply(admin: httpx.Client, doc: Obj) -> None:
    kind = next(k for k in ALL_KINDS if k.kind == doc["kind"] and k.api_version == doc["apiVersion"])
    namespace = doc["metadata"].get("namespace", "default") if kind.namespaced else None
    path = f"/{'api' if not kind.group else 'apis/' + kind.group}/{kind.version}"
    path += f"/namespaces/{namespace}/{kind.plural}" if namespace else f"/{kind.plural}"
    response = admin.post(path, json=doc)
    assert response.status_code in (201, 409), response.text


def _collections(admin: httpx.Client) -> list[tuple[str, str, str]]:
    """(path, apiVersion, kind) of every listable resource the server serves, from discovery."""
    out = []
    group_versions = [("/api/v1", "v1")] + [(f"/apis/{gv['groupVersion']}", gv["groupVersion"]) for g in admin.get("/apis").json()["groups"] for gv in g["versions"]]
    for path, api_version in group_versions:
        for resource in admin.get(path).json()["resources"]:
            if "/" not in resource["name"] and "list" in resource["verbs"]:
                out.append((f"{path}/{resource['name']}", api_version, resource["kind"]))
    return out


def _read_both(admin: httpx.Client, path: str) -> tuple[httpx.Response, bytes] | None:
    """One version of an object in protobuf and in JSON (read again while it changes: events
    count up, leases renew); None once it is gone."""
    for _ in range(20):
        before = admin.get(path)
        answer = admin.get(path, headers={"accept": PROTOBUF})
        after = admin.get(path)
        if 404 in (before.status_code, answer.status_code, after.status_code):
            return None
        assert answer.headers["content-type"] == PROTOBUF
        if before.json()["metadata"]["resourceVersion"] == after.json()["metadata"]["resourceVersion"]:
            return answer, after.content
    raise AssertionError(f"{path} kept changing")


def test_the_checked_in_schema_is_what_the_go_types_say() -> None:
    written = subprocess.run([str(go_program("protocheck")), "schema"], capture_output=True, check=True).stdout
    assert orjson.loads(written) == orjson.loads(protobuf.SCHEMA_PATH.read_bytes()), "regenerate: interop/protocheck schema > app/protobuf_schema.json"


def test_every_stored_object_is_byte_for_byte_what_go_writes(stack: Stack, go: GoCodec) -> None:
    seen: dict[str, int] = {}
    with stack.admin() as admin:
        for path, api_version, kind in _collections(admin):
            for item in admin.get(path).json()["items"]:
                item = {"apiVersion": api_version, "kind": kind, **item}
                meta = item["metadata"]
                item_path = path if "namespace" not in meta else path.replace(path.rsplit("/", 1)[-1], f"namespaces/{meta['namespace']}/{path.rsplit('/', 1)[-1]}")
                read = _read_both(admin, f"{item_path}/{meta['name']}")
                if read is None:
                    continue  # gone since the list (a finished pod's event, a rotated lease)
                answer, as_json = read
                assert answer.content == go.encode(as_json), f"{kind} {meta['name']}"
                assert go.decode(answer.content) == go.decode(go.encode(as_json))
                seen[kind] = seen.get(kind, 0) + 1
    # The examples give the kinds DRA is about: each was compared, and more than once.
    for kind in ("ResourceClaim", "ResourceSlice", "DeviceClass", "Pod", "Node", "Namespace", "Lease", "Event", "ClusterRole", "ClusterRoleBinding"):
        assert seen.get(kind, 0) >= 1, (kind, seen)


def test_lists_and_watches_read_by_client_gos_decoders(stack: Stack, go: GoCodec) -> None:
    with stack.admin() as admin:
        for path, _api_version, kind in _collections(admin):
            as_json = admin.get(path).json()
            listed = go.decode(admin.get(path, headers={"accept": f"{PROTOBUF}, */*"}).content)
            assert listed["kind"] == f"{kind}List"
            assert sorted(i["metadata"]["name"] for i in listed.get("items", [])) == sorted(i["metadata"]["name"] for i in as_json["items"])
            params = {"watch": "true", "resourceVersion": as_json["metadata"]["resourceVersion"], "timeoutSeconds": "1", "allowWatchBookmarks": "true"}
            with admin.stream("GET", path, params={**params, "resourceVersion": "0"}, headers={"accept": PROTOBUF}) as response:
                assert response.headers["content-type"] == f"{PROTOBUF};stream=watch"
                events = go.watch(response.read())
            added = sorted(e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED")
            assert set(added) >= {i["metadata"]["name"] for i in as_json["items"]} - {None}, path


def test_objects_go_encodes_are_created_through_protobuf(stack: Stack, go: GoCodec) -> None:
    from app.api.openapi import create_example

    with stack.admin() as admin:
        for strategy in ALL_KINDS:
            example = create_example(strategy)
            if example is None or strategy.converts:
                continue
            # Examples name the default namespace where they refer to one (an event's object).
            example["metadata"] = {"name": f"pb-{strategy.kind.lower()}"}
            base = f"/{'api' if not strategy.group else 'apis/' + strategy.group}/{strategy.version}"
            path = f"{base}/namespaces/default/{strategy.plural}" if strategy.namespaced else f"{base}/{strategy.plural}"
            sent = go.encode(example)
            answer = admin.post(path, content=sent, headers={"content-type": PROTOBUF, "accept": f"{PROTOBUF}, */*"})
            if answer.status_code == 404 and strategy.feature_gate:
                continue  # a kind behind a gate this stack keeps off
            assert answer.status_code in (200, 201), f"{strategy.kind}: {answer.status_code} {answer.content[:300]!r}"
            assert answer.headers["content-type"] == PROTOBUF
            got = go.decode(answer.content)
            assert got["kind"] == strategy.kind, got
            if strategy.stored:
                # stringData is write-only: the server keeps it as data, as upstream does.
                assert _includes(got, go.decode(sent), ("metadata", "stringData")), strategy.kind
            else:
                assert "status" in got, strategy.kind  # a review answers with its verdict


def _includes(answer: Any, sent: Any, skip: tuple[str, ...] = ()) -> bool:
    """Every field ``sent`` set is in ``answer`` with its value (the server adds its own)."""
    if isinstance(sent, dict):
        return isinstance(answer, dict) and all(k in skip or _includes(answer.get(k), v) for k, v in sent.items() if v not in ({}, [], "", 0, False))
    if isinstance(sent, list):
        return isinstance(answer, list) and len(answer) == len(sent) and all(_includes(a, s) for a, s in zip(answer, sent, strict=True))
    return bool(answer == sent)
