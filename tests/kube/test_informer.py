"""The informer against a real server: list, add/update/delete, resume after a watch ends, re-list after 410."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from devtools.server import ServerProcess
from kube.client import KubeClient, resource_path
from kube.indexer import Index
from kube.informer import Informer, run_with_informers


def _cm_claim(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "labels": labels},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
    }


async def _eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


class Recorder:
    """Collects handler calls as (kind, name) pairs."""

    def __init__(self, informer: Informer) -> None:
        self.calls: list[tuple[str, str]] = []
        informer.on_add(lambda obj: self.calls.append(("add", obj["metadata"]["name"])))
        informer.on_update(self._update)
        informer.on_delete(self._delete)

    async def _update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        assert old["metadata"]["name"] == new["metadata"]["name"]
        self.calls.append(("update", new["metadata"]["name"]))

    def _delete(self, obj: dict[str, Any]) -> None:
        self.calls.append(("delete", obj["metadata"]["name"]))


# compact: the store keeps JSON bytes and decodes on read; everything seen from outside is the same.
@pytest.mark.parametrize("compact", [False, True], ids=["decoded", "compact"])
async def test_informer_list_watch_and_resume(server: ServerProcess, ns: str, compact: bool) -> None:
    client = KubeClient(server.url, user_agent="test-informer")
    path = resource_path("resource.k8s.io", "v1", "resourceclaims", ns)
    await client.create(path, _cm_claim("before", app="x"))
    await client.create(path, _cm_claim("other", app="y"))
    # A 1-second server-side watch timeout makes the informer resume several times during the test.
    informer = Informer(client, path, label_selector="app=x", watch_timeout_seconds=1, compact=compact)
    rec = Recorder(informer)
    informer.start()
    try:
        await informer.wait_synced(10)
        assert informer.has_synced
        assert [o["metadata"]["name"] for o in informer.list()] == ["before"]
        assert informer.get(ns, "before") is not None and informer.get(ns, "other") is None

        await client.create(path, _cm_claim("a", app="x"))
        await _eventually(lambda: ("add", "a") in rec.calls)
        await client.patch(f"{path}/a", {"metadata": {"annotations": {"k": "v"}}})
        await _eventually(lambda: ("update", "a") in rec.calls)
        assert informer.get(ns, "a")["metadata"]["annotations"] == {"k": "v"}  # type: ignore[index]
        await client.delete(f"{path}/a")
        await _eventually(lambda: ("delete", "a") in rec.calls)
        assert informer.get(ns, "a") is None

        # Let the watch end at the server's timeout, then write: the resumed watch must see it, without a re-list.
        watches = informer.watch_count
        await _eventually(lambda: informer.watch_count >= watches + 1, timeout=15)
        await client.create(path, _cm_claim("after-resume", app="x"))
        await _eventually(lambda: ("add", "after-resume") in rec.calls)
        assert informer.list_count == 1
        assert rec.calls == [("add", "before"), ("add", "a"), ("update", "a"), ("delete", "a"), ("add", "after-resume")]
    finally:
        await informer.stop()
        await client.close()


@pytest.fixture(scope="module")
def compacting_server(start_server: Callable[..., ServerProcess]) -> ServerProcess:
    """A server that forgets history almost at once, so old resourceVersions get 410 (sync: Postgres setup runs its own loop)."""
    return start_server("--compaction-interval", "0.5", "--compaction-window", "0", "--compaction-min-retain", "1", "--default-watch-cache-size", "2")


@pytest.mark.parametrize("compact", [False, True], ids=["decoded", "compact"])
async def test_informer_relists_after_410(compacting_server: ServerProcess, compact: bool) -> None:
    server = compacting_server
    client = KubeClient(server.url, user_agent="test-informer")
    ns = f"t-{uuid.uuid4().hex[:8]}"
    await client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    path = resource_path("resource.k8s.io", "v1", "resourceclaims", ns)
    await client.create(path, _cm_claim("keep"))
    await client.create(path, _cm_claim("gone"))
    # Pages of 2 items: the re-list is assembled page by page.
    informer = Informer(client, path, compact=compact, page_size=2)
    rec = Recorder(informer)
    informer.start()
    try:
        await informer.wait_synced(10)
        await informer.stop()
        # While the informer is away: change its objects and push its revision out of history.
        await client.delete(f"{path}/gone")
        await client.create(path, _cm_claim("new"))
        await client.patch(f"{path}/keep", {"metadata": {"labels": {"v": "2"}}})
        for i in range(5):
            await client.create(path, _cm_claim(f"filler-{i}"))
        await asyncio.sleep(1.5)  # a compaction runs
        informer.start()
        await _eventually(lambda: informer.list_count == 2)
        await _eventually(lambda: ("add", "filler-4") in rec.calls)
        assert ("delete", "gone") in rec.calls and ("add", "new") in rec.calls and ("update", "keep") in rec.calls
        assert sorted(o["metadata"]["name"] for o in informer.list()) == sorted(["keep", "new", *(f"filler-{i}" for i in range(5))])
    finally:
        await informer.stop()
        await client.close()


async def test_informer_strips_managed_fields_and_applies_its_transform(server: ServerProcess, ns: str) -> None:
    """By default cached objects and handler arguments lack metadata.managedFields (upstream's
    TransformStripManagedFields); a custom transform sees every object before store and handlers."""
    client = KubeClient(server.url, user_agent="test-informer")
    path = resource_path("resource.k8s.io", "v1", "resourceclaims", ns)
    created = await client.create(path, _cm_claim("listed", app="x"))
    assert created["metadata"].get("managedFields"), "the server tracks managers"

    def mark(obj: dict[str, Any]) -> dict[str, Any]:
        obj.setdefault("metadata", {}).setdefault("annotations", {})["seen"] = "yes"
        return obj

    plain = Informer(client, path)
    custom = Informer(client, path, transform=mark, compact=True)
    kept = Informer(client, path, transform=None)
    handed: list[dict[str, Any]] = []
    plain.on_add(handed.append)
    plain.on_update(lambda _old, new: handed.append(new))
    marked: list[dict[str, Any]] = []
    custom.on_add(marked.append)
    for informer in (plain, custom, kept):
        informer.start()
    try:
        for informer in (plain, custom, kept):
            await informer.wait_synced(10)
        await client.create(path, _cm_claim("watched", app="x"))
        await _eventually(lambda: len(handed) == 2 and len(marked) == 2)
        assert all("managedFields" not in obj["metadata"] for obj in handed)
        assert all("managedFields" not in obj["metadata"] for obj in plain.list())
        assert [obj["metadata"]["annotations"]["seen"] for obj in marked] == ["yes", "yes"]
        assert custom.get(ns, "watched")["metadata"]["annotations"] == {"seen": "yes"}  # type: ignore[index]
        assert custom.get(ns, "watched")["metadata"].get("managedFields")  # type: ignore[index]
        assert kept.get(ns, "listed")["metadata"].get("managedFields")  # type: ignore[index]
        assert plain.get(ns, "listed") == {**created, "metadata": {k: v for k, v in created["metadata"].items() if k != "managedFields"}}
    finally:
        for informer in (plain, custom, kept):
            await informer.stop()
        await client.close()


async def test_index_over_a_compact_informer(server: ServerProcess, ns: str) -> None:
    """An index answers from a compact store as from a decoded one, and follows updates and deletes."""
    client = KubeClient(server.url, user_agent="test-informer")
    path = resource_path("resource.k8s.io", "v1", "resourceclaims", ns)
    for name, app in (("a", "x"), ("b", "x"), ("c", "y")):
        await client.create(path, _cm_claim(name, app=app))
    informer = Informer(client, path, compact=True)
    by_app: Index[str] = Index(informer, lambda obj: [obj["metadata"].get("labels", {}).get("app", "")])
    informer.start()
    try:
        await informer.wait_synced(10)
        assert [o["metadata"]["name"] for o in by_app.get("x")] == ["a", "b"]
        await client.patch(f"{path}/b", {"metadata": {"labels": {"app": "y"}}})
        await client.delete(f"{path}/c")
        await _eventually(lambda: [o["metadata"]["name"] for o in by_app.get("y")] == ["b"])
        assert [o["metadata"]["name"] for o in by_app.get("x")] == ["a"]
        assert informer.get(ns, "b")["metadata"]["labels"] == {"app": "y"}  # type: ignore[index]
        assert sorted(informer.keys()) == [(ns, "a"), (ns, "b")]
        assert [o["metadata"]["name"] for o in sorted(informer.iter_objects(), key=lambda o: o["metadata"]["name"])] == ["a", "b"]
    finally:
        await informer.stop()
        await client.close()


class NeverSynced:
    """An informer whose list never succeeds (the database is down)."""

    def start(self) -> None:
        pass

    async def wait_synced(self) -> None:
        await asyncio.Event().wait()

    async def stop(self) -> None:
        pass


async def test_work_cancelled_before_the_informers_synced_is_closed_not_left_unawaited() -> None:
    ran: list[str] = []

    async def work() -> None:
        ran.append("work")

    coroutine = work()
    task = asyncio.create_task(run_with_informers([NeverSynced()], coroutine))  # type: ignore[list-item]
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ran == [] and coroutine.cr_frame is None, "closed without running"  # type: ignore[attr-defined]  # typing.Coroutine does not declare a native coroutine's cr_frame
