"""SelfSubjectRulesReview (authorization.k8s.io/v1, create only): what may the requester do in a
namespace? (``kubectl auth can-i --list``)."""

from __future__ import annotations

from app.registry.base import Obj, RequestContext
from app.registry.reviews import ReviewStrategy


class SelfSubjectRulesReviewStrategy(ReviewStrategy):
    group = "authorization.k8s.io"
    kind = "SelfSubjectRulesReview"
    plural = "selfsubjectrulesreviews"
    singular = "selfsubjectrulesreview"
    create_example: Obj = {"spec": {"namespace": "default"}}

    def review(self, obj: Obj, ctx: RequestContext) -> Obj:
        namespace = str((obj.get("spec") or {}).get("namespace") or "")
        return dict(ctx.requester.rules_review(namespace))


STRATEGY: SelfSubjectRulesReviewStrategy = SelfSubjectRulesReviewStrategy()
