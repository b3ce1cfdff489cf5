"""Admission by identity: the write a request makes, checked against who makes it.

``AdmissionRequest`` is what the REST layer hands over for each create, update and delete
(including each object a deletecollection removes); a plugin raises a 403 ``ApiError`` to refuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from app.auth.user import UserInfo
from kube.errors import ApiError, forbidden_object

CREATE = "CREATE"
UPDATE = "UPDATE"
DELETE = "DELETE"


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    operation: str  # CREATE, UPDATE or DELETE
    user: UserInfo
    group: str
    resource: str  # the plural
    subresource: str
    namespace: str
    name: str
    obj: dict[str, Any] | None  # the object as it will be stored (None on DELETE)
    old: dict[str, Any] | None  # the stored object (None on CREATE)

    def forbidden(self, why: str) -> ApiError:
        """``<resource> "<name>" is forbidden: <why>``: upstream's admission refusal."""
        name = self.name or str(((self.obj or {}).get("metadata") or {}).get("name") or "")
        qualified = f"{self.resource}.{self.group}" if self.group else self.resource
        return forbidden_object(qualified, name, self.group, self.resource, why)


class AdmissionPlugin(Protocol):
    def admit(self, request: AdmissionRequest) -> None:
        """Raise ApiError to refuse the write."""
