"""ServiceAccount (v1, namespaced), and its ``token`` subresource: a TokenRequest answered with a
signed token for the account, bound to an audience, an expiry and optionally a Pod or Node."""

from __future__ import annotations

import datetime
from typing import Any

from app.registry.base import ComputedSubresource, KindStrategy, Obj, PrinterColumn, RequestContext
from app.registry.columns import age_column, name_column
from app.registry.core.serviceaccount_validation import validate_token_request
from kube import errors


class TokenSubresource(ComputedSubresource):
    name = "token"
    kind = ("authentication.k8s.io", "v1", "TokenRequest")

    def respond(self, owner: KindStrategy, stored: Obj, body: Obj, ctx: RequestContext) -> Obj:
        meta = stored["metadata"]
        tokens = ctx.tokens
        if tokens is None or tokens.signing_key is None:
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
        spec = dict(body.get("spec") or {})
        spec.setdefault("audiences", list(tokens.audiences))
        if not spec["audiences"]:
            spec["audiences"] = list(tokens.audiences)
        spec.setdefault("expirationSeconds", 3600)
        errs = validate_token_request(spec)
        if errs:
            raise errors.invalid_object("TokenRequest", meta["name"], "authentication.k8s.io", errs)
        expiration = int(spec["expirationSeconds"])
        if tokens.max_expiration and expiration > tokens.max_expiration:
            expiration = tokens.max_expiration
        bound, node = self._bound_object(meta, spec.get("boundObjectRef"), ctx)
        token, expires = tokens.issue(stored, spec["audiences"], expiration, bound, node)
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "spec": {**spec, "expirationSeconds": expiration, "boundObjectRef": spec.get("boundObjectRef")},
            "status": {
                "token": token,
                "expirationTimestamp": datetime.datetime.fromtimestamp(expires, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
        }

    @staticmethod
    def _bound_object(account: Obj, ref: Any, ctx: RequestContext) -> tuple[Obj | None, Obj | None]:
        """The Pod or Node a token is bound to, and the node a bound pod runs on."""
        if not ref:
            return None, None
        kind, name = ref.get("kind"), str(ref.get("name") or "")
        if kind not in ("Pod", "Node"):
            raise errors.bad_request(f'cannot bind token for serviceaccount "{account["name"]}" to object of type {kind}')
        assert ctx.lookup is not None
        plural = "pods" if kind == "Pod" else "nodes"
        found = ctx.lookup("", plural, account["namespace"] if kind == "Pod" else "", name)
        if found is None:
            raise errors.not_found(plural, name, "", plural)
        uid = ref.get("uid")
        if uid and uid != found["metadata"].get("uid"):
            raise errors.conflict(
                kind, name, "", kind,
                f"the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated",
            )  # fmt: skip
        bound = {"kind": kind, **found}
        if kind == "Node":
            return bound, None
        node_name = (found.get("spec") or {}).get("nodeName")
        node = ctx.lookup("", "nodes", "", node_name) if node_name else None
        return bound, node


class ServiceAccountStrategy(KindStrategy):
    kind = "ServiceAccount"
    plural = "serviceaccounts"
    singular = "serviceaccount"
    namespaced = True
    short_names = ("sa",)
    tracks_generation = False
    spec_fields = ()
    create_example: Obj = {}
    printer_columns = (
        name_column(),
        PrinterColumn("Secrets", "integer", "", lambda o: len(o.get("secrets") or [])),
        age_column(),
    )


STRATEGY = ServiceAccountStrategy(subresources=(TokenSubresource(),))
