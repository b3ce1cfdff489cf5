"""What the dashboard shows, kept current from watches made with the user's credentials.

:class:`DashboardModel` runs informers for nodes, ResourceSlices, DeviceTaintRules,
ResourceClaims and Pods, and turns them (with :mod:`kubectl_dra.inventory`) into a view model:
compact device cells for the map, claims, pending pods, counts, and what is wrong (the API
server cannot be reached, a list is refused). Views subscribe and get a ``snapshot`` first and
then ``patch`` messages with only what changed (devices by id), a few per second at most.

Big clusters stay cheap to ship: a device cell is a short array, details are fetched one device
at a time, and long lists (claims, pending pods) are cut with their total and the commonest
reasons counted, so 10,000 pending pods are a number and a table, not 10,000 rows.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx

from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.informer import Informer
from kube.objects import Obj
from kube.tasks import cancel_and_wait
from kubectl_dra import inventory

RESOURCE = "resource.k8s.io"
MAX_LISTED = 200  # pending pods and claims listed; the rest are counted
COALESCE_SECONDS = 0.1  # changes within this are shipped together
PROBE_SECONDS = 2.0
DEVICE_FIELDS = ("id", "node", "driver", "device", "state", "usage")


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, ApiError):
        return exc.message
    return str(exc) or type(exc).__name__


class DashboardModel:
    """Informers, the derived view model, and its subscribers."""

    def __init__(self, client: KubeClient, *, max_listed: int = MAX_LISTED) -> None:
        self.client = client
        self.max_listed = max_listed

        def informer(group: str, plural: str) -> Informer:
            return Informer(client, resource_path(group, "v1", plural), name=plural)

        self.nodes = informer("", "nodes")
        self.slices = informer(RESOURCE, "resourceslices")
        self.rules = informer(RESOURCE, "devicetaintrules")
        self.claims = informer(RESOURCE, "resourceclaims")
        self.pods = informer("", "pods")
        self.informers = [self.nodes, self.slices, self.rules, self.claims, self.pods]
        self._changed = asyncio.Event()
        for inf in self.informers:
            inf.on_add(lambda _obj: self._changed.set())
            inf.on_update(lambda _old, _new: self._changed.set())
            inf.on_delete(lambda _obj: self._changed.set())
        # The device rows are the costly part of a rebuild (10,000 devices: most of a second);
        # they are made again only when what they are made of changes, so the churn of many
        # pending pods costs only the pod lists, and a claim only the rows of its pools.
        self._devices_stale = True
        self._stale_pools: set[tuple[str, str]] = set()
        for inf in (self.slices, self.rules):
            inf.on_add(lambda _obj: self._devices_changed())
            inf.on_update(lambda _old, _new: self._devices_changed())
            inf.on_delete(lambda _obj: self._devices_changed())
        self.claims.on_add(lambda obj: self._stale_pools.update(inventory.claim_pools(obj)))
        self.claims.on_update(lambda old, new: self._stale_pools.update(inventory.claim_pools(old) | inventory.claim_pools(new)))
        self.claims.on_delete(lambda obj: self._stale_pools.update(inventory.claim_pools(obj)))
        self.pods.on_add(lambda obj: self._devices_changed(inventory.reports_device_health(obj)))
        self.pods.on_update(lambda old, new: self._devices_changed(inventory.reports_device_health(old) or inventory.reports_device_health(new)))
        self.pods.on_delete(lambda obj: self._devices_changed(inventory.reports_device_health(obj)))
        self.server_error: str | None = None  # the API server's reachability, from the probe
        self.user = ""
        self.view: Obj = {}
        self.rows: dict[str, inventory.DeviceRow] = {}
        self._device_cells: dict[str, list[Any]] = {}
        self._subscribers: set[asyncio.Queue[Obj]] = set()
        self._tasks: list[asyncio.Task[Any]] = []
        self.version = 0

    def _devices_changed(self, changed: bool = True) -> None:
        self._devices_stale = self._devices_stale or changed

    # --- lifecycle ---

    async def start(self) -> None:
        for inf in self.informers:
            inf.start()
        self._tasks = [asyncio.create_task(self._rebuild_loop(), name="dashboard rebuild"), asyncio.create_task(self._probe_loop(), name="dashboard probe")]
        self.rebuild()

    async def stop(self) -> None:
        await cancel_and_wait(*self._tasks)
        for inf in self.informers:
            await inf.stop()

    async def _probe_loop(self) -> None:
        """Whether the API server answers (the informers retry quietly); and who we are there."""
        while True:
            before = self.server_error
            try:
                if not self.user:
                    self.user = await self.whoami()
                else:
                    await self.client.get("/version")
                self.server_error = None
            except ApiError as exc:
                self.server_error = None if exc.code in (401, 403, 404) else f"the API server answers {exc.code}: {exc.message}"
            except (httpx.TransportError, OSError) as exc:
                self.server_error = f"cannot reach the API server at {self.client.server}: {_error_text(exc)}"
            if self.server_error != before:
                self._changed.set()
            await asyncio.sleep(PROBE_SECONDS)

    async def whoami(self) -> str:
        """The user name the API server knows the credentials by (a SelfSubjectReview, as ``kubectl auth whoami``)."""
        review = await self.client.create(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews", {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        )
        return str(((review.get("status") or {}).get("userInfo") or {}).get("username") or "")

    async def _rebuild_loop(self) -> None:
        while True:
            await self._changed.wait()
            await asyncio.sleep(COALESCE_SECONDS)
            self._changed.clear()
            self.rebuild()

    # --- the view model ---

    def problems(self) -> list[str]:
        """What is wrong, in words for the page's banner."""
        if self.server_error:
            return [f"{self.server_error} (retrying)"]
        out = []
        for inf in self.informers:
            if isinstance(inf.error, ApiError):
                out.append(f"cannot list {inf.name}: {inf.error.message}")
            elif inf.error is not None and not inf.has_synced:
                out.append(f"cannot list {inf.name}: {_error_text(inf.error)} (retrying)")
        return out

    def build(self) -> Obj:
        """The whole view model (plain JSON)."""
        pods = self.pods.list()
        claims = self.claims.list()
        self._update_devices(claims, pods)
        rows = list(self.rows.values())
        devices = self._device_cells
        nodes = sorted(
            ({"name": n["metadata"]["name"], "ready": _ready(n), "taints": [f"{t.get('key')}:{t.get('effect')}" for t in (n.get("spec") or {}).get("taints") or []]}
             for n in self.nodes.list()),
            key=lambda n: n["name"],
        )  # fmt: skip
        claim_rows = inventory.claim_rows(claims, pods)
        pending = inventory.pending_pods(pods)
        reasons: Counter[str] = Counter()
        listed = []
        for index, pod in enumerate(pending):
            reason, message = inventory.scheduling_message(pod)
            reasons[f"{reason or 'Pending'}: {message}"] += 1
            if index < self.max_listed:
                meta = pod.get("metadata") or {}
                listed.append({"namespace": meta.get("namespace", ""), "name": meta.get("name", ""), "reason": reason, "message": message,
                               "created": meta.get("creationTimestamp", "")})  # fmt: skip
        states = Counter(r.state for r in rows)
        return {
            "devices": devices,
            "nodes": nodes,
            "summary": {
                "devices": len(rows), "states": {s: states.get(s, 0) for s in inventory.STATES},
                "drivers": dict(sorted(Counter(r.driver for r in rows).items())),
                "nodes": len(nodes), "claims": len(claim_rows), "pending": len(pending),
            },
            "claims": {"total": len(claim_rows), "items": [c.to_dict() for c in claim_rows[: self.max_listed]]},
            "pending": {"total": len(pending), "items": listed, "reasons": [{"count": n, "reason": r} for r, n in reasons.most_common(5)]},
            "status": {"problems": self.problems(), "synced": all(i.has_synced for i in self.informers), "user": self.user, "server": self.client.server},
        }

    def _update_devices(self, claims: list[Obj], pods: list[Obj]) -> None:
        """Device rows and cells made again: all of them, or only those of the pools claims changed in."""
        pools, self._stale_pools = self._stale_pools, set()
        if not (self._devices_stale or not self.view) and not pools:
            return
        slices = self.slices.list()
        if not (self._devices_stale or not self.view):
            fresh = inventory.device_rows([s for s in slices if inventory.slice_pool(s) in pools], claims, pods, self.rules.list())
            if all(_device_id(r) in self.rows for r in fresh):  # the same devices: replace them where they are
                self.rows = {**self.rows, **{_device_id(r): r for r in fresh}}
                self._device_cells = {**self._device_cells, **{_device_id(r): _cell(r) for r in fresh}}
                return
        self._devices_stale = False
        rows = inventory.device_rows(slices, claims, pods, self.rules.list())
        self.rows = {_device_id(r): r for r in rows}
        self._device_cells = {_device_id(r): _cell(r) for r in rows}

    def rebuild(self) -> None:
        """Recompute, and send subscribers what changed."""
        new = self.build()
        patch = diff(self.view, new)
        self.view = new
        if patch:
            self.version += 1
            patch["version"] = self.version
            for queue in list(self._subscribers):
                _offer(queue, {"type": "patch", "data": patch})

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[asyncio.Queue[Obj]]:
        """A queue of messages: the snapshot first, then patches."""
        queue: asyncio.Queue[Obj] = asyncio.Queue(maxsize=64)
        queue.put_nowait({"type": "snapshot", "data": {**self.view, "version": self.version, "fields": DEVICE_FIELDS}})
        self._subscribers.add(queue)
        try:
            yield queue
        finally:
            self._subscribers.discard(queue)

    def device(self, device_id: str) -> Obj | None:
        row = self.rows.get(device_id)
        return row.to_dict() if row is not None else None


def _offer(queue: asyncio.Queue[Obj], message: Obj) -> None:
    """A subscriber that falls behind gets a fresh snapshot instead of a backlog."""
    try:
        queue.put_nowait(message)
    except asyncio.QueueFull:
        while not queue.empty():
            queue.get_nowait()
        queue.put_nowait({"type": "resync", "data": {}})


def _device_id(row: inventory.DeviceRow) -> str:
    return "/".join(row.key)


def _cell(row: inventory.DeviceRow) -> list[Any]:
    """A device as the map draws it (DEVICE_FIELDS)."""
    return [_device_id(row), row.node or f"<{row.nodes}: {row.pool}>", row.driver, row.device, row.state, round(row.usage, 3)]


def _ready(node: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (node.get("status") or {}).get("conditions") or [])


def diff(old: Obj, new: Obj) -> Obj:
    """What changed: device cells by id (upserted, removed), every other section whole."""
    patch: Obj = {}
    old_devices: dict[str, Any] = old.get("devices") or {}
    new_devices: dict[str, Any] = new.get("devices") or {}
    upsert = [cell for key, cell in new_devices.items() if old_devices.get(key) != cell]
    remove = [key for key in old_devices if key not in new_devices]
    if upsert or remove:
        patch["devices"] = {"upsert": upsert, "remove": remove}
    for section in ("nodes", "summary", "claims", "pending", "status"):
        if old.get(section) != new.get(section):
            patch[section] = new.get(section)
    return patch
