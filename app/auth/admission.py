"""Admission: the write a request makes, checked against who makes it and the policies in force.

``AdmissionRequest`` is what the REST layer hands over for each create, update and delete
(including each object a deletecollection removes); a plugin raises an ``ApiError`` to refuse
(NodeRestriction a 403, a ValidatingAdmissionPolicy what its validation says), and may add
warnings for the response and annotations for the request's audit event.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from app.auth.user import UserInfo
from kube.errors import ApiError, forbidden_object

CREATE = "CREATE"
UPDATE = "UPDATE"
DELETE = "DELETE"


@dataclass(slots=True)
class AdmissionRequest:
    """One write as the admission plugins see it. (Not frozen, though never changed: a frozen
    dataclass costs microseconds per write to build.)"""

    operation: str  # CREATE, UPDATE or DELETE
    user: UserInfo
    group: str
    resource: str  # the plural
    subresource: str
    namespace: str
    name: str
    obj: dict[str, Any] | None  # the object as it will be stored (None on DELETE)
    old: dict[str, Any] | None  # the stored object (None on CREATE)
    version: str = ""  # the API version the request is made in
    kind: str = ""  # the kind of the request's object (the subresource's own, where it has one)
    dry_run: bool = False
    # The operation's options as an object (CreateOptions, UpdateOptions, PatchOptions,
    # DeleteOptions), built when a plugin asks for it.
    options: Callable[[], dict[str, Any]] | None = None
    # Where warnings for the response and annotations for the audit event go (the requester).
    recorder: Recorder | None = None

    def warn(self, text: str) -> None:
        """A Warning header for the response."""
        if self.recorder is not None:
            self.recorder.warn(text)

    def annotate(self, key: str, value: str) -> None:
        """An annotation of the request's audit event."""
        if self.recorder is not None:
            self.recorder.annotate(key, value)

    def forbidden(self, why: str) -> ApiError:
        """``<resource> "<name>" is forbidden: <why>``: upstream's admission refusal."""
        name = self.name or str(((self.obj or {}).get("metadata") or {}).get("name") or "")
        qualified = f"{self.resource}.{self.group}" if self.group else self.resource
        return forbidden_object(qualified, name, self.group, self.resource, why)


class Recorder(Protocol):
    def warn(self, text: str) -> None: ...

    def annotate(self, key: str, value: str) -> None: ...


class AdmissionPlugin(Protocol):
    def admit(self, request: AdmissionRequest) -> None:
        """Raise ApiError to refuse the write."""
