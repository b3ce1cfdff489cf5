"""ResourceQuota admission (upstream's ResourceQuota plugin): a create or update that would take a
namespace over one of its quotas is refused (403 ``exceeded quota: ...``), and one that fits is
charged to the quotas first: their ``status.used`` is written with the quota's resourceVersion as
precondition before the object may be written. Two writes that would together overshoot a quota
cannot both be charged, whichever servers they reach: the second one's status write conflicts,
and it is judged again against the quota as the first left it.

Writes to one namespace are judged in batches, one batch at a time (upstream's per-namespace
queue): every write waiting when a batch starts is judged against the running totals, and each
quota the batch changed is written once. A quota whose write conflicts (another server charged
it meanwhile) is read again from the database and the writes it concerns are judged again, three
times at most, after which they get the conflict. A write that was charged and then failed (its
name was taken) stays charged until the controller recounts the namespace, as upstream's.

A quota limits a write only once the controller has filled in its ``status.hard``; until its
``status.used`` counts a resource the quota limits, writes that use it are refused (``status
unknown for quota``).
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from app.api.generic import AdmittedWrite, GenericStore
from app.api.options import WriteOptions
from app.registry.core import resourcequota
from app.storage.storage import Storage
from kube import errors
from kube.errors import ApiError
from kube.objects import Obj, meta, status
from kube.quota import resources
from kube.quota.evaluators import IGNORED_RESOURCES, UPDATE, Evaluator, Registry, ScopeError, new_registry
from kube.quota.resources import ResourceList
from kube.tasks import wait_for

log = logging.getLogger("app.admission")

QUOTAS = resourcequota.STRATEGY
# How long a write waits for its batch (upstream's).
EVALUATION_TIMEOUT = 10.0
# Status writes retried after a conflict before the writes waiting on them are refused.
RETRIES = 3
# The field manager of the status writes: upstream's loopback client is kube-apiserver.
STATUS_WRITER = WriteOptions(field_manager="kube-apiserver")


class StoredObjects:
    """``kube.quota.evaluators.Objects`` over what this server holds now (its watch cache)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def list(self, group: str, resource: str, namespace: str | None) -> list[Obj]:
        return [stored.obj for stored in self.storage.cached_all(f"{resource}.{group}" if group else resource, namespace)]

    def get(self, group: str, resource: str, namespace: str, name: str) -> Obj | None:
        stored = self.storage.cached(f"{resource}.{group}" if group else resource, namespace, name)
        return stored.obj if stored is not None else None


@dataclass(frozen=True)
class Quota:
    """A quota as judged: the stored object, and the limits and use of its status."""

    obj: Obj
    hard: ResourceList
    used: ResourceList

    @classmethod
    def of(cls, obj: Obj) -> Quota:
        quota_status = status(obj)
        return cls(obj, resources.parse_list(quota_status.get("hard")), resources.parse_list(quota_status.get("used")))

    @property
    def name(self) -> str:
        return str(meta(self.obj).get("name") or "")


class Refused(Exception):
    """Why quota refuses a write (the text after ``is forbidden: ``)."""


def _matches(evaluator: Evaluator, quota: Quota, obj: Obj) -> bool:
    try:
        return evaluator.matches(quota.obj, obj)
    except ScopeError as exc:  # a scope selector value that is no label value: upstream's error too
        raise errors.internal_error(f"error matching scopes of quota {quota.name}, err: {exc}") from None


def check_request(quotas: list[Quota], write: AdmittedWrite, obj: Obj, old: Obj | None, evaluator: Evaluator) -> list[Quota]:
    """The quotas as they would be with ``write`` charged to them (``quotas`` itself when it
    changes none); Refused when it does not fit. ``obj`` and ``old`` are the write's objects in
    the stored version."""
    if not evaluator.handles(write.operation, write.subresource, obj, old):
        return quotas
    interesting: list[int] = []
    for index, quota in enumerate(quotas):
        if not _matches(evaluator, quota, obj):
            continue
        limited = evaluator.matching_resources(quota.hard)
        problem = evaluator.constraints(limited, obj)
        if problem:
            raise Refused(f"failed quota: {quota.name}: {problem}")
        unknown = [name for name in limited if name in quota.hard and name not in quota.used]
        if unknown:
            raise Refused(f"status unknown for quota: {quota.name}, resources: {resources.pretty_names(limited)}")
        interesting.append(index)
    usage = evaluator.usage(obj)
    below_zero = resources.negative(usage)
    if below_zero:
        raise Refused(f"quota usage is negative for resource(s): {resources.pretty_names(below_zero)}")
    deltas: dict[int, ResourceList] = dict.fromkeys(interesting, usage)
    if write.operation == UPDATE and old is not None:
        # Only what the update adds counts, for the quotas the old object counted for already.
        delta = resources.subtract_non_negative(usage, evaluator.usage(old))
        for index in interesting:
            if _matches(evaluator, quotas[index], old):
                deltas[index] = delta
    deltas = {index: kept for index, delta in deltas.items() if (kept := resources.remove_zeros(delta))}
    if not deltas:
        return quotas
    charged = list(quotas)
    for index, delta in deltas.items():
        quota = quotas[index]
        requested = resources.mask(delta, quota.hard)
        used = resources.add(quota.used, requested)
        if write.subresource != "status":
            fits, exceeded = resources.less_than_or_equal(resources.mask(used, requested), quota.hard)
            if not fits:
                raise Refused(
                    f"exceeded quota: {quota.name}, requested: {resources.pretty(resources.mask(requested, exceeded))}, "
                    f"used: {resources.pretty(resources.mask(quota.used, exceeded))}, limited: {resources.pretty(resources.mask(quota.hard, exceeded))}"
                )
        charged[index] = replace(quota, used=used)
    return charged


def _changed(before: list[Quota], after: list[Quota]) -> list[Quota]:
    """The quotas of ``after`` whose use differs from ``before``'s."""
    return [new for old, new in zip(before, after, strict=True) if not resources.equals(old.used, new.used)]


@dataclass
class _Waiter:
    """One write waiting for its batch to be judged."""

    write: AdmittedWrite
    obj: Obj
    old: Obj | None
    evaluator: Evaluator
    future: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def allow(self) -> None:
        if not self.future.done():
            self.future.set_result(None)

    def refuse(self, error: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(error)

    def forbidden(self, why: str) -> ApiError:
        strategy = self.write.strategy
        return errors.forbidden_object(strategy.qualified_resource, self.write.name, strategy.group, strategy.plural, why)


class QuotaAdmission:
    """The ResourceQuota admission step of one server (``GenericStore.write_admission``)."""

    def __init__(self, store: GenericStore) -> None:
        self.store = store
        self.registry: Registry = new_registry(StoredObjects(store.storage))
        self._pending: dict[str, list[_Waiter]] = {}
        self._working: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def _quotas(self, namespace: str) -> list[Obj]:
        return [stored.obj for stored in self.store.storage.cached_all(QUOTAS.qualified_resource, namespace)]

    async def admit(self, write: AdmittedWrite) -> None:
        """Judge ``write`` (in its namespace's next batch); ApiError when it is refused."""
        strategy = write.strategy
        if not write.namespace or (strategy.group, strategy.plural) in IGNORED_RESOURCES:
            return
        evaluator = self.registry.get_or_count(strategy.group, strategy.plural)
        if not self.store.storage.cached_all(QUOTAS.qualified_resource, write.namespace):
            return  # no quota in the namespace: nothing to judge (and nothing to convert)
        obj = strategy.to_stored(write.obj)
        old = strategy.to_stored(write.old) if write.old is not None else None
        if not evaluator.handles(write.operation, write.subresource, obj, old):
            return
        waiter = _Waiter(write, obj, old, evaluator)
        self._enqueue(waiter)
        try:
            await wait_for(asyncio.shield(waiter.future), EVALUATION_TIMEOUT)
        except TimeoutError:
            raise errors.internal_error("resource quota evaluation timed out") from None

    def _enqueue(self, waiter: _Waiter) -> None:
        namespace = waiter.write.namespace
        self._pending.setdefault(namespace, []).append(waiter)
        if namespace in self._working:
            return
        self._working.add(namespace)
        # Judged outside the request's context: the status writes are the server's own.
        task = asyncio.get_running_loop().create_task(self._work(namespace), name=f"quota admission {namespace}", context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _work(self, namespace: str) -> None:
        try:
            while batch := self._pending.pop(namespace, None):
                try:
                    await self._judge(namespace, batch)
                except Exception as exc:
                    log.exception("judging writes against the quotas failed", extra={"namespace": namespace})
                    for waiter in batch:
                        waiter.refuse(errors.internal_error(f"resource quota evaluation failed: {exc}"))
                finally:
                    # Answered already, unless the server is stopping.
                    for waiter in batch:
                        waiter.refuse(errors.internal_error("resource quota evaluation stopped"))
        finally:
            self._working.discard(namespace)
            for waiter in self._pending.pop(namespace, []):
                waiter.refuse(errors.internal_error("resource quota evaluation stopped"))

    async def _judge(self, namespace: str, batch: list[_Waiter]) -> None:
        quotas = [Quota.of(obj) for obj in self._quotas(namespace)]
        undecided = batch
        for attempt in range(RETRIES + 1):
            charged, waiting = self._charge(quotas, undecided)
            changed = _changed(quotas, charged)
            if not changed:
                for waiter in waiting:
                    waiter.allow()
                return
            failed: list[str] = []
            last_error: ApiError | None = None
            for quota in changed:
                try:
                    await self._write_status(namespace, quota)
                except ApiError as exc:
                    failed.append(quota.name)
                    last_error = exc
            if not failed:
                for waiter in waiting:
                    waiter.allow()
                return
            if attempt == RETRIES:
                for waiter in waiting:
                    waiter.refuse(last_error or errors.internal_error("resource quota status could not be written"))
                return
            # Judge the writes that still wait against the quotas that did not take them, as they are now.
            quotas = await self._fresh(namespace, failed)
            undecided = waiting

    def _charge(self, quotas: list[Quota], batch: list[_Waiter]) -> tuple[list[Quota], list[_Waiter]]:
        """The running totals with every write of ``batch`` that fits charged, and the writes that
        wait for the totals to be written; the others are answered."""
        waiting: list[_Waiter] = []
        for waiter in batch:
            try:
                charged = check_request(quotas, waiter.write, waiter.obj, waiter.old, waiter.evaluator)
            except Refused as exc:
                waiter.refuse(waiter.forbidden(str(exc)))
                continue
            except ApiError as exc:
                waiter.refuse(exc)
                continue
            if waiter.write.dry_run or not _changed(quotas, charged):
                waiter.allow()
                continue
            waiting.append(waiter)
            quotas = charged
        return quotas, waiting

    async def _write_status(self, namespace: str, quota: Quota) -> None:
        body = copy.deepcopy(quota.obj)
        body.setdefault("status", {})["used"] = resources.to_api(quota.used)
        await self.store.update(resourcequota.STATUS_STRATEGY, namespace, quota.name, body, STATUS_WRITER)

    async def _fresh(self, namespace: str, names: Iterable[str]) -> list[Quota]:
        """The quotas named, as the database has them now (those deleted meanwhile left out)."""
        out: list[Quota] = []
        for name in names:
            stored = await self.store.storage.read_for_update(QUOTAS.qualified_resource, namespace, name, fresh=True)
            if stored is not None:
                out.append(Quota.of(stored.obj))
        return out

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

