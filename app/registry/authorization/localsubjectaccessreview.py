"""LocalSubjectAccessReview (authorization.k8s.io/v1, namespaced, create only): may this user do
this in the namespace of the request? (What a namespace admin may ask without cluster-wide rights.)"""

from __future__ import annotations

from typing import Any

from app.registry.authorization.review_validation import validate_local_subject_spec
from app.registry.base import Obj, RequestContext
from app.registry.reviews import ReviewStrategy
from kube.errors import FieldError


class LocalSubjectAccessReviewStrategy(ReviewStrategy):
    group = "authorization.k8s.io"
    kind = "LocalSubjectAccessReview"
    plural = "localsubjectaccessreviews"
    singular = "localsubjectaccessreview"
    namespaced = True
    create_example: Obj = {"spec": {"user": "example", "resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}}}

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_local_subject_spec(obj.get("spec"), str(obj["metadata"].get("namespace") or ""))

    def review(self, obj: Obj, ctx: RequestContext) -> Obj:
        spec: dict[str, Any] = obj.get("spec") or {}
        return dict(ctx.requester.access_review(spec, of_subject=True))

    def respond(self, obj: Obj, ctx: RequestContext) -> Obj:
        answer = super().respond(obj, ctx)
        answer["metadata"] = {"namespace": obj["metadata"]["namespace"]}
        return answer


STRATEGY: LocalSubjectAccessReviewStrategy = LocalSubjectAccessReviewStrategy()
