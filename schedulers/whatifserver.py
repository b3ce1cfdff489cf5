"""What-if questions served beside the explanations, with the same authentication and authorization.

* ``POST /whatif/namespaces/NS/fit`` (body: a ``FitRequest``): how many copies of a pod fit, where,
  with which devices, and why the other nodes take none (:meth:`schedulers.whatif.WhatIf.fit`).
  Whoever may ``create pods`` in NS may ask; naming existing claims also needs ``get
  resourceclaims`` there, removing pods ``get pods`` on each.
* ``POST /whatif/nodes/NAME/drain``: where each pod with claims on the node would go if the node
  went now (:meth:`schedulers.whatif.WhatIf.drain`); for whoever may ``get`` the node and ``list
  pods`` in every namespace.

The request body (JSON)::

    {"pod": {...},                       # a Pod; its claims may name templates or existing claims
     "templates": [{...}],               # the ResourceClaimTemplates the pod names (read by the caller)
     "max": 100,                         # copies at most (default and bound: WhatIfLimits)
     "changes": {"removeNodes": ["n1"],
                 "addNodes": [{"count": 2, "profile": "gpu", "prefix": "whatif-node-"}],
                 "addSlices": [{...ResourceSlice...}],   # nodes they name that do not exist are added
                 "removePods": ["ns/name"]}}

Every question is answered in a forked copy of this process (:func:`answer_in_copy`): the copy
holds the caches as they were at the fork, changes them at will and writes its answer to a pipe;
the live scheduler's loop only waits on that pipe. The copy runs at the lowest CPU priority, one
at a time; the questions that came meanwhile (up to ``WhatIfLimits.waiting``, then 429) are
answered by the next copy, each in a copy of that copy, ``WhatIfLimits.parallel`` at a time
(:func:`answer_batch_in_copy`), each caller getting its answer as soon as it is there. Each
answer has a deadline counted from when it was asked (the cycle's filter timeout is cut to it,
the placing stops at it): a question still waiting for its turn then gets 504, and a copy still
computing ``GRACE`` seconds later is killed (504).
Nothing is written to the API server and nothing is reserved in the live caches.

Pod validation is the API server's: the pod is sent to the server as a dry run create
(``?dryRun=All``) as the caller (:meth:`~kube.delegation.DelegatedAuth.create_as`: the scheduler
impersonates the caller with upstream's constrained impersonation, its modes ``user-info`` and
``serviceaccount``; the grant is the bootstrap ClusterRole ``system:dra-scheduler-whatif``), and the what-if
is about the pod the server would create (defaults filled in). The server's refusal (422 for a pod
that does not validate, 403, 404 for a namespace that does not exist) is the caller's answer, as it
is; a scheduler the server does not let act as the caller answers 500 saying which permission it
lacks. Nothing is written (a dry run).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import re
import select
import signal
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from kube.client import resource_path
from kube.delegation import DelegatedAuth, Unauthenticated, User, forbidden_message
from kube.dra.deviceprofiles import ProfileError, available_profiles, build_slices, load_profiles
from kube.dra.explanations import EXPLANATION_API_VERSION
from kube.errors import ApiError, bad_request, invalid, invalid_object, not_found, not_supported, required, too_many
from kube.httpserve import Request, Response
from kube.tasks import wait_for
from schedulers.cache import Obj, SchedulerCache, meta
from schedulers.cycle import SchedulingCycle
from schedulers.whatif import DEFAULT_ALLOCATABLE, Changes, WhatIf

FIT_PATH = re.compile(r"^/whatif/namespaces/([^/]+)/fit$")
DRAIN_PATH = re.compile(r"^/whatif/nodes/([^/]+)/drain$")
PREFIX = "/whatif/"
RESOURCE = "resource.k8s.io"
NICE = 19  # the copy yields the CPU to the live scheduler (and everything else)
# A 403 about the scheduler's own impersonation of the caller (not about what the caller may do).
IMPERSONATION_REFUSED = re.compile(r' cannot impersonate[\w:-]* resource "')
IMPERSONATION_NEEDED = (
    '"impersonate:user-info" on users, groups, uids and userextras and "impersonate:serviceaccount" on serviceaccounts '
    'in API group "authentication.k8s.io", and "impersonate-on:user-info:create" and "impersonate-on:serviceaccount:create" '
    'on pods: the ClusterRole system:dra-scheduler-whatif; a member of system:masters can only be impersonated with "impersonate"'
)


class Scheduler(Protocol):
    """What the endpoints read: the caches and the cycle of a scheduler (the leader's) or of an
    observer (:mod:`schedulers.observer`), which holds the same without placing pods."""

    cache: SchedulerCache
    cycle: SchedulingCycle


@dataclass(frozen=True)
class WhatIfLimits:
    """How much one question may ask and take."""

    max_copies: int = 10_000  # the bound on ``max``
    default_copies: int = 1_000  # ``max`` when not given
    max_added_nodes: int = 1_000
    seconds: float = 10.0  # one answer's deadline, counted from when the question came
    batch: int = 16  # questions answered by one fork of the live process
    waiting: int = 16  # questions waiting for a turn; more get 429
    parallel: int = field(default_factory=lambda: max(1, min(4, os.cpu_count() or 1)))  # a batch's questions computed at once


def _status(error: ApiError) -> Response:
    return Response.json(error.code, error.status())


def added_node(name: str, like: Mapping[str, Any] | None) -> Obj:
    """A Node for a what-if: ready, with the allocatable of ``like`` (an existing node) or the simulator's."""
    allocatable = dict(((like or {}).get("status") or {}).get("allocatable") or DEFAULT_ALLOCATABLE)
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": f"whatif-{name}", "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"capacity": dict(allocatable), "allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True"}]},
    }  # fmt: skip


Job = Callable[[], dict[str, Any]]
Result = dict[str, Any] | ApiError
_FRAME = struct.Struct("!IQ")  # each answer on the pipe: the question's index and the answer's length, then its JSON
GRACE = 5.0  # seconds past its deadline before a copy still computing an answer is killed


@dataclass(frozen=True)
class Question:
    """A job and its deadline (``time.monotonic()``, the same clock in every fork): ``seconds``
    after it was asked, however long it waited for a turn."""

    job: Job
    seconds: float
    deadline: float

    @classmethod
    def asked_now(cls, job: Job, seconds: float) -> Question:
        return cls(job, seconds, time.monotonic() + seconds)

    def waited_too_long(self) -> ApiError:
        waited = time.monotonic() - (self.deadline - self.seconds)
        return ApiError(
            504, "Timeout",
            f"the what-if question waited {waited:.1f}s for its turn (other questions were being answered)"
            f" and its deadline ({self.seconds:g}s) passed before it started; ask again later",
        )  # fmt: skip

    def took_too_long(self) -> ApiError:
        return ApiError(504, "Timeout", f"the what-if answer took longer than its deadline ({self.seconds:g}s) and was stopped")


def _answer(job: Job) -> bytes:
    """One job's answer or error as JSON (in the process that computes it)."""
    try:
        return orjson.dumps({"answer": job()})
    except ApiError as exc:
        return orjson.dumps({"error": exc.status()})
    except Exception as exc:  # reported to the caller, the live scheduler is untouched
        return orjson.dumps({"error": ApiError(500, "InternalError", f"the what-if answer failed: {exc!r}").status()})


def _error(error: ApiError) -> bytes:
    return orjson.dumps({"error": error.status()})


_NO_ANSWER = ApiError(500, "InternalError", "the what-if copy ended without an answer")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _answer_in_grandchildren(questions: list[Question], parallel: int, out: int) -> None:
    """In the batch's copy: each question in a copy of the copy (so each starts from the same
    state), ``parallel`` at a time, each answer framed onto ``out`` as soon as it is there. A
    question whose deadline passed before its turn is answered 504 without being started; a
    copy still computing ``GRACE`` seconds past its deadline is killed (504)."""
    waiting = list(enumerate(questions))
    running: dict[int, tuple[int, int, list[bytes]]] = {}  # read end -> (index, pid, chunks so far)

    def finish(fd: int, data: bytes) -> None:
        index, pid, _ = running.pop(fd)
        os.close(fd)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # a no-op for a copy that wrote its answer and left
        os.waitpid(pid, 0)
        _write_all(out, _FRAME.pack(index, len(data)) + data)

    while waiting or running:
        while waiting and len(running) < parallel:
            index, question = waiting.pop(0)
            if time.monotonic() >= question.deadline:
                data = _error(question.waited_too_long())
                _write_all(out, _FRAME.pack(index, len(data)) + data)
                continue
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:
                try:
                    os.close(read_fd)
                    _write_all(write_fd, _answer(question.job))
                finally:
                    os._exit(0)
            os.close(write_fd)
            running[read_fd] = (index, pid, [])
        if not running:
            continue
        now = time.monotonic()
        for fd, (index, _, _) in list(running.items()):
            if now >= questions[index].deadline + GRACE:
                finish(fd, _error(questions[index].took_too_long()))
        if not running:
            continue
        wait = min(questions[index].deadline + GRACE for index, _, _ in running.values()) - now
        for fd in select.select(list(running), [], [], max(0.0, wait))[0]:
            chunk = os.read(fd, 1 << 16)
            if chunk:
                running[fd][2].append(chunk)
            else:
                finish(fd, b"".join(running[fd][2]) or _error(_NO_ANSWER))


async def answer_batch_in_copy(
    questions: list[Question], parallel: int = 1, deliver: Callable[[int, Result], None] | None = None
) -> list[Result]:
    """Each question's answer (or its ApiError), computed in a forked copy of this process, and
    each handed to ``deliver`` (with its index) as soon as it comes.

    One fork of the live process per batch: the copy answers a lone question itself, or each
    question in a copy of its own (so each starts from the state at the fork), ``parallel`` at a
    time, and writes the answers to a pipe as they are done. Fewer forks of the live process
    mean fewer of its pages copied on write while copies are alive.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy: compute, write, leave without running any of the parent's cleanup
        code = 0
        try:
            os.close(read_fd)
            gc.disable()  # short-lived: collecting would touch (and copy) every page of the heap
            with contextlib.suppress(OSError):
                os.nice(NICE)
            if len(questions) == 1:
                data = _answer(questions[0].job)
                _write_all(write_fd, _FRAME.pack(0, len(data)) + data)
            else:
                _answer_in_grandchildren(questions, parallel, write_fd)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**31)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb"))
    results: dict[int, Result] = {}

    def got(index: int, result: Result) -> None:
        results[index] = result
        if deliver is not None:
            deliver(index, result)

    killed = False
    try:
        while len(results) < len(questions):
            # The copy answers every question by its deadline plus GRACE (it kills its own late
            # copies); one that does not by then is stuck, and so is the rest of its batch.
            last = max(q.deadline for i, q in enumerate(questions) if i not in results) + 2 * GRACE
            try:
                index, length = _FRAME.unpack(await wait_for(reader.readexactly(_FRAME.size), max(0.0, last - time.monotonic())))
                result = orjson.loads(await reader.readexactly(length))
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                killed = True
                break
            except asyncio.IncompleteReadError:
                break
            got(index, ApiError.from_status(result["error"]) if "error" in result else result["answer"])
    finally:
        transport.close()
        await asyncio.to_thread(os.waitpid, pid, 0)
    for index, question in enumerate(questions):
        if index not in results:
            got(index, question.took_too_long() if killed else _NO_ANSWER)
    return [results[i] for i in range(len(questions))]


async def answer_in_copy(job: Job, seconds: float) -> dict[str, Any]:
    """``job``'s answer from a forked copy of this process (raises its ApiError)."""
    (result,) = await answer_batch_in_copy([Question.asked_now(job, seconds)])
    if isinstance(result, ApiError):
        raise result
    return result


class WhatIfServer:
    """The what-if routes; ``scheduler`` is the leader's (None on a standby)."""

    def __init__(self, auth: DelegatedAuth, limits: WhatIfLimits | None = None, *, check_pods: bool = True) -> None:
        self.auth = auth
        self.limits = limits or WhatIfLimits()
        # An observer may not act as the caller (it never writes, not even a dry run): it takes the
        # pod as the caller sends it (kubectl dra and the dashboard have the API server check it).
        self.check_pods = check_pods
        self._pending: list[tuple[Question, asyncio.Future[Result]]] = []
        self._runner: asyncio.Task[None] | None = None

    async def handle(self, request: Request, scheduler: Scheduler | None) -> Response:
        fit, drain = FIT_PATH.match(request.path), DRAIN_PATH.match(request.path)
        if fit is None and drain is None:
            return _status(ApiError(404, "NotFound", "the server could not find the requested resource"))
        if request.method != "POST":
            return _status(ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource"))
        try:
            user = await self.auth.authenticate(request.headers.get("authorization"), request.client_certificate)
            if fit is not None:
                return await self._fit(request, user, fit.group(1), scheduler)
            assert drain is not None
            return await self._drain(user, drain.group(1), scheduler)
        except Unauthenticated:
            return _status(ApiError(401, "Unauthorized", "Unauthorized"))
        except ApiError as exc:
            return _status(exc)
        except OSError as exc:
            return _status(ApiError(503, "ServiceUnavailable", f"cannot check the caller with the API server: {exc}"))

    async def _require(self, user: User, verb: str, resource: str, *, namespace: str = "", name: str = "", group: str = "") -> None:
        allowed, reason = await self.auth.allowed(user, verb=verb, resource=resource, namespace=namespace, name=name, group=group)
        if not allowed:
            message = forbidden_message(user, verb, resource, namespace=namespace, name=name, group=group, reason=reason)
            raise ApiError(
                403, "Forbidden", message, {"name": name, "group": group, "kind": resource} if name else {"group": group, "kind": resource}
            )

    @staticmethod
    def _ready(scheduler: Scheduler | None) -> Scheduler:
        if scheduler is None:
            raise ApiError(503, "ServiceUnavailable", "this scheduler is not the leader; the leader's URL is on its Lease")
        if not all(informer.has_synced for informer in scheduler.cache.informers):
            raise ApiError(503, "ServiceUnavailable", "the scheduler's caches are not synced yet")
        return scheduler

    async def _turn(self, question: Question) -> dict[str, Any]:
        """The question's answer, from the next batch (one copy of the process at a time), as soon
        as the copy has it."""
        if len(self._pending) >= self.limits.waiting:
            raise ApiError(429, "TooManyRequests", "too many what-if questions at once, please try again later", {"retryAfterSeconds": 1})
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending.append((question, future))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._batches())
        result = await future
        if isinstance(result, ApiError):
            raise result
        return result

    async def _batches(self) -> None:
        """Answer the waiting questions, a batch per fork, until none waits; each caller gets its
        answer when it is there, not when the whole batch is."""
        while self._pending:
            batch, self._pending = self._pending[: self.limits.batch], self._pending[self.limits.batch :]
            now = time.monotonic()
            for question, future in batch:
                if question.deadline <= now and not future.done():
                    future.set_result(question.waited_too_long())
            batch = [(question, future) for question, future in batch if not future.done()]
            if not batch:
                continue

            def deliver(index: int, result: Result, batch: list[tuple[Question, asyncio.Future[Result]]] = batch) -> None:
                future = batch[index][1]
                if not future.done():
                    future.set_result(result)

            try:
                await answer_batch_in_copy([question for question, _ in batch], self.limits.parallel, deliver)
            except Exception as exc:  # the fork itself failed (out of memory, process limit)
                for _, future in batch:
                    if not future.done():
                        future.set_result(ApiError(503, "ServiceUnavailable", f"cannot answer what-if questions now: {exc}"))

    # --- fit ---

    async def _fit(self, request: Request, user: User, namespace: str, scheduler: Scheduler | None) -> Response:
        seconds = self.limits.seconds
        deadline = time.monotonic() + seconds  # the answer's deadline counts from the question
        await self._require(user, "create", "pods", namespace=namespace)
        body = _json_body(request)
        pod = await self._as_created(user, namespace, _pod(body)) if self.check_pods else _as_sent(namespace, _pod(body))
        templates = _templates(body, pod)
        copies = _max(body, self.limits)
        claim_names = [e["resourceClaimName"] for e in pod["spec"].get("resourceClaims") or [] if e.get("resourceClaimName")]
        if claim_names:
            await self._require(user, "get", "resourceclaims", namespace=namespace, group=RESOURCE)
        live = self._ready(scheduler)
        for name in claim_names:
            if live.cache.claim(namespace, name) is None:
                raise not_found(f"resourceclaims.{RESOURCE}", name, RESOURCE, "resourceclaims")
        changes = await self._changes(body, user, live)

        def job() -> dict[str, Any]:
            whatif = WhatIf(live.cache, live.cycle, seconds=seconds, deadline=deadline)
            whatif.apply(changes)
            return whatif.fit(pod, templates, copies)

        answer = await self._turn(Question(job, seconds, deadline))
        return Response.json(200, {"kind": "FitAnswer", "apiVersion": EXPLANATION_API_VERSION, **answer})

    async def _as_created(self, user: User, namespace: str, pod: Obj) -> Obj:
        """The pod as the API server would create it in ``namespace`` for ``user`` (a dry run, made
        as the user), or the server's refusal. A pod of that name existing already is no objection
        to a what-if: the dry run is then repeated with ``generateName``."""
        path = resource_path("", "v1", "pods", namespace) + "?dryRun=All"
        raw = pod.get("metadata")
        pod_meta = {k: v for k, v in raw.items() if k != "resourceVersion"} if isinstance(raw, dict) else None
        body = pod if pod_meta is None else {**pod, "metadata": {**pod_meta, "namespace": pod_meta.get("namespace") or namespace}}
        name = (pod_meta or {}).get("name")
        try:
            try:
                return await self.auth.create_as(user, path, body)
            except ApiError as exc:
                if exc.code != 409 or exc.reason != "AlreadyExists" or not name:
                    raise
            again = {**body, "metadata": {**{k: v for k, v in body["metadata"].items() if k != "name"}, "generateName": f"{name}-"}}
            answer = await self.auth.create_as(user, path, again)
        except ApiError as exc:
            if exc.code == 401 or (exc.code == 403 and IMPERSONATION_REFUSED.search(exc.message)):
                raise ApiError(
                    500, "InternalError", f'the scheduler cannot have the API server check the pod as "{user.name}": {exc.message} '
                    f"(the scheduler needs {IMPERSONATION_NEEDED})",
                ) from None  # fmt: skip
            raise
        answer["metadata"]["name"] = name
        answer["metadata"].pop("generateName", None)
        return answer

    async def _changes(self, body: Mapping[str, Any], user: User, scheduler: Scheduler) -> Changes:
        raw = body.get("changes") or {}
        if not isinstance(raw, dict):
            raise invalid_object("FitRequest", "", "", [invalid("changes", raw, "must be an object")])
        cache = scheduler.cache
        changes = Changes()
        for name in _strings(raw, "removeNodes"):
            if cache.nodes.get("", name) is None:
                raise not_found("nodes", name, "", "nodes")
            changes.remove_nodes.append(name)
        for i, ref in enumerate(_strings(raw, "removePods")):
            ns, slash, name = ref.partition("/")
            if not slash or not ns or not name:
                raise invalid_object("FitRequest", "", "", [invalid(f"changes.removePods[{i}]", ref, "must be NAMESPACE/NAME")])
            await self._require(user, "get", "pods", namespace=ns, name=name)
            if cache.pods.get(ns, name) is None:
                raise not_found("pods", name, "", "pods")
            changes.remove_pods.append((ns, name))
        taken = set(cache.node_names())
        names = cache.node_names()
        like = cache.nodes.get("", names[0]) if names else None
        added = 0
        adds = raw.get("addNodes") or []
        if not isinstance(adds, list):
            raise invalid_object("FitRequest", "", "", [invalid("changes.addNodes", adds, "must be a list")])
        for i, item in enumerate(adds):
            where = f"changes.addNodes[{i}]"
            count, profile_name = (item or {}).get("count", 1), (item or {}).get("profile", "")
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise invalid_object("FitRequest", "", "", [invalid(f"{where}.count", count, "must be at least 1")])
            added += count
            if added > self.limits.max_added_nodes:
                raise invalid_object("FitRequest", "", "", [too_many("changes.addNodes", added, self.limits.max_added_nodes)])
            if not isinstance(profile_name, str) or not profile_name:
                raise invalid_object("FitRequest", "", "", [required(f"{where}.profile")])
            try:
                profile = load_profiles(profile_name) if "/" not in profile_name else None
            except ProfileError:
                profile = None
            if profile is None:
                raise invalid_object("FitRequest", "", "", [not_supported(f"{where}.profile", profile_name, available_profiles())])
            prefix = str(item.get("prefix") or "whatif-node-")
            index = 0
            for _ in range(count):
                while f"{prefix}{index}" in taken:
                    index += 1
                name = f"{prefix}{index}"
                taken.add(name)
                changes.add_nodes.append((added_node(name, like), build_slices(profile, name)))
        slices = raw.get("addSlices") or []
        if not isinstance(slices, list):
            raise invalid_object("FitRequest", "", "", [invalid("changes.addSlices", slices, "must be a list")])
        new_nodes: dict[str, list[Obj]] = {}
        for i, obj in enumerate(slices):
            spec = obj.get("spec") if isinstance(obj, dict) else None
            if not isinstance(spec, dict) or not spec.get("driver") or not isinstance(spec.get("pool"), dict):
                field = f"changes.addSlices[{i}].spec" + (
                    ".driver" if isinstance(spec, dict) and not spec.get("driver") else ".pool" if isinstance(spec, dict) else ""
                )
                raise invalid_object(
                    "ResourceSlice", meta(obj).get("name", "") if isinstance(obj, dict) else "", RESOURCE, [required(field)]
                )
            obj = {**obj, "metadata": {**meta(obj), "name": meta(obj).get("name") or f"whatif-slice-{i}"}}
            node = spec.get("nodeName")
            if node and node not in taken:
                new_nodes.setdefault(node, []).append(obj)  # a node the manifest brings
            else:
                changes.add_slices.append(obj)  # more devices for a node that exists, or not local to a node
        changes.add_nodes += [(added_node(node, like), objs) for node, objs in new_nodes.items()]
        return changes

    # --- drain ---

    async def _drain(self, user: User, node: str, scheduler: Scheduler | None) -> Response:
        seconds = self.limits.seconds
        deadline = time.monotonic() + seconds
        await self._require(user, "get", "nodes", name=node)
        await self._require(user, "list", "pods")
        live = self._ready(scheduler)
        if live.cache.nodes.get("", node) is None:
            raise not_found("nodes", node, "", "nodes")

        def job() -> dict[str, Any]:
            return WhatIf(live.cache, live.cycle, seconds=seconds, deadline=deadline).drain(node)

        answer = await self._turn(Question(job, seconds, deadline))
        return Response.json(200, {"kind": "DrainPlan", "apiVersion": EXPLANATION_API_VERSION, **answer})


# --- the request body ---


def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = orjson.loads(request.body or b"null")
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"the request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object (a FitRequest)")
    return body


def _strings(raw: Mapping[str, Any], key: str) -> list[str]:
    value = raw.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise invalid_object("FitRequest", "", "", [invalid(f"changes.{key}", value, "must be a list of names")])
    return list(value)


def _max(body: Mapping[str, Any], limits: WhatIfLimits) -> int:
    value = body.get("max", limits.default_copies)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise invalid_object("FitRequest", "", "", [invalid("max", value, "must be a whole number of at least 1")])
    if value > limits.max_copies:
        raise invalid_object("FitRequest", "", "", [invalid("max", value, f"must be at most {limits.max_copies} (the scheduler's bound)")])
    return value


def _pod(body: Mapping[str, Any]) -> Obj:
    """The pod asked about, as given (the API server checks it, :meth:`WhatIfServer._as_created`)."""
    pod = body.get("pod")
    if not isinstance(pod, dict):
        raise invalid_object("FitRequest", "", "", [required("pod")])
    return pod


def _as_sent(namespace: str, pod: Obj) -> Obj:
    """The pod as the caller sent it, in ``namespace``: the parts the what-if reads must have their
    types (the API server has not checked it; see ``WhatIfServer.check_pods``)."""
    raw_meta, spec = pod.get("metadata"), pod.get("spec")
    if raw_meta is not None and not isinstance(raw_meta, dict):
        raise invalid_object("Pod", "", "", [invalid("metadata", raw_meta, "must be an object")])
    if not isinstance(spec, dict):
        raise invalid_object("Pod", "", "", [required("spec")])
    for key in ("containers", "initContainers", "resourceClaims", "tolerations", "topologySpreadConstraints", "schedulingGates"):
        if spec.get(key) is not None and not (isinstance(spec[key], list) and all(isinstance(e, dict) for e in spec[key])):
            raise invalid_object("Pod", "", "", [invalid(f"spec.{key}", spec[key], "must be a list of objects")])
    if not spec.get("containers"):
        raise invalid_object("Pod", "", "", [required("spec.containers")])
    for key in ("nodeSelector", "affinity"):
        if spec.get(key) is not None and not isinstance(spec[key], dict):
            raise invalid_object("Pod", "", "", [invalid(f"spec.{key}", spec[key], "must be an object")])
    pod_meta = dict(raw_meta or {})
    pod_meta.pop("resourceVersion", None)
    pod_meta["namespace"] = namespace
    pod_meta.setdefault("uid", f"whatif-{pod_meta.get('name') or pod_meta.get('generateName') or 'pod'}")
    return {**pod, "metadata": pod_meta}


def _templates(body: Mapping[str, Any], pod: Obj) -> dict[str, Obj]:
    """The templates the pod names, by name (each must be given)."""
    given = body.get("templates") or []
    if not isinstance(given, list):
        raise invalid_object("FitRequest", "", "", [invalid("templates", given, "must be a list of ResourceClaimTemplates")])
    by_name = {meta(t).get("name", ""): t for t in given if isinstance(t, dict)}
    out: dict[str, Obj] = {}
    for entry in pod["spec"].get("resourceClaims") or []:
        name = entry.get("resourceClaimTemplateName")
        if not name:
            continue
        template = by_name.get(name)
        if template is None:
            raise not_found(f"resourceclaimtemplates.{RESOURCE}", name, RESOURCE, "resourceclaimtemplates")
        out[name] = template
    return out


__all__ = [
    "DRAIN_PATH",
    "FIT_PATH",
    "PREFIX",
    "Question",
    "WhatIfLimits",
    "WhatIfServer",
    "added_node",
    "answer_batch_in_copy",
    "answer_in_copy",
]
