"""``kubectl dra fit`` and ``kubectl dra drain-plan``: what-if capacity, answered by the scheduler.

``fit -f POD.yaml`` asks how many more pods like this one fit, on which nodes and with which
devices; ``drain-plan NODE`` where the pods with claims on a node would go if it went. Both are
answered by the leading scheduler (``/whatif/...`` beside its explanations) from a copy of its
caches: nothing is created or reserved.

The ResourceClaimTemplates the pod names are read (as you) and sent along; the scheduler has the
API server check the pod (a dry run create, as you), so a pod that does not validate gets the
server's own 422. The dashboard's "What if" panel asks through :func:`ask_fit` too.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import httpx
import yaml

from kube.client import KubeClient, resource_path
from kube.dra.explanations import EXPLANATION_API_VERSION
from kube.errors import ApiError
from kube.objects import Obj

RESOURCE = "resource.k8s.io"
FIT_KEYS = ("total", "nodes", "unfit")
SHOWN_NODES = 5  # node names listed per reason


def fit_path(namespace: str) -> str:
    return f"/whatif/namespaces/{namespace}/fit"


def drain_path(node: str) -> str:
    return f"/whatif/nodes/{node}/drain"


class FitError(Exception):
    """A problem with the command's input, in kubectl's words."""


def load_pod(text: str, source: str) -> Obj:
    """The one Pod in a YAML or JSON document."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise FitError(f"error parsing {source}: {exc}") from None
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise FitError(f"{source}: expected one Pod, found {len(documents)} documents")
    pod = documents[0]
    if pod.get("kind") != "Pod":
        raise FitError(f"{source}: kubectl dra fit takes a Pod, not {pod.get('kind') or 'an object without kind'}")
    return pod


def read_pod(filename: str) -> Obj:
    if filename == "-":
        return load_pod(sys.stdin.read(), "stdin")
    try:
        with open(filename, encoding="utf-8") as handle:
            return load_pod(handle.read(), filename)
    except OSError as exc:
        raise FitError(f'the path "{filename}" does not exist' if isinstance(exc, FileNotFoundError) else str(exc)) from None


async def templates_of(client: KubeClient, namespace: str, pod: Obj) -> list[Obj]:
    """The ResourceClaimTemplates the pod names that exist, read as the caller (the scheduler
    says which are missing, after the pod itself is checked)."""
    spec = pod.get("spec")
    entries = spec.get("resourceClaims") if isinstance(spec, dict) else None
    names = dict.fromkeys(
        e["resourceClaimTemplateName"] for e in entries or [] if isinstance(e, dict) and isinstance(e.get("resourceClaimTemplateName"), str)
    ) if isinstance(entries, list) else {}  # fmt: skip
    found = []
    for name in names:
        try:
            found.append(await client.get(resource_path(RESOURCE, "v1", "resourceclaimtemplates", namespace, name)))
        except ApiError as exc:
            if exc.code != 404:
                raise
    return found


def fit_request(pod: Obj, templates: Sequence[Obj], *, max_copies: int | None, without: Sequence[str], add_nodes: int, profile: str) -> Obj:
    body: Obj = {"kind": "FitRequest", "apiVersion": EXPLANATION_API_VERSION, "pod": pod, "templates": list(templates)}
    if max_copies is not None:
        body["max"] = max_copies
    changes: Obj = {}
    if without:
        changes["removeNodes"] = list(without)
    if add_nodes:
        changes["addNodes"] = [{"count": add_nodes, "profile": profile}]
    if changes:
        body["changes"] = changes
    return body


async def ask(scheduler: KubeClient, url: str, path: str, body: Obj) -> Obj:
    try:
        return await scheduler.post_raw(path, body)
    except (httpx.TransportError, OSError) as exc:
        raise FitError(f"Unable to connect to the scheduler at {url}: {exc or type(exc).__name__}") from None


def fit_answer(document: Obj) -> Obj:
    """The answer in its documented shape: ``{"total", "nodes", "unfit"}``."""
    return {key: document.get(key, 0 if key == "total" else []) for key in FIT_KEYS}


# --- text ---


def _device_names(devices: Sequence[str]) -> str:
    return ",".join(d.rsplit("/", 1)[-1] for d in devices) or "-"


def fit_text(answer: Obj) -> str:
    """A table per node (copies, devices), the total, and the reasons for the other nodes."""
    from kubectl_dra.render import table

    lines = []
    nodes = answer.get("nodes") or []
    if nodes:
        rows = [(n["name"], str(n["count"]), " ".join(_device_names(copy) for copy in n.get("devices") or [])) for n in nodes]
        lines.append(table(("NODE", "COPIES", "DEVICES (one group per copy)"), rows))
    total = answer.get("total", 0)
    lines.append(f"Total: {total} {'copy fits' if total == 1 else 'copies fit'} on {len(nodes)} {'node' if len(nodes) == 1 else 'nodes'}.")
    unfit = answer.get("unfit") or []
    if unfit:
        by_reason: dict[str, list[str]] = {}
        for item in unfit:
            by_reason.setdefault(item.get("reason", ""), []).append(item.get("name", ""))
        lines.append(f"{len(unfit)} {'node takes' if len(unfit) == 1 else 'nodes take'} none:")
        for reason, names in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            shown = ", ".join(names[:SHOWN_NODES]) + (f" (+{len(names) - SHOWN_NODES} more)" if len(names) > SHOWN_NODES else "")
            lines.append(f"  {len(names)} {'node' if len(names) == 1 else 'nodes'} ({shown}): {reason}")
    return "\n".join(lines)


def drain_text(plan: Obj) -> str:
    from kubectl_dra.render import table

    pods = plan.get("pods") or []
    if not pods:
        return f"No pods with resource claims on node {plan.get('node', '')}."
    rows = [
        (p["pod"], p.get("node") or "<none>", _device_names(p.get("devices") or []) if p.get("node") else p.get("reason", "")) for p in pods
    ]
    placed = plan.get("placed", 0)
    summary = f"{placed} of {len(pods)} {'pod' if len(pods) == 1 else 'pods'} with claims would be placed elsewhere if node {plan.get('node', '')} went now"
    return table(("POD", "WOULD GO TO", "DEVICES / WHY NOT"), rows) + f"\n{summary}."


# --- the commands (registered in kubectl_dra.cli) ---


def add_arguments(fit: argparse.ArgumentParser, drain: argparse.ArgumentParser) -> None:
    fit.add_argument("-f", "--filename", required=True, help="the Pod (YAML or JSON; - for stdin)")
    fit.add_argument("--max", type=_positive, default=None, help="copies to try at most (default and bound: the scheduler's)")
    fit.add_argument("--without-node", action="append", default=[], metavar="NAME", help="as if this node were gone (repeatable)")
    fit.add_argument("--add-nodes", type=_positive, default=0, metavar="N", help="as if N nodes with --profile were added")
    fit.add_argument("--profile", default="", help="the kubelet simulator's device profile of the added nodes (gpu, nic, ...)")
    fit.add_argument("-o", "--output", metavar="json|yaml", help="json or yaml (default: text)")
    drain.add_argument("node", metavar="NODE", help="the node that would go")
    drain.add_argument("-o", "--output", metavar="json|yaml", help="json or yaml (default: text)")


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return int(text)


async def ask_fit(client: KubeClient, scheduler: KubeClient, url: str, namespace: str, pod: Obj, **changes: Any) -> Obj:
    """Read the pod's templates, ask the scheduler; the answer's three keys."""
    templates = await templates_of(client, namespace, pod)
    document = await ask(scheduler, url, fit_path(namespace), fit_request(pod, templates, **changes))
    return fit_answer(document)


__all__ = [
    "FitError",
    "add_arguments",
    "ask",
    "ask_fit",
    "drain_path",
    "drain_text",
    "fit_answer",
    "fit_path",
    "fit_text",
    "load_pod",
    "read_pod",
]
