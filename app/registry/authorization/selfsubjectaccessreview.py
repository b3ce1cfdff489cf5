"""SelfSubjectAccessReview (authorization.k8s.io/v1, create only): may the requester do this?
(``kubectl auth can-i``)."""

from __future__ import annotations

from app.registry.authorization.review_validation import validate_access_spec
from app.registry.base import PROTOBUF_STRING, Obj, ProtobufMessage, RequestContext
from app.registry.reviews import ReviewStrategy, review_protobuf
from kube.errors import FieldError

_RESOURCE_ATTRIBUTES = ProtobufMessage(
    {n: (name, PROTOBUF_STRING) for n, name in enumerate(("namespace", "verb", "group", "version", "resource", "subresource", "name"), start=1)}
)
_NON_RESOURCE_ATTRIBUTES = ProtobufMessage({1: ("path", PROTOBUF_STRING), 2: ("verb", PROTOBUF_STRING)})


class SelfSubjectAccessReviewStrategy(ReviewStrategy):
    group = "authorization.k8s.io"
    kind = "SelfSubjectAccessReview"
    plural = "selfsubjectaccessreviews"
    singular = "selfsubjectaccessreview"
    create_example: Obj = {"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}
    # ``kubectl auth can-i`` sends protobuf.
    protobuf = review_protobuf(ProtobufMessage({1: ("resourceAttributes", _RESOURCE_ATTRIBUTES), 2: ("nonResourceAttributes", _NON_RESOURCE_ATTRIBUTES)}))

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_access_spec(obj.get("spec"))

    def review(self, obj: Obj, ctx: RequestContext) -> Obj:
        return dict(ctx.requester.access_review(obj.get("spec") or {}))


STRATEGY: SelfSubjectAccessReviewStrategy = SelfSubjectAccessReviewStrategy()
