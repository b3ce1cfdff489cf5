"""ServiceAccount (v1, namespaced), and its ``token`` subresource: a TokenRequest answered with a
signed token for the account, bound to an audience, an expiry and optionally a Pod, Secret or Node
(the token then works only while that object exists with the same uid)."""

from __future__ import annotations

import datetime
from typing import Any

from app.registry.base import ComputedSubresource, KindStrategy, Obj, PrinterColumn, RequestContext
from app.registry.columns import age_column, name_column
from app.registry.core.serviceaccount_validation import validate_token_request
from kube import errors

# Kinds (core/v1) a token can be bound to, and their plurals.
BINDABLE = {"Pod": "pods", "Secret": "secrets", "Node": "nodes"}
# The account a pod that names none runs as (upstream's ServiceAccount admission sets it).
DEFAULT_ACCOUNT = "default"


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
        """The Pod, Secret or Node a token is bound to, and the node a bound pod runs on."""
        if not ref:
            return None, None
        api_version, kind, name = str(ref.get("apiVersion") or ""), ref.get("kind"), str(ref.get("name") or "")
        group, _, version = api_version.rpartition("/")
        plural = BINDABLE.get(kind) if not group else None
        if plural is None:
            raise errors.bad_request(f"cannot bind token to object of type {group}/{version}, Kind={kind}")
        assert ctx.lookup is not None
        found = ctx.lookup("", plural, account["namespace"] if plural != "nodes" else "", name)
        if found is None:
            raise errors.not_found(plural, name, "", plural)
        if kind == "Pod" and ((found.get("spec") or {}).get("serviceAccountName") or DEFAULT_ACCOUNT) != account["name"]:
            raise errors.bad_request(f'cannot bind token for serviceaccount "{account["name"]}" to pod running with different serviceaccount name.')
        uid = ref.get("uid")
        if uid and uid != found["metadata"].get("uid"):
            raise errors.conflict(
                kind, name, "", kind,
                f"the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated",
            )  # fmt: skip
        bound = {"kind": kind, **found}
        if kind != "Pod":
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


STRATEGY: ServiceAccountStrategy = ServiceAccountStrategy(subresources=(TokenSubresource(),))
