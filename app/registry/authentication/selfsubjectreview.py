"""SelfSubjectReview (authentication.k8s.io/v1, create only): who the requester is
(``kubectl auth whoami``)."""

from __future__ import annotations

from app.registry.base import Obj, RequestContext
from app.registry.reviews import ReviewStrategy


class SelfSubjectReviewStrategy(ReviewStrategy):
    group = "authentication.k8s.io"
    kind = "SelfSubjectReview"
    plural = "selfsubjectreviews"
    singular = "selfsubjectreview"
    create_example: Obj = {}

    def review(self, obj: Obj, ctx: RequestContext) -> Obj:
        return {"userInfo": ctx.requester.user.to_api()}


STRATEGY: SelfSubjectReviewStrategy = SelfSubjectReviewStrategy()
