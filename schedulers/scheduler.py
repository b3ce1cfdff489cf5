"""The scheduler: a cache fed by informers, a sequential decision loop, and concurrent binding tasks.

One scheduling cycle per pod, like upstream's framework with the DynamicResources plugin, in
three components:

* :mod:`schedulers.cache`: informers, node accounting, and the claim assume cache; informer
  events move pods in the scheduling queue (:mod:`schedulers.queue`).
* :mod:`schedulers.cycle`: for the pod popped from the queue, resolve its claims, filter and
  score the nodes; the answer is a placement, a failure, or claims to wait for.
* :mod:`schedulers.preemption`: when no node fits, whether removing pods of lower priority
  would make room somewhere (upstream's PostFilter).
* :mod:`schedulers.binder`: reserve a placement in the cache, then write the claims and the
  binding in a task of its own (so the next cycle starts at once); evict preemption victims;
  report failures on the pod.

:class:`Scheduler` wires them together and runs the loop.
"""

from __future__ import annotations

import asyncio
import logging

from kube.client import KubeClient
from schedulers.allocator import AllocatorFeatures
from schedulers.binder import Binder, SchedulerStats
from schedulers.cache import Key, SchedulerCache
from schedulers.cycle import DEFAULT_FILTER_TIMEOUT, DEFAULT_NODES_TO_FIND, Placement, SchedulingCycle, WaitForClaims
from schedulers.plugins.dynamicresources_binding import DEFAULT_BINDING_TIMEOUT
from schedulers.preemption import Preempt, Preemption
from schedulers.queue import SchedulingQueue

log = logging.getLogger("scheduler")

class Scheduler:
    """Schedules pods of one scheduler name; run one instance per leadership term."""

    def __init__(
        self,
        client: KubeClient,
        *,
        scheduler_name: str = "default-scheduler",
        features: AllocatorFeatures | None = None,
        nodes_to_find: int = DEFAULT_NODES_TO_FIND,
        watch_timeout_seconds: int | None = None,
        filter_timeout: float | None = DEFAULT_FILTER_TIMEOUT,
        binding_timeout: float = DEFAULT_BINDING_TIMEOUT,
        pop_from_backoff: bool = True,
    ) -> None:
        self.stats = SchedulerStats()
        self.queue: SchedulingQueue[Key, Key] = SchedulingQueue(pop_from_backoff=pop_from_backoff)
        self.cache = SchedulerCache(
            client, self.queue, scheduler_name=scheduler_name, features=features, watch_timeout_seconds=watch_timeout_seconds
        )
        self.cycle = SchedulingCycle(self.cache, nodes_to_find=nodes_to_find, filter_timeout=filter_timeout)
        self.cycle.dynamic_resources.binding_timeout = binding_timeout
        self.preemption = Preemption(self.cycle)
        self.binder = Binder(client, self.cache, self.queue, stats=self.stats)
        self.cache.pods.on_delete(self.binder.forget_reports)

    async def run(self) -> None:
        """Sync the informers, then schedule until cancelled."""
        await self.cache.check_served()
        informers = self.cache.informers
        for inf in informers:
            inf.start()
        try:
            for inf in informers:
                await inf.wait_synced()
            log.info(
                "caches synced",
                extra={"pods": len(self.cache.pods.keys()), "nodes": len(self.cache.nodes.keys()), "claims": len(self.cache.claims.keys())},
            )
            flusher = asyncio.create_task(self._flush_loop())
            try:
                await self._loop()
            finally:
                flusher.cancel()
        finally:
            await self.binder.cancel()
            for inf in informers:
                await inf.stop()

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(30)
            self.queue.flush()

    async def _loop(self) -> None:
        while True:
            key = await self.queue.pop()
            try:
                self.schedule_one(key)
            except Exception:
                log.exception("scheduling attempt failed", extra={"pod": "/".join(key)})
                self.queue.retry(key)
            # Let informer events and binding tasks progress between cycles.
            await asyncio.sleep(0)

    def schedule_one(self, key: Key) -> None:
        """One scheduling cycle for ``key``; writes are left to a binding task."""
        pod = self.cache.pods.get(*key)
        if pod is None or not self.cache.wants(pod):
            self.queue.delete(key)
            return
        if self.cache.is_binding(key):
            self.queue.done(key)
            return
        self.stats.attempts += 1
        result = self.cycle.schedule(pod)
        if isinstance(result, Placement):
            self.binder.reserve(pod, result)
        elif isinstance(result, WaitForClaims):
            log.debug("pod waits for claims", extra={"pod": "/".join(key), "why": result.why})
            self.queue.wait_for(key, result.claims)
        else:
            clear_nomination = False
            message = result.message
            if result.reason == "Unschedulable" and result.fit_message:
                # PostFilter in upstream's default profile's order: DynamicResources frees claims that
                # pin the pod, then DefaultPreemption looks for victims; their reasons follow the
                # filters' message in that order.
                freed, writes = self.cycle.dynamic_resources.post_filter(pod, result)
                if writes is not None:
                    self.binder.spawn(writes)
                decision = self.preemption.post_filter(pod, result)
                if isinstance(decision, Preempt):
                    self.binder.preempt(pod, decision)
                    return
                message, clear_nomination = decision.message, decision.clear_nomination
                if freed is not None and message.startswith(result.fit_message + " "):
                    message = f"{result.fit_message} {freed.message}, {message[len(result.fit_message) + 1 :]}"
            self.binder.unschedulable(pod, message, result.reason, clear_nomination=clear_nomination, plugins=result.plugins)
