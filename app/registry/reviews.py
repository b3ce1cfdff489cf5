"""What the review kinds share (SelfSubjectReview, SelfSubjectAccessReview,
SelfSubjectRulesReview, SubjectAccessReview, LocalSubjectAccessReview): created, never stored,
answered with a status."""

from __future__ import annotations

from app.registry.base import KindStrategy, Obj, RequestContext
from kube.errors import ApiError


class ReviewStrategy(KindStrategy):
    verbs = ("create",)
    stored = False
    tracks_generation = False
    validates_object_meta = False
    spec_fields = ()
    create_example: Obj | None = None

    def review(self, obj: Obj, ctx: RequestContext) -> Obj:
        """The status answering ``obj``."""
        raise NotImplementedError

    def respond(self, obj: Obj, ctx: RequestContext) -> Obj:
        if ctx.requester is None:
            raise ApiError(500, "InternalError", "Internal error occurred: no user on the request")
        answer: Obj = {"kind": self.kind, "apiVersion": self.api_version, "metadata": {}}
        if "spec" in obj:
            answer["spec"] = obj["spec"]
        answer["status"] = self.review(obj, ctx)
        return answer
