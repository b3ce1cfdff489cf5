"""What-if capacity on a private copy of the scheduler's cache: copies placed as the scheduler
would place them, the reasons for the nodes that take none, nodes removed and added, drain plans."""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

import orjson
import pytest

from kube.client import KubeClient
from kube.delegation import ANONYMOUS_USER, DelegatedAuth, User
from kube.errors import ApiError
from kube.httpserve import Request
from kube.kubeconfig import Connection
from kube.objects import Obj
from schedulers.cycle import SchedulingCycle
from schedulers.explain import NOT_EXAMINED, Explainer
from schedulers.explainserver import ExplainServer
from schedulers.observer import Observer
from schedulers.scheduler import Scheduler
from schedulers.whatif import Changes, WhatIf, _Verdicts
from schedulers.whatifserver import WhatIfLimits
from tests.schedulers.cluster import CLASS, DRIVER, NS, Cluster, allocation, claim, device_class, node, node_slice, pod, reserved_for
from tests.schedulers.test_allocator import ADMIN_NS, CASES, Case


def template(name: str = "one-gpu", count: int = 1) -> Obj:
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS, "count": count}}]}}},
    }


def templated_pod(name: str = "train", entry: str = "gpu", tmpl: str = "one-gpu", **spec: Any) -> Obj:
    body = pod(name, **spec)
    body["spec"]["resourceClaims"] = [{"name": entry, "resourceClaimTemplateName": tmpl}]
    return body


def whatif(cluster: Cluster) -> WhatIf:
    return WhatIf(cluster.cache, SchedulingCycle(cluster.cache))


async def test_copies_fill_the_devices_one_after_another() -> None:
    cluster = Cluster()
    await cluster.topology({"a": 2, "b": 3, "none": 0})
    answer = whatif(cluster).fit(templated_pod(), {"one-gpu": template()}, 100)
    assert answer["total"] == 5
    assert answer["nodes"] == [
        {"name": "a", "count": 2, "devices": [[f"{DRIVER}/a/dev-0"], [f"{DRIVER}/a/dev-1"]]},
        {"name": "b", "count": 3, "devices": [[f"{DRIVER}/b/dev-0"], [f"{DRIVER}/b/dev-1"], [f"{DRIVER}/b/dev-2"]]},
    ]
    assert answer["unfit"] == [
        {"name": "none", "reason": "claim default/train-whatif-5-gpu, request gpu: no device of class gpu on the node"}
    ]


async def test_copies_with_anti_affinity_to_each_other_take_one_node_each() -> None:
    """A placed copy changes other nodes' verdicts under pod anti-affinity: the what-if does not
    remember verdicts then, and each copy lands where the scheduler would put it."""
    cluster = Cluster()
    zone = "topology.kubernetes.io/zone"
    await cluster.put(cluster.cache.classes, device_class())
    for name, where in (("a", "z1"), ("b", "z1"), ("c", "z2")):
        await cluster.put(cluster.cache.nodes, node(name, labels={zone: where}))
        await cluster.put(cluster.cache.slices, node_slice(name, 4))
    spread_out = templated_pod(affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "train"}}, "topologyKey": zone}]}})
    spread_out["metadata"]["labels"] = {"app": "train"}
    answer = whatif(cluster).fit(spread_out, {"one-gpu": template()}, 100)
    assert answer["total"] == 2 and sorted(n["name"] for n in answer["nodes"]) == ["a", "c"]
    assert answer["unfit"] == [{"name": "b", "reason": "node(s) didn't match pod anti-affinity rules"}]


# --- the allocator's table, asked through fit ----------------------------------------------------


async def _case_cluster(case: Case) -> Cluster:
    cluster = Cluster(features=case.features)
    cache = cluster.cache
    for obj in case.classes:
        await cluster.put(cache.classes, obj)
    for obj in case.slices:
        await cluster.put(cache.slices, obj)
    for obj in case.rules:
        await cluster.put(cache.taint_rules, obj)
    # The table's cases without namespaces leave admin access unchecked; the scheduler always checks
    # it, so their namespace carries the admin-access label.
    for name, labels in (ADMIN_NS if case.namespaces is None else case.namespaces).items():
        await cluster.put(cache.namespaces, {"metadata": {"name": name, "labels": labels}})
    await cluster.put(cache.nodes, case.node)
    for obj in case.allocated:
        await cluster.put(cache.claims, obj)
    for obj in case.in_flight.values():
        cache.assume_allocation(obj, obj["status"]["allocation"], "uid-someone-else")
    for obj in case.claims:
        await cluster.put(cache.claims, obj)
    return cluster


def _case_pod(case: Case) -> Obj:
    names = [c["metadata"]["name"] for c in case.claims]
    return {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "containers": [{"name": "main", "image": "pause"}],
            "resourceClaims": [{"name": n, "resourceClaimName": n} for n in names],
        },
    }


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_allocator_table_through_fit(case: Case) -> None:
    """Every case of the allocator's table, asked as "how many pods naming these claims fit": the
    first copy gets the same node and devices as the allocator gives, and none fits where it fails."""
    cluster = await _case_cluster(case)
    answer = whatif(cluster).fit(_case_pod(case), {}, 1)
    node_name = case.node["metadata"]["name"]
    if isinstance(case.expect, list):
        expected = [f"{r['driver']}/{r['pool']}/{r['device']}" for a in case.expect for r in a["devices"]["results"]]
        assert answer["total"] == 1
        assert answer["nodes"] == [{"name": node_name, "count": 1, "devices": [expected]}]
    else:
        assert answer["total"] == 0 and answer["nodes"] == []
        assert [u["name"] for u in answer["unfit"]] == [node_name] and answer["unfit"][0]["reason"]


# --- more questions on the copy ------------------------------------------------------------------


async def test_a_shared_claim_is_allocated_once_and_pins_every_copy() -> None:
    cluster = Cluster()
    await cluster.topology({"a": 2, "b": 2}, pods="3")
    await cluster.put(cluster.cache.claims, claim("shared"))
    answer = whatif(cluster).fit(pod("p", claims=["shared"]), {}, 100)
    assert answer["total"] == 3  # the node's pod limit, not its devices
    assert answer["nodes"] == [{"name": "a", "count": 3, "devices": [[f"{DRIVER}/a/dev-0"]] * 3}]
    assert answer["unfit"] == [{"name": "b", "reason": "claim default/shared: resourceclaim not available on the node"}]


async def test_max_stops_the_answer_and_says_so() -> None:
    cluster = Cluster()
    await cluster.topology({"a": 4, "b": 4})
    answer = whatif(cluster).fit(templated_pod(), {"one-gpu": template()}, 3)
    assert answer["total"] == 3 and [n["name"] for n in answer["nodes"]] == ["a"]
    assert answer["unfit"] == [{"name": "b", "reason": "fits more copies: the answer stops at 3 copies"}]


async def _held_cluster() -> Cluster:
    """Nodes a and b of 2 devices; a pod on b holds both of b's."""
    cluster = Cluster()
    await cluster.topology({"a": 2, "b": 2})
    await cluster.put(
        cluster.cache.claims,
        claim("held", status={"allocation": allocation("b", "dev-0", "dev-1"), "reservedFor": reserved_for(pod("holder"))}),
    )
    await cluster.put(cluster.cache.pods, pod("holder", claims=["held"], nodeName="b"))
    return cluster


async def test_nodes_removed_and_added_and_pods_removed() -> None:
    question = whatif(await _held_cluster())
    question.apply(Changes(remove_nodes=["a"], add_nodes=[(node("c"), [node_slice("c", 1)])]))
    answer = question.fit(templated_pod(), {"one-gpu": template()}, 100)
    assert (answer["total"], [n["name"] for n in answer["nodes"]]) == (1, ["c"])
    assert answer["unfit"] == [{"name": "b", "reason": "claim default/train-whatif-1-gpu, request gpu: every gpu device is taken"}]
    freed = whatif(await _held_cluster())
    freed.apply(Changes(remove_pods=[(NS, "holder")]))
    assert freed.fit(templated_pod(), {"one-gpu": template()}, 100)["total"] == 4  # the holder's claim is deallocated


async def test_drain_plan_moves_the_nodes_pods_in_priority_order() -> None:
    cluster = Cluster()
    await cluster.topology({"a": 2, "b": 1})
    for name, priority in (("low", 1), ("high", 10)):
        body = pod(name, claims=[name], nodeName="a", priority=priority)
        await cluster.put(
            cluster.cache.claims,
            claim(name, status={"allocation": allocation("a", f"dev-{priority % 2}"), "reservedFor": reserved_for(body)}),
        )
        await cluster.put(cluster.cache.pods, body)
    plan = whatif(cluster).drain("a")
    assert plan["node"] == "a" and plan["total"] == 2 and plan["placed"] == 1
    assert plan["pods"][0] == {"pod": "default/high", "node": "b", "devices": [f"{DRIVER}/b/dev-0"]}
    assert plan["pods"][1] == {
        "pod": "default/low",
        "reason": "0/1 nodes fit. 1 node: claim default/low, request gpu: every gpu device is taken.",
        "nodes": {"b": "claim default/low, request gpu: every gpu device is taken"},
    }


# --- the endpoint: answered in a forked copy of the scheduler ----------------------------------------


class Auth(DelegatedAuth):
    """Alice may create pods and get claims in "default", get nodes and list pods; nothing else."""

    def __init__(self) -> None:
        super().__init__(KubeClient("http://127.0.0.1:9", user_agent="test"), Connection("http://127.0.0.1:9"))

    async def authenticate(self, authorization: str | None, certificate: bytes | None) -> User:
        return User("alice", ("system:authenticated",)) if authorization == "Bearer alice" else ANONYMOUS_USER

    async def allowed(self, user: User, **attributes: str) -> tuple[bool, str]:
        granted = {
            ("create", "pods", "default"),
            ("get", "resourceclaims", "default"),
            ("get", "nodes", ""),
            ("list", "pods", ""),
            ("get", "pods", "default"),
        }
        return user.name == "alice" and (attributes["verb"], attributes["resource"], attributes.get("namespace", "")) in granted, ""

    async def create_as(self, user: User, path: str, obj: Obj) -> Obj:
        """The dry run: the pod as given (the API server's own answers are tested in tests/e2e/test_whatif.py)."""
        return {**obj, "metadata": {**obj["metadata"], "uid": "dry-run"}}


async def _server(limits: WhatIfLimits | None = None) -> tuple[ExplainServer, Cluster]:
    cluster = Cluster()
    scheduler = Scheduler(cluster.client)
    cluster.cache = scheduler.cache
    for informer in cluster.cache.informers:
        informer._synced.set()
    await cluster.topology({"a": 2, "b": 3})
    server = ExplainServer(Auth(), whatif=limits)
    server.scheduler = scheduler
    return server, cluster


async def post(
    server: ExplainServer, path: str, body: Any, token: str | None = "alice", method: str = "POST"
) -> tuple[int, dict[str, Any]]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    response = await server.handle(Request(method, path, {}, headers, None, raw))
    return response.status, orjson.loads(response.body)


FIT = "/whatif/namespaces/default/fit"


async def test_the_answer_comes_from_a_copy_and_the_live_cache_is_untouched() -> None:
    server, cluster = await _server()
    pods, claims = len(cluster.cache.pods.keys()), len(cluster.cache.claims.keys())
    code, body = await post(server, FIT, {"pod": templated_pod(), "templates": [template()], "max": 100})
    assert code == 200, body
    assert body["kind"] == "FitAnswer" and body["total"] == 5 and [n["count"] for n in body["nodes"]] == [2, 3]
    assert (len(cluster.cache.pods.keys()), len(cluster.cache.claims.keys())) == (pods, claims)
    assert cluster.cache.allocated_state().devices == set() and cluster.cache.node_pods == {}
    code, body = await post(
        server, FIT, {"pod": templated_pod(), "templates": [template()], "changes": {"addNodes": [{"count": 2, "profile": "gpu"}]}}
    )
    assert code == 200 and body["total"] == 5 + 16 and {n["name"] for n in body["nodes"]} >= {"whatif-node-0", "whatif-node-1"}
    assert cluster.cache.nodes.get("", "whatif-node-0") is None
    code, body = await post(server, "/whatif/nodes/a/drain", {})
    assert code == 200 and body == {
        "kind": "DrainPlan",
        "apiVersion": "explain.dra.example.com/v1",
        "node": "a",
        "total": 0,
        "placed": 0,
        "pods": [],
    }


async def test_callers_and_routes() -> None:
    server, _ = await _server()
    question = {"pod": templated_pod(), "templates": [template()]}
    code, body = await post(server, FIT, question, token=None)
    assert (
        code == 403
        and body["message"]
        == 'pods is forbidden: User "system:anonymous" cannot create resource "pods" in API group "" in the namespace "default"'
    )
    assert (await post(server, "/whatif/namespaces/other/fit", question))[0] == 403
    assert (await post(server, FIT, question, method="GET"))[0] == 405
    assert (await post(server, "/whatif/nope", question))[0] == 404
    code, body = await post(server, "/whatif/nodes/a/drain", {}, token=None)
    assert (
        code == 403
        and body["message"]
        == 'nodes "a" is forbidden: User "system:anonymous" cannot get resource "nodes" in API group "" at the cluster scope'
    )
    server.scheduler = None
    code, body = await post(server, FIT, question)
    assert code == 503 and body["message"] == "this scheduler is not the leader; the leader's URL is on its Lease"


async def test_bad_questions_get_statuses() -> None:
    server, _ = await _server()
    question = {"pod": templated_pod(), "templates": [template()]}
    code, body = await post(server, FIT, b"{nope")
    assert (code, body["reason"]) == (400, "BadRequest") and body["message"].startswith("the request body is not JSON")
    code, body = await post(server, FIT, {**question, "max": 10_001})
    assert (code, body["reason"], body["message"]) == (
        422,
        "Invalid",
        'FitRequest "" is invalid: max: Invalid value: 10001: must be at most 10000 (the scheduler\'s bound)',
    )
    assert body["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "message": "Invalid value: 10001: must be at most 10000 (the scheduler's bound)", "field": "max"}
    ]
    code, body = await post(server, FIT, {**question, "pod": "train"})
    assert (code, body["message"]) == (422, 'FitRequest "" is invalid: pod: Required value')
    code, body = await post(server, FIT, {"pod": templated_pod()})
    assert (code, body["message"]) == (404, 'resourceclaimtemplates.resource.k8s.io "one-gpu" not found')
    code, body = await post(server, FIT, {"pod": pod("p", claims=["nope"])})
    assert (code, body["message"]) == (404, 'resourceclaims.resource.k8s.io "nope" not found')
    code, body = await post(server, FIT, {**question, "changes": {"removeNodes": ["zz"]}})
    assert (code, body["message"]) == (404, 'nodes "zz" not found')
    code, body = await post(server, FIT, {**question, "changes": {"removePods": ["default/zz"]}})
    assert (code, body["message"]) == (404, 'pods "zz" not found')
    code, body = await post(server, FIT, {**question, "changes": {"addNodes": [{"count": 1, "profile": "tpu"}]}})
    assert code == 422 and body["message"].startswith(
        'FitRequest "" is invalid: changes.addNodes[0].profile: Unsupported value: "tpu": supported values: "cpu", "gpu"'
    )
    code, body = await post(server, "/whatif/nodes/zz/drain", {})
    assert (code, body["message"]) == (404, 'nodes "zz" not found')


async def test_a_scheduler_the_api_server_does_not_accept_says_so() -> None:
    """The dry run's 401 is about the scheduler's own credentials, not the caller's: a 500 that says so."""
    server, _ = await _server()

    async def refused(user: User, path: str, obj: Obj) -> Obj:
        raise ApiError(401, "Unauthorized", "Unauthorized")

    server.whatif.auth.create_as = refused  # type: ignore[method-assign]
    code, body = await post(server, FIT, {"pod": templated_pod(), "templates": [template()]})
    assert (code, body["reason"]) == (500, "InternalError")
    assert body["message"].startswith(
        'the scheduler cannot have the API server check the pod as "alice": Unauthorized (the scheduler needs'
    )


async def test_more_questions_than_turns_are_refused_with_429() -> None:
    server, _ = await _server(WhatIfLimits(waiting=0))
    code, body = await post(server, FIT, {"pod": templated_pod(), "templates": [template()]})
    assert (code, body["reason"], body["details"]) == (429, "TooManyRequests", {"retryAfterSeconds": 1})


async def test_a_slow_selector_is_stopped_by_the_answers_deadline() -> None:
    """A selector admission accepts that takes about a tenth of a second per device (five of them): the copy's filter
    timeout is cut to the answer's deadline, so the answer comes and says what stopped it."""
    server, _ = await _server(WhatIfLimits(seconds=0.2))
    slow = template()
    slow["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": "!lists.range(300).all(i, lists.range(300).all(j, i + j >= 0))"}}
    ]
    code, body = await post(server, FIT, {"pod": templated_pod(), "templates": [slow]})
    assert code == 200 and body["total"] == 0
    assert {u["name"] for u in body["unfit"]} == {"a", "b"} and all(
        "operation interrupted" in u["reason"] or "not examined" in u["reason"] for u in body["unfit"]
    ), body


async def _varied_cluster() -> Cluster:
    """250 nodes (more than the cycle's 100 feasible nodes, so its rotating start matters) with 1
    to 6 devices, some tainted, some full of pods."""
    cluster = Cluster()
    await cluster.put(cluster.cache.classes, device_class())
    for i in range(250):
        name = f"n-{i:03d}"
        extra: dict[str, Any] = {"taints": [{"key": "gone", "effect": "NoSchedule"}]} if i % 17 == 0 else {}
        await cluster.put(cluster.cache.nodes, node(name, pods="3" if i % 11 == 0 else "110", **extra))
        await cluster.put(cluster.cache.slices, node_slice(name, 1 + i % 6))
    return cluster


@pytest.mark.parametrize("count", [1, 2])
async def test_remembered_verdicts_place_every_copy_where_the_cycle_would(count: int, monkeypatch: pytest.MonkeyPatch) -> None:
    replayed = []
    original = _Verdicts.replay

    def counting(self: _Verdicts, cycle: SchedulingCycle, pod: Obj) -> Any:
        placement = original(self, cycle, pod)
        replayed.append(placement is not None)
        return placement

    monkeypatch.setattr(_Verdicts, "replay", counting)
    remembered = whatif(await _varied_cluster()).fit(templated_pod(), {"one-gpu": template(count=count)}, 10_000)
    monkeypatch.setattr(_Verdicts, "replay", lambda *_args: None)
    cycled = whatif(await _varied_cluster()).fit(templated_pod(), {"one-gpu": template(count=count)}, 10_000)
    assert remembered == cycled
    assert remembered["total"] > 100 and sum(replayed) > remembered["total"] // 2  # most copies were replayed
    tainted = {f"n-{i:03d}" for i in range(0, 250, 17)}
    assert {u["name"] for u in remembered["unfit"] if "untolerated taint" in u["reason"]} == tainted


async def test_questions_asked_together_share_one_fork_and_each_starts_from_the_same_state(monkeypatch: pytest.MonkeyPatch) -> None:
    server, _ = await _server()
    forks = []
    fork = os.fork

    def counting_fork() -> int:
        pid = fork()
        if pid:
            forks.append(pid)  # only the live process's own forks are counted here
        return pid

    monkeypatch.setattr(os, "fork", counting_fork)
    questions = [{"pod": templated_pod(), "templates": [template()], "max": 100 + i} for i in range(4)]
    answers = await asyncio.gather(*(post(server, FIT, q) for q in questions))
    assert [(code, body["total"]) for code, body in answers] == [(200, 5)] * 4
    assert len(forks) < 4


async def test_a_question_whose_deadline_passes_while_it_waits_for_a_turn_gets_504() -> None:
    """Three questions at once, each slow enough to use its whole deadline, answered one at a
    time: a question's deadline counts from when it was asked, so the ones still waiting when
    theirs passes are told so with 504, not answered long after it. (A node of 100 devices takes
    each question about ten seconds of CPU, far past its deadline, while the deadline leaves a
    loaded machine seconds to start the first one.)"""
    server, cluster = await _server(WhatIfLimits(seconds=3.0, parallel=1))
    await cluster.topology({"c": 100})
    slow = template()
    slow["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": "!lists.range(300).all(i, lists.range(300).all(j, i + j >= 0))"}}
    ]
    answers = await asyncio.gather(*(post(server, FIT, {"pod": templated_pod(), "templates": [slow]}) for _ in range(3)))
    assert sorted(code for code, _ in answers) == [200, 504, 504], answers
    late = [body for code, body in answers if code == 504]
    assert all(body["reason"] == "Timeout" for body in late)
    assert all(
        re.fullmatch(
            r"the what-if question waited [0-9.]+s for its turn \(other questions were being answered\)"
            r" and its deadline \(3s\) passed before it started; ask again later",
            body["message"],
        )
        for body in late
    ), late


async def test_each_caller_of_a_batch_gets_its_answer_when_it_is_there() -> None:
    """A quick question asked beside a slow one (answered by the same fork) is answered at once,
    not when the slow one is (a deadline no loaded machine reaches: the order is what counts)."""
    server, _ = await _server(WhatIfLimits(seconds=60.0, parallel=2))
    slow = template()
    slow["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": "!lists.range(300).all(i, lists.range(300).all(j, i + j >= 0))"}}
    ]
    slow_call = asyncio.ensure_future(post(server, FIT, {"pod": templated_pod(), "templates": [slow]}))
    quick_call = asyncio.ensure_future(post(server, FIT, {"pod": templated_pod(), "templates": [template()]}))
    done, _ = await asyncio.wait([slow_call, quick_call], return_when=asyncio.FIRST_COMPLETED)
    assert done == {quick_call} and quick_call.result()[0] == 200 and quick_call.result()[1]["total"] == 5
    code, body = await slow_call
    assert code == 200 and body["total"] == 0


async def test_an_observer_takes_the_pod_as_sent_and_makes_no_dry_run() -> None:
    cluster = Cluster()
    observer = Observer(cluster.client)
    cluster.cache = observer.cache
    for informer in cluster.cache.informers:
        informer._synced.set()
    await cluster.topology({"a": 2, "b": 3})
    auth = Auth()

    async def no_dry_run(user: User, path: str, obj: Obj) -> Obj:
        raise AssertionError(f"the observer wrote (a dry run of {path})")

    auth.create_as = no_dry_run  # type: ignore[method-assign]
    server = ExplainServer(auth, check_pods=False)
    server.scheduler = observer
    code, body = await post(server, FIT, {"pod": templated_pod(), "templates": [template()]})
    assert code == 200 and body["total"] == 5, body
    broken = templated_pod()
    broken["spec"]["containers"] = "main"
    code, body = await post(server, FIT, {"pod": broken, "templates": [template()]})
    assert (code, body["message"]) == (422, 'Pod "" is invalid: spec.containers: Invalid value: "main": must be a list of objects')
    code, body = await post(server, FIT, {"pod": {**broken, "spec": {}}, "templates": [template()]})
    assert (code, body["message"]) == (422, 'Pod "" is invalid: spec.containers: Required value')


async def test_nodes_the_explanation_had_no_time_for_are_called_not_examined(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the explanation of the copy that did not fit stops before some nodes, those nodes are
    "not examined", not given the cycle's summary as if it were their own reason."""
    cluster = Cluster()
    await cluster.topology({"a": 2, "b": 3, "c": 1})
    stopped = "not examined: the explanation stops after 0.2s"

    def explained(_self: Any, _pod: Obj) -> dict[str, Any]:
        return {
            "state": "Unschedulable",
            "message": "0/3 nodes are available",
            "nodes": {"total": 3, "examined": 1, "fit": 0},
            "groups": [
                {"count": 1, "nodes": ["a"], "reasons": [{"kind": "Devices", "message": "not enough devices"}]},
                {"count": 2, "nodes": [], "reasons": [{"kind": NOT_EXAMINED, "message": stopped}]},
            ],
        }

    monkeypatch.setattr(Explainer, "explain", explained)
    answer = whatif(cluster).fit(templated_pod(), {"one-gpu": template(count=4)}, 10)
    assert answer["total"] == 0
    assert {u["name"]: u["reason"] for u in answer["unfit"]} == {"a": "not enough devices", "b": stopped, "c": stopped}
