"""SubjectAccessReview (authorization.k8s.io/v1, create only): may this user do this?"""

from __future__ import annotations

from typing import Any

from app.registry.authorization.review_validation import validate_subject_spec
from app.registry.base import Obj, RequestContext
from app.registry.reviews import ReviewStrategy
from kube.errors import FieldError


class SubjectAccessReviewStrategy(ReviewStrategy):
    group = "authorization.k8s.io"
    kind = "SubjectAccessReview"
    plural = "subjectaccessreviews"
    singular = "subjectaccessreview"
    create_example: Obj = {"spec": {"user": "example", "resourceAttributes": {"verb": "get", "resource": "pods"}}}

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_subject_spec(obj.get("spec"))

    def review(self, obj: Obj, ctx: RequestContext) -> Obj:
        spec: dict[str, Any] = obj.get("spec") or {}
        return dict(ctx.requester.access_review(spec, of_subject=True))


STRATEGY: SubjectAccessReviewStrategy = SubjectAccessReviewStrategy()
