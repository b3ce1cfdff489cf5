"""The TTL-after-finished controller (upstream's pkg/controller/ttlafterfinished): a finished Job
with ``spec.ttlSecondsAfterFinished`` is deleted (in the foreground, so its pods go first) that
many seconds after it finished (its Complete or Failed condition's transition time)."""

from __future__ import annotations

import logging
import time

from controllers.job import is_finished, job_path
from controllers.objects import metadata
from controllers.workloads import key_of
from kube.client import KubeClient
from kube.errors import ApiError
from kube.informer import Informer
from kube.objects import Obj
from kube.timeutil import parse_time
from kube.workqueue import WorkQueue, log_failures

log = logging.getLogger("ttl-after-finished-controller")


def expires_at(job: Obj) -> float | None:
    """When a finished Job with a TTL may be deleted (None: not finished, or no TTL)."""
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    if ttl is None or metadata(job).get("deletionTimestamp") or not is_finished(job):
        return None
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            finished = parse_time(str(condition.get("lastTransitionTime") or ""))
            if finished is not None:
                return finished.timestamp() + int(ttl)
    return None


class TTLAfterFinishedController:
    """Informer handlers queue finished Jobs with a TTL; ``process()`` deletes them when it runs out."""

    def __init__(self, client: KubeClient, *, jobs: Informer, workers: int = 2) -> None:
        self.client = client
        self.jobs = jobs
        self.workers = workers
        self.queue: WorkQueue[tuple[str, str]] = WorkQueue()
        jobs.on_add(self._changed)
        jobs.on_update(lambda _old, new: self._changed(new))

    @property
    def informers(self) -> list[Informer]:
        return [self.jobs]

    def _changed(self, job: Obj) -> None:
        if expires_at(job) is not None:
            self.queue.add(key_of(job))

    async def process(self) -> None:
        log.info("caches synced, processing")
        await self.queue.run(lambda key: self.sync(*key), self.workers, log_failures(log))

    async def sync(self, namespace: str, name: str) -> bool:
        """processJob: wait for the expiry, check a fresh read still expires, then delete it."""
        job = self.jobs.get(namespace, name)
        expiry = expires_at(job) if job is not None else None
        if expiry is None:
            return True
        if expiry > time.time():
            self.queue.add_after((namespace, name), expiry - time.time())
            return True
        try:
            fresh = await self.client.get(job_path(namespace, name))
        except ApiError as exc:
            if exc.code == 404:
                return True
            raise
        fresh_expiry = expires_at(fresh)
        if fresh_expiry is None:
            return True
        if fresh_expiry > time.time():
            self.queue.add_after((namespace, name), fresh_expiry - time.time())
            return True
        await self.client.delete(
            job_path(namespace, name), preconditions={"uid": str(metadata(fresh)["uid"])}, propagation_policy="Foreground", missing_ok=True
        )
        log.info("deleted a finished job past its TTL", extra={"job": f"{namespace}/{name}"})
        return True


