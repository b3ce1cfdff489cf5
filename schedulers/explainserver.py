"""The scheduler's explanation endpoint, served by the process that holds the caches.

``GET /explain/namespaces/NS/pods/NAME`` answers :class:`schedulers.explain.Explainer`'s
explanation of the pod as JSON (kind ``PodExplanation``). Query parameters: ``ifUngated=true``
explains a pod held by scheduling gates as if they were removed now (the answer keeps ``gates``),
``nodes=all`` names every node (each fitting one, and every node of each group) rather than a few. Callers are authenticated and
authorized by the API server (:mod:`kube.delegation`): whoever may ``get`` the pod may have it
explained; claims of other namespaces are named only to those who may list claims everywhere.
Errors are Kubernetes ``Status`` objects, so clients report them as they report the API server's.

Only the leader has a scheduler (and caches); a standby answers 503. The leader writes the URL
it serves on into its Lease (``EXPLAIN_URL_ANNOTATION``), which is how ``kubectl dra`` finds it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from kube.delegation import DelegatedAuth, Unauthenticated, User, forbidden_message
from kube.dra.explanations import EXPLAIN_URL_ANNOTATION, EXPLANATION_API_VERSION
from kube.errors import ApiError
from kube.health import HEALTH_PATHS
from kube.httpserve import Request, Response
from schedulers.explain import Explainer, ExplainLimits
from schedulers.whatifserver import PREFIX as WHATIF_PREFIX
from schedulers.whatifserver import Scheduler, WhatIfLimits, WhatIfServer

_POD_PATH = re.compile(r"^/explain/namespaces/([^/]+)/pods/([^/]+)$")


def status(code: int, reason: str, message: str, **details: Any) -> Response:
    """A Kubernetes Status answer."""
    return Response.json(code, ApiError(code, reason, message, details or None).status())


class ExplainServer:
    """Routes explanation requests to the scheduler of the current leadership term (``scheduler``)."""

    def __init__(self, auth: DelegatedAuth, limits: ExplainLimits | None = None, whatif: WhatIfLimits | None = None, *, check_pods: bool = True) -> None:
        self.auth = auth
        self.limits = limits or ExplainLimits()
        self.scheduler: Scheduler | None = None
        self.whatif = WhatIfServer(auth, whatif, check_pods=check_pods)

    async def handle(self, request: Request) -> Response:
        if request.path in HEALTH_PATHS:
            return Response(200, b"ok")
        if request.path.startswith(WHATIF_PREFIX):  # what-if capacity (schedulers.whatifserver)
            return await self.whatif.handle(request, self.scheduler)
        match = _POD_PATH.match(request.path)
        if match is None:
            return status(404, "NotFound", "the server could not find the requested resource")
        if request.method != "GET":
            return status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        namespace, name = match.groups()
        try:
            user = await self.auth.authenticate(request.headers.get("authorization"), request.client_certificate)
            allowed, reason = await self.auth.allowed(user, verb="get", resource="pods", namespace=namespace, name=name)
        except Unauthenticated:
            return status(401, "Unauthorized", "Unauthorized")
        except (ApiError, OSError) as exc:
            return status(503, "ServiceUnavailable", f"cannot check the caller with the API server: {exc}")
        if not allowed:
            return status(403, "Forbidden", forbidden_message(user, "get", "pods", namespace=namespace, name=name, reason=reason), name=name, kind="pods")
        scheduler = self.scheduler
        if scheduler is None:
            return status(503, "ServiceUnavailable", "this scheduler is not the leader; the leader's URL is on its Lease")
        if not all(informer.has_synced for informer in scheduler.cache.informers):
            return status(503, "ServiceUnavailable", "the scheduler's caches are not synced yet")
        pod = scheduler.cache.pods.get(namespace, name)
        if pod is None:
            return status(404, "NotFound", f'pods "{name}" not found (the scheduler has not seen it)', name=name, kind="pods")
        gates = [g.get("name", "") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
        if gates and request.query.get("ifUngated") == "true":
            pod = {**pod, "spec": {**pod["spec"], "schedulingGates": []}}
        limits = self.limits
        if request.query.get("nodes") == "all":
            limits = replace(limits, nodes_per_group=len(scheduler.cache.node_names()) or 1, groups=len(scheduler.cache.node_names()) or 1)
        everywhere = await self._sees_all_claims(user)
        explainer = Explainer(scheduler.cache, scheduler.cycle, limits)
        result = await explainer.explain_async(pod, can_see_namespace=lambda ns: everywhere or ns == namespace)
        if gates and request.query.get("ifUngated") == "true":
            result["gates"] = gates
        return Response.json(200, {"kind": "PodExplanation", "apiVersion": EXPLANATION_API_VERSION, **result})


    async def _sees_all_claims(self, user: User) -> bool:
        try:
            allowed, _ = await self.auth.allowed(user, verb="list", resource="resourceclaims", group="resource.k8s.io")
        except (ApiError, OSError):
            return False
        return allowed


__all__ = ["EXPLAIN_URL_ANNOTATION", "ExplainServer", "status"]
