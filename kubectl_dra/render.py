"""Text for people: kubectl-style tables and the explanation of a pod."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kube.timeutil import human_age
from kubectl_dra.inventory import ClaimRow, DeviceRow, key_attributes

NONE = "<none>"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, three spaces apart, as ``kubectl get`` prints them."""
    cells = [list(headers), *[[c or NONE for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["   ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells]
    return "\n".join(lines)


def devices_table(rows: Sequence[DeviceRow]) -> str:
    headers = ("NODE", "DRIVER", "POOL", "DEVICE", "STATE", "ATTRIBUTES", "CAPACITY", "ALLOCATED-TO", "TAINTS", "HEALTH")
    body = []
    for r in rows:
        owners = [f"{c} ({', '.join(p.split('/', 1)[1] for p in r.pods)})" if r.pods and i == 0 else c for i, c in enumerate(r.claims)]
        body.append((
            r.node or f"<{r.nodes}>", r.driver, r.pool, r.device, r.state, key_attributes(r.attributes),
            ",".join(f"{k}={v}" for k, v in r.capacity.items()), ",".join(owners), ",".join(r.taints), r.health,
        ))  # fmt: skip
    return table(headers, body)


def claims_table(rows: Sequence[ClaimRow], all_namespaces: bool) -> str:
    headers = ("NAME", "STATE", "DEVICES", "RESERVED-FOR", "NODE", "AGE")
    body = [
        (r.name, r.state, ",".join(r.devices), ",".join(x.split("/", 1)[-1] for x in r.reserved_for), r.node, human_age(r.created))
        for r in rows
    ]
    if all_namespaces:
        return table(("NAMESPACE", *headers), [(r.namespace, *b) for r, b in zip(rows, body, strict=True)])
    return table(headers, body)


def duration(seconds: float) -> str:
    """``4ms``, ``1.25s``; under a millisecond says so (the scheduler rounds to milliseconds)."""
    if seconds < 0.001:
        return "under 1ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    return f"{seconds:.3g}s"


def _reason_lines(reason: dict[str, Any], indent: str) -> list[str]:
    lines = [f"{indent}{reason.get('message', '')}"]
    for detail in reason.get("details") or []:
        lines.append(f"{indent}    {detail}")
    return lines


def explanation(doc: dict[str, Any]) -> str:
    """A pod's explanation as the scheduler answered it (``kubectl dra why``)."""
    lines = [f"Pod {doc.get('pod', '')}: {doc.get('state', '')}", f"  {doc.get('message', '')}"]
    failures = doc.get("kubeletEvents") or []
    if failures:
        last = failures[0]
        times = sum(int(f.get("count") or 1) for f in failures)
        lines.append(
            f"  The kubelet{' on ' + doc['node'] if doc.get('node') else ''} cannot start it: {last.get('reason', '')}"
            f" ({'once' if times == 1 else f'{times} times'}, last {human_age(last.get('lastTimestamp'))} ago):"
        )
        lines.append(f"    {last.get('message', '')}")
    if doc.get("schedulerMessage"):
        lines.append(f"  The scheduler said: {doc['schedulerMessage']}")
    if doc.get("note"):
        lines.append(f"  Note: {doc['note']}")
    if doc.get("waitingFor"):
        lines.append(f"  Waiting for: {', '.join(doc['waitingFor'])}")
    claims = doc.get("claims") or []
    if claims:
        lines.append("")
        lines.append("Claims:")
        for claim in claims:
            state = "allocated: " + ", ".join(claim.get("devices") or []) if claim.get("allocated") else "not allocated"
            lines.append(f"  {claim['name']} (pod entry {claim.get('entry') or NONE}): {state}")
            for request in claim.get("requests") or []:
                amount = "all devices" if request.get("allocationMode") == "All" else f"{request.get('count', 1)} x"
                text = f"    request {request['name']}: {amount} {request.get('deviceClassName', '')}"
                if request.get("selectors"):
                    text += " where " + " && ".join(f"`{s}`" for s in request["selectors"])
                if request.get("adminAccess"):
                    text += " (admin access)"
                lines.append(text)
    nodes = doc.get("nodes")
    if nodes and doc.get("groups") is not None:
        lines.append("")
        lines.append(
            f"Nodes: {nodes.get('fit', 0)} of {nodes.get('total', 0)} fit, {nodes.get('examined', 0)} examined in {duration(doc.get('elapsedSeconds') or 0)}"
        )
        if nodes.get("fitting"):
            lines.append(f"  fit now: {', '.join(nodes['fitting'])}")
        for group in doc.get("groups") or []:
            count = group.get("count", 0)
            names = ", ".join(group.get("nodes") or [])
            more = "" if len(group.get("nodes") or []) >= count else ", ..."
            lines.append(f"  {count} {'node' if count == 1 else 'nodes'}" + (f" ({names}{more})" if names else "") + ":")
            for reason in group.get("reasons") or []:
                lines.extend(_reason_lines(reason, "    "))
                for alternative in reason.get("alternatives") or []:
                    lines.extend(_reason_lines(alternative, "      - "))
        more_groups = doc.get("moreGroups")
        if more_groups:
            lines.append(f"  ... {more_groups['nodes']} more nodes in {more_groups['groups']} more groups")
    return "\n".join(lines)
