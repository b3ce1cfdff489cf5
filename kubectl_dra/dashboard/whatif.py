"""The dashboard's "What if" panel, server side: ``GET /api/whatif`` asks the scheduler how many
copies of a pod fit (:func:`kubectl_dra.fit.ask_fit`, as the user: its templates read, then the
scheduler's what-if, which has the pod dry-run created as the user), and answers ``{"total", "nodes", "unfit"}``.

Query: ``pod`` (a Pod as YAML or JSON, pasted) or ``from=NAMESPACE/NAME`` (a pod that exists,
e.g. a pending one picked from the list), and ``max``. Nothing is created: the dashboard still
only reads (a GET, like every other route).
"""

from __future__ import annotations

from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from kube.client import KubeClient, resource_path
from kube.errors import ApiError
from kubectl_dra import fit
from kubectl_dra.session import CommandError, Session, scheduler_url


def _status(code: int, reason: str, message: str) -> JSONResponse:
    return JSONResponse(ApiError(code, reason, message).status(), status_code=code)


async def _pod(client: KubeClient, query: Any, namespace: str) -> dict[str, Any]:
    picked = query.get("from", "")
    if picked:
        ns, slash, name = picked.partition("/")
        if not slash or not ns or not name:
            raise fit.FitError(f"from: expected NAMESPACE/NAME, not {picked!r}")
        existing = await client.get(resource_path("", "v1", "pods", ns, name))
        metadata = {k: v for k, v in (existing.get("metadata") or {}).items() if k in ("name", "namespace", "labels", "annotations")}
        spec = {k: v for k, v in (existing.get("spec") or {}).items() if k != "nodeName"}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    text = query.get("pod", "")
    if not text.strip():
        raise fit.FitError("paste a Pod (YAML or JSON) or pick a pending pod")
    pod = fit.load_pod(text, "the pasted pod")
    pod.setdefault("metadata", {}).setdefault("namespace", namespace)
    return pod


async def whatif(request: Request, client: KubeClient, session: Session | None) -> Response:
    """``GET /api/whatif``: the scheduler's what-if answer for the pod asked about."""
    if session is None:
        return _status(503, "ServiceUnavailable", "what-if questions need the scheduler")
    query = request.query_params
    max_text = query.get("max", "")
    if max_text and (not max_text.isdigit() or int(max_text) < 1):
        return _status(400, "BadRequest", f"max: must be a whole number of at least 1, not {max_text!r}")
    try:
        pod = await _pod(client, query, session.namespace)
        namespace = pod["metadata"].get("namespace") or session.namespace
        url = await scheduler_url(session, client)
        async with session.scheduler_client(url) as scheduler:
            answer = await fit.ask_fit(
                client, scheduler, url, namespace, pod, max_copies=int(max_text) if max_text else None, without=[], add_nodes=0, profile=""
            )
        return JSONResponse(answer)
    except ApiError as exc:
        return JSONResponse(exc.status(), status_code=exc.code)
    except fit.FitError as exc:
        return _status(400, "BadRequest", str(exc))
    except CommandError as exc:
        return _status(503, "ServiceUnavailable", str(exc))
    except (httpx.TransportError, OSError) as exc:
        return _status(503, "ServiceUnavailable", f"cannot reach the API server: {exc or type(exc).__name__}")
