"""SelfSubjectAccessReview (authorization.k8s.io/v1, create only): may the requester do this?
(``kubectl auth can-i``)."""

from __future__ import annotations

from app.registry.authorization.review_validation import validate_access_spec
from app.registry.base import Obj, RequestContext
from app.registry.reviews import ReviewStrategy
from kube.errors import FieldError


class SelfSubjectAccessReviewStrategy(ReviewStrategy):
    group = "authorization.k8s.io"
    kind = "SelfSubjectAccessReview"
    plural = "selfsubjectaccessreviews"
    singular = "selfsubjectaccessreview"
    create_example: Obj = {"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_access_spec(obj.get("spec"))

    def review(self, obj: Obj, ctx: RequestContext) -> Obj:
        return dict(ctx.requester.access_review(obj.get("spec") or {}))


STRATEGY: SelfSubjectAccessReviewStrategy = SelfSubjectAccessReviewStrategy()
