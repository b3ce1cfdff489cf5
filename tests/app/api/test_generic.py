"""The generic store driven in-process, on the server's own storage (both backends): the REST
semantics every kind shares, and the writes of the subresources kinds declare."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from app.api.generic import GenericStore, WriteResult
from app.api.options import DeleteOptions, ListOptions, WriteOptions
from app.registry import NAMESPACE_KIND
from app.registry.coordination import lease
from app.registry.core import namespace as namespace_kind
from app.registry.core import pod as pod_kind
from app.registry.resource import resourceclaim
from app.storage.cache import StoredObject
from kube.errors import ApiError
from tests.app.api.conftest import WRITER, new_namespace
from tests.helpers import claim, pod

CLAIMS = resourceclaim.STRATEGY
CLAIM_STATUS = resourceclaim.STATUS_STRATEGY
PODS = pod_kind.STRATEGY
BINDING = pod_kind.BINDING
LEASES = lease.STRATEGY
ALLOCATION = {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}]}}
MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"


async def _refused(call: Any, code: int, reason: str) -> ApiError:
    with pytest.raises(ApiError) as caught:
        await call
    assert (caught.value.code, caught.value.reason) == (code, reason), caught.value.message
    return caught.value


def _written(result: WriteResult) -> dict[str, Any]:
    """The object a write answered with, as the client receives it."""
    return orjson.loads(result.raw)  # type: ignore[no-any-return]


def _name(item: StoredObject | dict[str, Any]) -> str:
    obj = item.obj if isinstance(item, StoredObject) else item
    return str(obj["metadata"]["name"])


def _binding(pod_name: str, node: str = "node-7", **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod_name, **metadata}, "target": {"kind": "Node", "name": node}}


# ---- create, get ----------------------------------------------------------------------------


async def test_create_sets_server_metadata_and_resets_status(store: GenericStore, store_ns: str) -> None:
    result = await store.create(CLAIMS, store_ns, {**claim("c1"), "status": {"allocation": ALLOCATION}}, WRITER)
    assert result.created
    obj = _written(result)
    meta = obj["metadata"]
    assert (meta["name"], meta["namespace"], meta["generation"]) == ("c1", store_ns, 1)
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z") and meta["resourceVersion"].isdigit()
    assert obj["status"] == {}  # reset to the empty struct upstream's ResourceClaim serialises
    assert [entry["manager"] for entry in meta["managedFields"]] == ["test"]
    stored = await store.get(CLAIMS, store_ns, "c1")
    assert stored.obj["metadata"]["uid"] == meta["uid"]


async def test_create_names_from_generate_name(store: GenericStore, store_ns: str) -> None:
    result = await store.create(CLAIMS, store_ns, claim(generate_name="gen-"), WRITER)
    name = _written(result)["metadata"]["name"]
    assert name.startswith("gen-") and len(name) == len("gen-") + 5


async def test_create_refuses_a_taken_name(store: GenericStore, store_ns: str) -> None:
    await store.create(CLAIMS, store_ns, claim("dup"), WRITER)
    error = await _refused(store.create(CLAIMS, store_ns, claim("dup"), WRITER), 409, "AlreadyExists")
    assert error.message == 'resourceclaims.resource.k8s.io "dup" already exists'


async def test_create_needs_a_live_namespace(store: GenericStore) -> None:
    error = await _refused(store.create(CLAIMS, "no-such-namespace", claim("x"), WRITER), 404, "NotFound")
    assert error.message == 'namespaces "no-such-namespace" not found'
    held = await new_namespace(store, finalizers=["example.com/hold"])
    await store.delete(NAMESPACE_KIND, "", held, DeleteOptions())
    error = await _refused(store.create(CLAIMS, held, claim("x"), WRITER), 403, "Forbidden")
    assert error.message == f"resourceclaims is forbidden: unable to create new content in namespace {held} because it is being terminated"


async def test_dry_run_create_stores_nothing(store: GenericStore, store_ns: str) -> None:
    result = await store.create(CLAIMS, store_ns, claim("dry"), WriteOptions(field_manager="test", dry_run=True))
    assert result.created
    await _refused(store.get(CLAIMS, store_ns, "dry"), 404, "NotFound")


async def test_get_of_a_missing_object_is_404(store: GenericStore, store_ns: str) -> None:
    error = await _refused(store.get(CLAIMS, store_ns, "nope"), 404, "NotFound")
    assert error.message == 'resourceclaims.resource.k8s.io "nope" not found'
    assert error.details == {"name": "nope", "group": "resource.k8s.io", "kind": "resourceclaims"}


# ---- update, patch ------------------------------------------------------------------------------


async def test_update_with_a_stale_resource_version_conflicts(store: GenericStore, store_ns: str) -> None:
    first = _written(await store.create(CLAIMS, store_ns, claim("c"), WRITER))
    first["metadata"]["labels"] = {"step": "1"}
    updated = _written(await store.update(CLAIMS, store_ns, "c", first, WRITER))
    assert updated["metadata"]["labels"] == {"step": "1"}
    assert int(updated["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    error = await _refused(store.update(CLAIMS, store_ns, "c", {**first, "metadata": {**first["metadata"], "labels": {"step": "2"}}}, WRITER), 409, "Conflict")
    assert error.message == f'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "c": {MODIFIED}'
    assert (await store.get(CLAIMS, store_ns, "c")).obj["metadata"]["labels"] == {"step": "1"}


async def test_main_update_keeps_the_stored_status(store: GenericStore, store_ns: str) -> None:
    await store.create(CLAIMS, store_ns, claim("c"), WRITER)
    await store.update(CLAIM_STATUS, store_ns, "c", {**claim("c"), "status": {"allocation": ALLOCATION}}, WRITER)
    result = await store.update(CLAIMS, store_ns, "c", {**claim("c"), "status": {}}, WRITER)
    assert _written(result)["status"]["allocation"] == ALLOCATION
    assert (await store.get(CLAIMS, store_ns, "c")).obj["status"]["allocation"] == ALLOCATION


async def test_update_of_a_missing_object(store: GenericStore, store_ns: str) -> None:
    error = await _refused(store.update(CLAIMS, store_ns, "ghost", claim("ghost"), WRITER), 404, "NotFound")
    assert error.message == 'resourceclaims.resource.k8s.io "ghost" not found'
    # A kind that allows create-on-update creates it instead.
    lease = {"metadata": {"name": "l1"}, "spec": {"holderIdentity": "me"}}
    result = await store.update(LEASES, store_ns, "l1", lease, WRITER)
    assert result.created
    assert (await store.get(LEASES, store_ns, "l1")).obj["spec"]["holderIdentity"] == "me"


async def test_merge_patch_and_apply(store: GenericStore, store_ns: str) -> None:
    await store.create(CLAIMS, store_ns, claim("p"), WRITER)
    result = await store.patch(CLAIMS, store_ns, "p", {"metadata": {"labels": {"a": "b"}}}, "merge", WRITER)
    assert not result.created
    assert (await store.get(CLAIMS, store_ns, "p")).obj["metadata"]["labels"] == {"a": "b"}
    await _refused(store.patch(CLAIMS, store_ns, "ghost", {"metadata": {"labels": {"a": "b"}}}, "merge", WRITER), 404, "NotFound")
    applied = await store.patch(CLAIMS, store_ns, "applied", claim("applied"), "apply", WriteOptions(field_manager="applier"))
    assert applied.created
    managers = [(e["manager"], e["operation"]) for e in (await store.get(CLAIMS, store_ns, "applied")).obj["metadata"]["managedFields"]]
    assert managers == [("applier", "Apply")]


# ---- status ---------------------------------------------------------------------------------------


async def test_status_update_changes_only_status(store: GenericStore, store_ns: str) -> None:
    created = _written(await store.create(CLAIMS, store_ns, claim("s", labels={"keep": "me"}), WRITER))
    body = {**claim("s", labels={"changed": "through-status"}), "spec": {"devices": {"requests": []}}, "status": {"allocation": ALLOCATION}}
    await store.update(CLAIM_STATUS, store_ns, "s", body, WRITER)
    stored = (await store.get(CLAIMS, store_ns, "s")).obj
    assert stored["status"]["allocation"] == ALLOCATION
    assert stored["spec"] == created["spec"], "a status write must not change spec"
    assert stored["metadata"]["labels"] == {"keep": "me"}, "a claim's status write discards metadata changes"
    assert stored["metadata"]["generation"] == 1
    entry = next(e for e in stored["metadata"]["managedFields"] if e.get("subresource") == "status")
    assert entry["manager"] == "test"


async def test_status_patch_and_its_validation(store: GenericStore, store_ns: str) -> None:
    await store.create(CLAIMS, store_ns, claim("sp"), WRITER)
    await store.patch(CLAIM_STATUS, store_ns, "sp", {"status": {"allocation": ALLOCATION}}, "merge", WRITER)
    assert (await store.get(CLAIMS, store_ns, "sp")).obj["status"]["allocation"] == ALLOCATION
    # The status strategy's own validation applies: a reservation needs an allocation.
    await store.create(CLAIMS, store_ns, claim("bad"), WRITER)
    reserved = {"status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}}
    error = await _refused(store.patch(CLAIM_STATUS, store_ns, "bad", reserved, "merge", WRITER), 422, "Invalid")
    assert error.message.startswith('ResourceClaim.resource.k8s.io "bad" is invalid')
    # A status write never creates.
    await _refused(store.patch(CLAIM_STATUS, store_ns, "ghost", {"status": {}}, "apply", WRITER), 404, "NotFound")


# ---- delete, deletecollection ------------------------------------------------------------------


async def test_delete_now_and_held_by_finalizers(store: GenericStore, store_ns: str) -> None:
    await store.create(CLAIMS, store_ns, claim("gone"), WRITER)
    outcome = await store.delete(CLAIMS, store_ns, "gone", DeleteOptions())
    assert outcome.deleted_now
    await _refused(store.get(CLAIMS, store_ns, "gone"), 404, "NotFound")
    await _refused(store.delete(CLAIMS, store_ns, "gone", DeleteOptions()), 404, "NotFound")

    held = claim("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    await store.create(CLAIMS, store_ns, held, WRITER)
    outcome = await store.delete(CLAIMS, store_ns, "held", DeleteOptions())
    assert not outcome.deleted_now
    assert (await store.get(CLAIMS, store_ns, "held")).obj["metadata"]["deletionTimestamp"]
    await store.patch(CLAIMS, store_ns, "held", {"metadata": {"finalizers": None}}, "merge", WRITER)
    await _refused(store.get(CLAIMS, store_ns, "held"), 404, "NotFound")


async def test_delete_preconditions(store: GenericStore, store_ns: str) -> None:
    uid = _written(await store.create(CLAIMS, store_ns, claim("pre"), WRITER))["metadata"]["uid"]
    error = await _refused(store.delete(CLAIMS, store_ns, "pre", DeleteOptions(preconditions_uid="other")), 409, "Conflict")
    assert error.message == (
        f'Operation cannot be fulfilled on ResourceClaim.resource.k8s.io "pre": the UID in the precondition (other) does not match the UID in record ({uid}). '
        "The object might have been deleted and then recreated"
    )
    assert error.details == {"name": "pre", "group": "resource.k8s.io", "kind": "ResourceClaim"}
    error = await _refused(store.delete(CLAIMS, store_ns, "pre", DeleteOptions(preconditions_rv="1")), 409, "Conflict")
    assert "the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (" in error.message
    assert (await store.delete(CLAIMS, store_ns, "pre", DeleteOptions(preconditions_uid=uid))).deleted_now


async def test_delete_collection_by_label(store: GenericStore, store_ns: str) -> None:
    for name, team in (("a", "red"), ("b", "red"), ("c", "blue")):
        await store.create(CLAIMS, store_ns, claim(name, labels={"team": team}), WRITER)
    deleted, _meta = await store.delete_collection(CLAIMS, store_ns, ListOptions(label_selector="team=red"), DeleteOptions())
    assert sorted(_name(item) for item in deleted) == ["a", "b"]
    left, _meta = await store.list_objects(CLAIMS, store_ns, ListOptions())
    assert [item.obj["metadata"]["name"] for item in left] == ["c"]


async def test_delete_collection_runs_its_deletes_together_and_answers_in_list_order(store: GenericStore, store_ns: str) -> None:
    names = [f"c-{i:02d}" for i in range(40)]
    for name in names:
        await store.create(CLAIMS, store_ns, claim(name, labels={"team": "red"}), WRITER)
    store.delete_collection_workers = 8
    commits = store.storage.commits
    deleted, _meta = await store.delete_collection(CLAIMS, store_ns, ListOptions(label_selector="team=red"), DeleteOptions())
    assert [_name(item) for item in deleted] == names
    # Deletes that run together share group commits (one by one: one commit each).
    assert store.storage.commits - commits < len(names) / 2
    left, _meta = await store.list_objects(CLAIMS, store_ns, ListOptions())
    assert left == []


async def test_delete_collection_answers_the_first_failure_and_deletes_nothing_it_refused(store: GenericStore, store_ns: str) -> None:
    for i in range(20):
        await store.create(CLAIMS, store_ns, claim(f"c-{i:02d}"), WRITER)
    error = await _refused(store.delete_collection(CLAIMS, store_ns, ListOptions(), DeleteOptions(preconditions_uid="other")), 409, "Conflict")
    assert "the UID in the precondition (other) does not match the UID in record" in error.message
    left, _meta = await store.list_objects(CLAIMS, store_ns, ListOptions())
    assert len(left) == 20


async def test_a_deleted_namespace_deletes_its_objects_together(store: GenericStore) -> None:
    name = await new_namespace(store)
    for i in range(40):
        await store.create(CLAIMS, name, claim(f"c-{i:02d}"), WRITER)
    commits = store.storage.commits
    await store.delete(NAMESPACE_KIND, "", name, DeleteOptions())
    async with asyncio.timeout(20):
        while store.storage.cached(NAMESPACE_KIND.qualified_resource, "", name) is not None:
            await asyncio.sleep(0.05)
    left, _meta = await store.list_objects(CLAIMS, name, ListOptions())
    assert left == []
    # The 40 deletes shared commits (one by one: a commit each, and the namespace's own writes).
    assert store.storage.commits - commits < 20


# ---- pods/binding -------------------------------------------------------------------------------


async def test_binding_assigns_a_node_once(store: GenericStore, store_ns: str) -> None:
    await store.create(PODS, store_ns, pod("p"), WRITER)
    await store.write_subresource(PODS, BINDING, store_ns, "p", _binding("p", annotations={"bound-by": "test"}), WriteOptions(field_manager="sched"))
    bound = (await store.get(PODS, store_ns, "p")).obj
    assert bound["spec"]["nodeName"] == "node-7"
    assert bound["metadata"]["annotations"] == {"bound-by": "test"}
    scheduled = [c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert [c["status"] for c in scheduled] == ["True"]
    assert ("sched", "binding") in [(e["manager"], e.get("subresource")) for e in bound["metadata"]["managedFields"]]
    error = await _refused(store.write_subresource(PODS, BINDING, store_ns, "p", _binding("p", "node-8"), WRITER), 409, "Conflict")
    assert error.message == 'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "node-7"'


async def test_binding_refusals(store: GenericStore, store_ns: str) -> None:
    await store.create(PODS, store_ns, pod("gated", gates=["wait"]), WRITER)
    error = await _refused(store.write_subresource(PODS, BINDING, store_ns, "gated", _binding("gated"), WRITER), 409, "Conflict")
    assert error.message.endswith("pod gated has non-empty .spec.schedulingGates")
    await store.create(PODS, store_ns, pod("p"), WRITER)
    error = await _refused(store.write_subresource(PODS, BINDING, store_ns, "p", _binding("p", uid="not-the-uid"), WRITER), 409, "Conflict")
    assert "Precondition failed: UID in precondition: not-the-uid" in error.message
    error = await _refused(store.write_subresource(PODS, BINDING, store_ns, "p", {"metadata": {"name": "p"}, "target": {"kind": "Pod"}}, WRITER), 422, "Invalid")
    assert [cause["field"] for cause in error.details["causes"]] == ["target.kind", "target.name"]  # type: ignore[index]
    error = await _refused(store.write_subresource(PODS, BINDING, store_ns, "p", _binding("other"), WRITER), 400, "BadRequest")
    assert error.message == "name in URL does not match name in Binding object"
    error = await _refused(store.write_subresource(PODS, BINDING, store_ns, "p", [], WRITER), 400, "BadRequest")
    assert error.message == "the body of the request must be a Binding object"
    error = await _refused(store.write_subresource(PODS, BINDING, store_ns, "missing", _binding("missing"), WRITER), 404, "NotFound")
    assert error.message == 'pods "missing" not found'
    assert "nodeName" not in (await store.get(PODS, store_ns, "p")).obj["spec"]


# ---- namespaces/finalize ----------------------------------------------------------------------------


async def test_finalize_changes_only_spec_finalizers(store: GenericStore) -> None:
    name = await new_namespace(store)
    assert (await store.get(NAMESPACE_KIND, "", name)).obj["spec"]["finalizers"] == ["kubernetes"]
    body = {"metadata": {"labels": {"ignored": "yes"}}, "spec": {"finalizers": []}, "status": {"phase": "Terminating"}}
    result = await store.write_subresource(NAMESPACE_KIND, namespace_kind.FINALIZE, "", name, body, WRITER)
    stored = (await store.get(NAMESPACE_KIND, "", name)).obj
    assert "finalizers" not in stored["spec"]
    assert stored["status"] == {"phase": "Active"}
    assert "ignored" not in stored["metadata"]["labels"]
    # Nothing to change: nothing is written.
    again = await store.write_subresource(NAMESPACE_KIND, namespace_kind.FINALIZE, "", name, body, WRITER)
    assert _written(again)["metadata"]["resourceVersion"] == _written(result)["metadata"]["resourceVersion"]
    await _refused(store.write_subresource(NAMESPACE_KIND, namespace_kind.FINALIZE, "", "ghost-store_ns", body, WRITER), 404, "NotFound")
