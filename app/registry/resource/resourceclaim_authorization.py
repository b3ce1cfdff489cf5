"""Who may change which part of a claim's status (DRAResourceClaimGranularStatusAuthorization):
``status.allocation`` and ``status.reservedFor`` take the ``resourceclaims/binding`` permission;
each driver's ``status.devices`` entries take a node-aware verb on ``resourceclaims/driver``
with the driver's name: ``associated-node:<verb>`` for a service account whose token names the
node the claim is allocated on, ``arbitrary-node:<verb>`` for anyone."""

from __future__ import annotations

from typing import Any

from app.registry.base import Obj, RequestContext
from app.registry.objectmeta import dns1123_subdomain_problems
from app.registry.resource.resourceclaim_validation import device_id
from kube.errors import FieldError, forbidden
from kube.features import Gate

GROUP = "resource.k8s.io"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
ASSOCIATED_NODE = "associated-node:"
ARBITRARY_NODE = "arbitrary-node:"


def _status(obj: Obj) -> dict[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, dict) else {}


def allocated_node(allocation: Any) -> str:
    """The one node an allocation is for, when its node selector names exactly one by name."""
    if not isinstance(allocation, dict):
        return ""
    terms = (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    if len(terms) != 1 or not isinstance(terms[0], dict):
        return ""
    term = terms[0]
    fields = term.get("matchFields") or []
    if term.get("matchExpressions") or len(fields) != 1:
        return ""
    field = fields[0]
    values = field.get("values") or []
    if field.get("key") != "metadata.name" or field.get("operator") != "In" or len(values) != 1:
        return ""
    return str(values[0])


def _on_allocated_node(user: Any, node: str) -> bool:
    if not node or not user.name.startswith(SERVICE_ACCOUNT_PREFIX) or len(user.name.split(":")) != 4:
        return False
    names: tuple[str, ...] = tuple(user.extra.get(NODE_NAME_EXTRA) or ())
    return len(names) == 1 and not dns1123_subdomain_problems(names[0]) and names[0] == node


def changed_drivers(new: Obj, old: Obj) -> list[str]:
    """Drivers whose status.devices entries this update adds, changes or removes; entries that go
    with their deallocated devices do not count (the binding permission covers those)."""
    new_status, old_status = _status(new), _status(old)
    new_ids = {device_id(r) for r in ((new_status.get("allocation") or {}).get("devices") or {}).get("results") or [] if isinstance(r, dict)}
    old_ids = {device_id(r) for r in ((old_status.get("allocation") or {}).get("devices") or {}).get("results") or [] if isinstance(r, dict)}
    before = {
        device_id(d): d
        for d in old_status.get("devices") or []
        if isinstance(d, dict) and not (device_id(d) in old_ids and device_id(d) not in new_ids)
    }
    drivers: set[str] = set()
    for entry in new_status.get("devices") or []:
        if not isinstance(entry, dict):
            continue
        key = device_id(entry)
        if before.pop(key, None) != entry:
            drivers.add(str(entry.get("driver") or ""))
    drivers.update(str(d.get("driver") or "") for d in before.values())
    return sorted(drivers)


def granular_status_errors(new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
    """The Forbidden field errors of a status write the requester lacks the permissions for."""
    requester = ctx.requester
    if requester is None or not ctx.feature_gates.enabled(Gate.DRAResourceClaimGranularStatusAuthorization):
        return []
    verb = requester.attributes.verb
    new_status, old_status = _status(new), _status(old)
    errs: list[FieldError] = []
    if new_status.get("allocation") != old_status.get("allocation") or new_status.get("reservedFor") != old_status.get("reservedFor"):
        denied = requester.authorize(verb, GROUP, "resourceclaims", "binding")
        if denied is not None:
            errs.append(
                forbidden("status", f'changing status.allocation or status.reservedFor requires resource="resourceclaims/binding", verb="{verb}" permission: {denied}')
            )
    drivers = changed_drivers(new, old)
    if not drivers:
        return errs
    namespace = new["metadata"].get("namespace", "")
    verbs = [ARBITRARY_NODE + verb]
    if _on_allocated_node(requester.user, allocated_node(new_status.get("allocation"))):
        verbs.insert(0, ASSOCIATED_NODE + verb)
    for driver in drivers:
        first_denial = None
        for candidate in verbs:
            denied = requester.authorize(candidate, GROUP, "resourceclaims", "driver", namespace, driver)
            if denied is None:
                first_denial = None
                break
            first_denial = first_denial or denied
        if first_denial is not None:
            listed = "[" + " ".join(verbs) + "]"
            errs.append(forbidden("status.devices", f'changing status.devices requires resource="resourceclaims/driver", verb="{listed}" permission: {first_denial}'))
    return errs
