"""The simulated drivers' attachment controller, for devices with binding conditions.

A device whose slice entry carries ``bindingConditions`` is usable only once its driver says so:
after the scheduler allocated it (and before it binds the pod), the driver attaches the device to
the node and reports each binding condition True in the claim's ``status.devices``, or reports a
binding failure condition True. This controller does that for the simulated nodes' drivers,
``Settings.binding_delay`` seconds after it sees the allocation (``Settings.binding_fail``:
the failure conditions instead), writing as the node's drivers. Each allocation is reported once
(an allocation is known by its claim uid and allocationTimestamp).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection

import httpx

from kube.dra.claims import update_device_status
from kube.errors import ApiError
from kube.informer import Informer
from kube.objects import Obj
from kube.tasks import cancel_and_wait
from kube.timeutil import now_rfc3339
from kubeletsim.identities import Identities
from kubeletsim.pods import attached_devices

log = logging.getLogger("kubeletsim")


class BindingController:
    """Reports binding conditions for this simulator's nodes; see the module docstring."""

    def __init__(
        self, claims: Informer, node_names: Collection[str], drivers: Collection[str], identities: Identities, *, delay: float, fail: bool
    ) -> None:
        self.claims = claims
        self.nodes = frozenset(node_names)
        self.drivers = frozenset(drivers)
        self.identities = identities
        self.delay = delay
        self.fail = fail
        self._seen: set[tuple[str, str, str]] = set()  # (claim uid, allocationTimestamp, node)
        self._tasks: set[asyncio.Task[None]] = set()
        claims.on_add(self._claim_changed)
        claims.on_update(lambda _old, new: self._claim_changed(new))

    def _claim_changed(self, claim: Obj) -> None:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or []
        nodes = {r.get("pool", "") for r in results if r.get("bindingConditions") and r.get("driver") in self.drivers and r.get("pool") in self.nodes}
        meta = claim.get("metadata") or {}
        for node in nodes:
            key = (str(meta.get("uid", "")), str(allocation.get("allocationTimestamp") or ""), node)
            if key in self._seen or attached_devices(claim, self.drivers, node, "", fail=self.fail) is None:
                continue
            self._seen.add(key)
            task = asyncio.get_running_loop().create_task(self._report(str(meta.get("namespace", "")), str(meta.get("name", "")), node))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _report(self, namespace: str, name: str, node: str) -> None:
        await asyncio.sleep(self.delay)
        claim = self.claims.get(namespace, name)
        with contextlib.suppress(ApiError, httpx.HTTPError, OSError, RuntimeError):  # RuntimeError: too many conflicts
            await update_device_status(
                await self.identities.driver(node), namespace, name, lambda c: attached_devices(c, self.drivers, node, now_rfc3339(), fail=self.fail), claim
            )
            log.info("reported binding conditions", extra={"claim": f"{namespace}/{name}", "node": node, "failed": self.fail})

    async def stop(self) -> None:
        await cancel_and_wait(*self._tasks)
