"""The audit log: one JSON line per request at the Metadata level (who, what, on which object,
with what answer), as kube-apiserver writes to ``--audit-log-path``."""

from __future__ import annotations

import datetime
import threading
from typing import IO, Any

import orjson

from app.auth.attributes import Attributes
from app.auth.user import UserInfo


def _micro_time(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class AuditLog:
    """Appends events to a file ("-" for standard output), one line each."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        if path == "-":
            import sys

            self._out: IO[bytes] = sys.stdout.buffer
        else:
            self._out = open(path, "ab", buffering=0)  # noqa: SIM115 - lives as long as the server

    def record(
        self,
        *,
        audit_id: str,
        request_uri: str,
        attrs: Attributes | None,
        user: UserInfo | None,
        impersonated: UserInfo | None,
        impersonation_constraint: str = "",
        source_ip: str,
        user_agent: str,
        code: int,
        received: float,
        finished: float,
        decision: str = "",
        reason: str = "",
        annotations: dict[str, str] | None = None,
    ) -> None:
        event: dict[str, Any] = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": audit_id,
            "stage": "ResponseComplete",
            "requestURI": request_uri,
            "verb": attrs.verb if attrs is not None else "",
            "user": user.to_api() if user is not None else {},
        }
        if impersonated is not None:
            event["impersonatedUser"] = impersonated.to_api()
        if impersonation_constraint:
            event["authenticationMetadata"] = {"impersonationConstraint": impersonation_constraint}
        if source_ip:
            event["sourceIPs"] = [source_ip]
        if user_agent:
            event["userAgent"] = user_agent
        if attrs is not None and attrs.resource_request:
            ref: dict[str, str] = {"resource": attrs.resource}
            if attrs.namespace:
                ref["namespace"] = attrs.namespace
            if attrs.name:
                ref["name"] = attrs.name
            ref["apiGroup"] = attrs.api_group
            ref["apiVersion"] = attrs.api_version
            if attrs.subresource:
                ref["subresource"] = attrs.subresource
            event["objectRef"] = ref
        event["responseStatus"] = {"metadata": {}, "code": code}
        event["requestReceivedTimestamp"] = _micro_time(received)
        event["stageTimestamp"] = _micro_time(finished)
        if decision or annotations:
            # Authorization's decision, then what admission added (policies' audit annotations).
            noted = {"authorization.k8s.io/decision": decision, "authorization.k8s.io/reason": reason} if decision else {}
            event["annotations"] = {**noted, **(annotations or {})}
        line = orjson.dumps(event) + b"\n"
        with self._lock:
            self._out.write(line)

    def close(self) -> None:
        if self.path != "-":
            self._out.close()
