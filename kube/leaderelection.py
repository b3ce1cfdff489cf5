"""Leader election with a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

Candidates race to write themselves into ``spec.holderIdentity`` with optimistic concurrency
(the PUT carries the resourceVersion read; a 409 means someone else wrote first). A lease held
by another is considered expired ``leaseDurationSeconds`` after *this* candidate last saw it
change (local monotonic clock, so clock skew between processes does not matter).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import httpx

from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kube.tasks import cancel_and_wait
from kube.timeutil import now_micro

log = logging.getLogger("leaderelection")

StartCallback = Callable[[], Coroutine[Any, Any, None]]
StopCallback = Callable[[], Awaitable[None] | None]


class LeaderElector:
    """Acquire and keep a Lease; run a callback while leading."""

    def __init__(
        self,
        client: KubeClient,
        *,
        name: str,
        identity: str,
        namespace: str = "kube-system",
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_on_cancel: bool = True,
        annotations: dict[str, str] | None = None,
    ) -> None:
        self.client = client
        # Written on the Lease while leading, e.g. where the leader serves what only it knows.
        self.annotations = annotations or {}
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self.path = resource_path("coordination.k8s.io", "v1", "leases", namespace, name)
        self._collection = resource_path("coordination.k8s.io", "v1", "leases", namespace)
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0
        self.is_leader = False

    def _lease_spec(self, acquire_time: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.lease_duration)),
            "acquireTime": acquire_time,
            "renewTime": now_micro(),
            "leaseTransitions": transitions,
        }

    async def try_acquire_or_renew(self) -> bool:
        """One attempt: True when this candidate holds the lease afterwards."""
        try:
            lease = await self.client.get(self.path)
        except ApiError as exc:
            if exc.code != 404:
                raise
            now = now_micro()
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace, **({"annotations": dict(self.annotations)} if self.annotations else {})},
                "spec": self._lease_spec(now, 0),
            }
            try:
                created = await self.client.create(self._collection, body)
            except ApiError as create_exc:
                if create_exc.code == 409:
                    return False  # another candidate created it first
                raise
            self._observe(created.get("spec") or {})
            return True
        spec: dict[str, Any] = lease.get("spec") or {}
        self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and time.monotonic() < self._observed_at + duration:
            return False  # held by someone else and not expired
        if holder == self.identity:
            new_spec = self._lease_spec(spec.get("acquireTime") or now_micro(), int(spec.get("leaseTransitions") or 0))
        else:
            new_spec = self._lease_spec(now_micro(), int(spec.get("leaseTransitions") or 0) + (1 if holder else 0))
        lease["spec"] = new_spec
        if self.annotations:
            lease.setdefault("metadata", {})["annotations"] = {**(lease["metadata"].get("annotations") or {}), **self.annotations}
        try:
            updated = await self.client.update(self.path, lease)
        except ApiError as exc:
            if exc.code == 409:
                return False  # someone wrote in between; re-read next round
            raise
        self._observe(updated.get("spec") or {})
        return True

    def _observe(self, spec: dict[str, Any]) -> None:
        # Any change of the record (holder or renewTime) restarts the expiry clock.
        key = {k: spec.get(k) for k in ("holderIdentity", "renewTime", "leaseDurationSeconds")}
        if key != self._observed_spec:
            self._observed_spec = key
            self._observed_at = time.monotonic()

    async def _attempt(self, timeout: float) -> bool:
        # Bounded as client-go bounds a renewal by the renew deadline: the client's own retries
        # (Retry-After) must not keep a leader believing in a lease it may already have lost.
        try:
            async with asyncio.timeout(max(timeout, 0.001)):
                return await self.try_acquire_or_renew()
        except TimeoutError:
            log.warning("lease attempt timed out", extra={"lease": self.name, "timeout": timeout})
            return False
        except (ApiError, httpx.TransportError, OSError) as exc:
            log.warning("lease attempt failed", extra={"lease": self.name, "error": str(exc)})
            return False

    async def release(self) -> None:
        """Give the lease up so a standby does not wait for it to expire."""
        try:
            lease = await self.client.get(self.path)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update({"holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": now_micro()})
            lease["spec"] = {k: v for k, v in spec.items() if v is not None}
            await self.client.update(self.path, lease)
        except (ApiError, httpx.TransportError, OSError) as exc:
            log.info("lease release failed", extra={"lease": self.name, "error": str(exc)})

    async def run(self, on_started_leading: StartCallback, on_stopped_leading: StopCallback | None = None) -> None:
        """Wait to become leader, run ``on_started_leading()`` while renewing; return when leadership is lost."""
        while not await self._attempt(self.renew_deadline):
            await asyncio.sleep(self.retry_period)
        self.is_leader = True
        log.info("became leader", extra={"lease": f"{self.namespace}/{self.name}", "identity": self.identity})
        task = asyncio.create_task(on_started_leading(), name=f"leader {self.name}")
        try:
            last_renew = time.monotonic()
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.retry_period)
                if done:
                    # The leader's work ended on its own; keep its exception visible.
                    task.result()
                    return
                if await self._attempt(self.renew_deadline - (time.monotonic() - last_renew)):
                    last_renew = time.monotonic()
                elif time.monotonic() - last_renew > self.renew_deadline:
                    log.warning("lost leadership", extra={"lease": self.name, "identity": self.identity})
                    return
        finally:
            self.is_leader = False
            if not task.done():
                await cancel_and_wait(task)
            if self.release_on_cancel:
                await asyncio.shield(self.release())
            if on_stopped_leading is not None:
                result = on_stopped_leading()
                if inspect.isawaitable(result):
                    await result


def default_identity() -> str:
    """host_pid_random: unique per process, readable in the Lease's holderIdentity."""
    return f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:6]}"


async def run_while_leading(
    client: KubeClient,
    *,
    name: str,
    namespace: str,
    identity: str,
    lease_duration: float,
    new_worker: Callable[[], Callable[[], Coroutine[Any, Any, Any]]],
    leader_elect: bool = True,
    annotations: dict[str, str] | None = None,
) -> None:
    """Run a fresh worker for every leadership term, forever (or once without election).

    Each term gets a new worker so a standby never acts on caches from before it led.
    """
    if not leader_elect:
        await new_worker()()
        return
    elector = LeaderElector(
        client, name=name, namespace=namespace, identity=identity or default_identity(), lease_duration=lease_duration,
        renew_deadline=lease_duration * 2 / 3, retry_period=max(0.2, lease_duration / 7.5), annotations=annotations,
    )  # fmt: skip
    log.info("waiting for leadership", extra={"lease": f"{namespace}/{name}", "identity": elector.identity})
    while True:
        await elector.run(new_worker())
