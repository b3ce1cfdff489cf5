"""What every served kind states about itself.

A kind module builds one ``KindStrategy`` subclass instance: its identity (group,
version, names, scope), its subresources and printer columns, and the hooks the
shared request machinery calls on create and update. A kind with a status
subresource also has a status strategy (``StatusStrategy``): the hooks for writes
through ``/status``. The shared machinery never special-cases a kind; everything
kind-specific lives in the kind's own module.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Self

from kube.errors import ApiError, FieldError
from kube.labels import selector_from_label_selector_object
from kube.objects import Obj, clone


@dataclass(frozen=True)
class PrinterColumn:
    """One column of the server-side Table (``kubectl get``)."""

    name: str
    type: str
    description: str
    cell: Callable[[Obj], Any]
    format: str = ""
    priority: int = 0
    # (definition, property) of the official schema whose description describes the column, for a
    # column that describes itself as upstream does, by the documentation of the field it shows
    # (used when ``description`` is empty).
    doc: tuple[str, str] | None = None


# The release whose API lifecycle this server follows: a version deprecated in it or before warns.
SERVED_RELEASE = (1, 37)


@dataclass(frozen=True)
class Deprecation:
    """Upstream's API lifecycle of a kind in one version, for the warning every request in that
    version gets once the release it was deprecated in is reached (kube-apiserver's wording)."""

    since: tuple[int, int]
    removed_in: tuple[int, int] | None = None
    # "group/version Kind" to use instead, when upstream names one.
    replacement: str = ""

    def warning(self, api_version: str, kind: str) -> str:
        """The Warning header's text for requests to ``kind`` in ``api_version`` ("" before ``since``)."""
        if self.since > SERVED_RELEASE:
            return ""
        text = f"{api_version} {kind} is deprecated in v{self.since[0]}.{self.since[1]}+"
        if self.removed_in is not None:
            text += f", unavailable in v{self.removed_in[0]}.{self.removed_in[1]}+"
        if self.replacement:
            text += f"; use {self.replacement}"
        return text


@dataclass(frozen=True)
class OlderVersion:
    """A version a kind is served in besides the one it is stored in (upstream's older API
    versions). Requests in it are converted to the stored version on the way in and back on the
    way out; what differs besides the fields is stated here."""

    version: str
    # Behaviour upstream's registry gives requests in this version, where it differs.
    allow_unconditional_update: bool | None = None
    return_deleted_object: bool | None = None
    deprecation: Deprecation | None = None


@dataclass
class RequestContext:
    """What a strategy hook may need to know about the request besides the object."""

    feature_gates: Any
    namespace_labels: dict[str, str] = field(default_factory=dict)
    # The server's --allow-privileged: whether pods and pod templates may have privileged containers.
    allow_privileged: bool = False
    warnings: list[str] = field(default_factory=list)
    # Who makes the request (``app.auth.context.Requester``: user, authorizers, RBAC rules), or
    # None for the server's own work, which may do anything.
    requester: Any = None
    # The service account token issuer (``app.auth.authenticators.ServiceAccountTokens``).
    tokens: Any = None
    # (group, resource, namespace, name) -> the stored object or None: what this server holds now.
    lookup: Callable[[str, str, str, str], Obj | None] | None = None
    # (group, resource) -> every stored object of that resource this server holds now.
    lookup_all: Callable[[str, str], list[Obj]] | None = None
    # (apiVersion, kind) -> the served kind of that name, or None (upstream's RESTMapper, for
    # kinds that name another kind: a policy's paramKind).
    resolve_kind: Callable[[str, str], KindStrategy | None] | None = None


# What the derived names below are made of, and those names (cached per instance).
_IDENTITY_ATTRIBUTES = frozenset({"group", "version", "plural", "kind", "storage_version", "storage_group"})
_DERIVED_NAMES = ("api_version", "qualified_resource", "list_kind", "stored_group", "stored_resource", "stored_api_version", "converts")


class KindStrategy:
    """Identity and behaviour of one served kind. Subclasses override the hooks."""

    group: str = ""
    version: str = "v1"
    kind: str = ""
    plural: str = ""
    singular: str = ""
    namespaced: bool = False
    subresources: tuple[Subresource, ...] = ()
    # The subresource whose writes this strategy governs: "" for the main resource.
    subresource: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # Field selectors beyond metadata.name / metadata.namespace: name -> getter of the stored object.
    field_selectors: dict[str, Callable[[Obj], str]] = {}
    # Whether an unsupported field selector error names the kind (upstream does for ResourceSlice only).
    field_selector_error_names_kind: bool = False
    # Top-level fields that the main resource owns; a /status write keeps these from
    # the stored object, a main write keeps "status" from the stored object.
    spec_fields: tuple[str, ...] = ("spec",)
    has_status: bool = False
    # Whether metadata.generation moves when spec_fields change.
    tracks_generation: bool = True
    # Whether PUT without metadata.resourceVersion is allowed (upstream's AllowUnconditionalUpdate).
    allow_unconditional_update: bool = True
    # Whether a DELETE answers with the deleted object (otherwise a Status).
    return_deleted_object: bool = True
    # Whether PUT may create a missing object (upstream's AllowCreateOnUpdate).
    allow_create_on_update: bool = False
    # Name rule: "subdomain" (RFC 1123 DNS subdomain) or "label" (RFC 1123 DNS label).
    name_rule: str = "subdomain"
    # Upstream applies ObjectMeta validation to every kind but core/v1 Event.
    validates_object_meta: bool = True
    # Core's rule that a finalizer without a domain must be a standard one (not for Lease and Event).
    object_meta_kube_finalizers: bool = True
    # Properties the official schema lacks (the project's gated proposal fields), which strict field
    # validation and pruning must know: definition name -> property name -> JSON schema.
    extra_schema_properties: dict[str, dict[str, Obj]] = {}
    printer_columns: tuple[PrinterColumn, ...] = ()
    # The fields (besides apiVersion, kind, metadata) of a minimal object that creating succeeds
    # for any number of times (generateName) and in any namespace; the OpenAPI documents offer it.
    create_example: Obj | None = None
    # Verbs of the main resource, as discovery lists them.
    verbs: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
    # False for a kind nothing is stored of (a review): a create answers ``respond``'s object.
    stored: bool = True
    # The feature gate the kind is served under ("" for none): off, the kind is not served at all.
    feature_gate: str = ""
    # Versions besides ``version`` the kind can be served in, off unless --runtime-config enables them.
    older_versions: tuple[OlderVersion, ...] = ()
    # Upstream's lifecycle of the kind in ``version``, when that version is deprecated.
    deprecation: Deprecation | None = None
    # The version objects are stored in; "" for the kind's own ``version`` (see ``at_version``).
    storage_version: str = ""
    # The group whose storage holds the objects, when it is not the kind's own: upstream serves a
    # kind of one group from another's objects (events.k8s.io/v1 Event from core/v1 Event's).
    storage_group: str | None = None
    # What a DELETE without propagationPolicy (or orphanDependents) does to the object's dependents:
    # "Background" unless upstream's strategy defaults otherwise (batch/v1 Jobs orphan their pods).
    default_propagation_policy: str = "Background"

    def __init__(self, subresources: tuple[Subresource, ...] = ()) -> None:
        self.subresources = subresources

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name in _IDENTITY_ATTRIBUTES:
            # The names derived from it (cached: every request reads them several times) are stale.
            for derived in _DERIVED_NAMES:
                self.__dict__.pop(derived, None)

    # ---- identity helpers (derived once per instance, see __setattr__) ---------

    @cached_property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @cached_property
    def qualified_resource(self) -> str:
        """``resourceclaims.resource.k8s.io`` or ``pods``: how errors name the resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @cached_property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @cached_property
    def stored_group(self) -> str:
        return self.group if self.storage_group is None else self.storage_group

    @cached_property
    def stored_resource(self) -> str:
        """The resource the objects are stored as: ``qualified_resource`` unless another group's
        storage holds them."""
        return f"{self.plural}.{self.stored_group}" if self.stored_group else self.plural

    @cached_property
    def stored_api_version(self) -> str:
        """The apiVersion stored objects carry."""
        version = self.storage_version or self.version
        return f"{self.stored_group}/{version}" if self.stored_group else version

    # ---- versions -----------------------------------------------------------

    @cached_property
    def converts(self) -> bool:
        """Whether requests in this version are converted to and from the stored one."""
        return self.stored_api_version != self.api_version

    def at_version(self, older: OlderVersion) -> Self:
        """This kind as served in ``older``: the same hooks, another version on the wire."""
        view = copy.copy(self)
        view.storage_version = self.version
        view.version = older.version
        if older.allow_unconditional_update is not None:
            view.allow_unconditional_update = older.allow_unconditional_update
        if older.return_deleted_object is not None:
            view.return_deleted_object = older.return_deleted_object
        view.extra_schema_properties = _renamed_definitions(self.extra_schema_properties, self.version, older.version)
        view.subresources = tuple(
            StatusSubresource(sub.strategy.at_version(older)) if isinstance(sub, StatusSubresource) else sub
            for sub in self.subresources
        )
        view.older_versions = ()
        view.deprecation = older.deprecation
        return view

    @property
    def deprecation_warning(self) -> str:
        """What every request to this kind in this version is warned of ("" when it is current)."""
        return self.deprecation.warning(self.api_version, self.kind) if self.deprecation is not None else ""

    def convert_fields(self, obj: Obj, from_api_version: str, to_api_version: str) -> Obj:
        """``obj`` (a private copy) with its fields converted between the served and the stored
        apiVersion (either way); a kind whose versions differ in shape overrides this, keeping what
        the target version cannot express so that a round trip loses nothing."""
        return obj

    def to_stored(self, obj: Obj) -> Obj:
        """An object of this version as the stored version holds it (``obj`` itself when they agree)."""
        if not self.converts:
            return obj
        converted = self.convert_fields(clone(obj), self.api_version, self.stored_api_version)
        converted["apiVersion"] = self.stored_api_version
        return converted

    def from_stored(self, obj: Obj) -> Obj:
        """A stored object as this version shows it (``obj`` itself when they agree)."""
        if not self.converts:
            return obj
        converted = self.convert_fields(clone(obj), self.stored_api_version, self.api_version)
        converted["apiVersion"] = self.api_version
        return converted

    # ---- hooks (defaults: accept as is) ------------------------------------

    def prepare_for_create(self, obj: Obj, ctx: RequestContext) -> None:
        """Reset what a client may not set on create (e.g. status) and apply defaults."""
        if self.has_status:
            obj.pop("status", None)

    def prepare_named(self, obj: Obj, ctx: RequestContext) -> None:
        """Create-time work that needs the object's final name: upstream's PrepareForCreate runs
        after generateName made one, here ``prepare_for_create`` runs before (pods' admission
        names a pod by its generateName) and this after."""

    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        """Main-resource update: status comes from the stored object."""
        if self.has_status:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        """Apply upstream defaults in place."""

    def drop_disabled_fields(self, obj: Obj, old: Obj | None, ctx: RequestContext) -> None:
        """Drop fields guarded by disabled feature gates unless ``old`` already uses them."""

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return []

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return []

    def check_delete(self, obj: Obj) -> None:
        """Raise ApiError when the object may never be deleted (a system PriorityClass)."""

    def respond(self, obj: Obj, ctx: RequestContext) -> Obj:
        """An unstored kind's answer to a create (the object with its status filled in)."""
        raise NotImplementedError

    # ---- deletion -------------------------------------------------------------

    def delete_grace_period(self, obj: Obj, requested: int | None) -> int:
        """Seconds the object lingers with a deletionTimestamp before it may go (0 = now)."""
        return 0

    def blocks_deletion(self, obj: Obj) -> bool:
        """Whether something must still clean up before the object can be removed."""
        return bool(obj["metadata"].get("finalizers"))

    def prepare_for_delete(self, obj: Obj) -> None:
        """Changes made when the object is marked for deletion (e.g. a Terminating phase)."""

    def spec_changed(self, new: Obj, old: Obj) -> bool:
        return any(new.get(name) != old.get(name) for name in self.spec_fields)

    def reset_fields(self) -> list[tuple[str, ...]]:
        """Fields a writer through this strategy cannot own (server-side apply): status on the main resource."""
        return [("status",)] if self.has_status else []


class StatusStrategy(KindStrategy):
    """Writes through ``/status`` (upstream's per-kind status strategy): everything but status
    comes from the stored object, no defaults apply, and the main resource's update rules do not.

    A kind's status strategy derives from this and from the kind's strategy, in that order
    (``class PodStatusStrategy(StatusStrategy, PodStrategy)``), so it keeps the kind's identity
    and its other hooks and overrides the update hooks.
    """

    subresource = "status"

    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        for name in self.spec_fields:
            if name in old:
                new[name] = old[name]
            else:
                new.pop(name, None)

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        """A status write is not defaulted."""

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return []

    def reset_fields(self) -> list[tuple[str, ...]]:
        return [(name,) for name in self.spec_fields]


class ScopeStrategy(KindStrategy):
    """A kind whose objects are the scopes namespaced objects live in (upstream's Namespace).

    The generic store asks the scope kind the registry names (``app.registry.SCOPE_KIND``) what a
    request in a scope learns from it and whether the scope takes new objects, so that it names
    no kind itself.
    """

    def labels_of(self, scope: Obj | None) -> dict[str, str]:
        """The labels strategies see for a request in ``scope`` (None: there is no such scope)."""
        return dict(((scope or {}).get("metadata") or {}).get("labels") or {})

    def refuse_new_content(self, scope: Obj | None, name: str, creating: KindStrategy) -> ApiError | None:
        """Why an object of ``creating`` may not be created in the scope ``name`` (stored as
        ``scope``, None when there is none), or None when it may."""
        return None


def reset_metadata_for_status(new: Obj, old: Obj) -> None:
    """Upstream's ResetObjectMetaForStatus for kinds whose /status discards metadata changes: the
    stored metadata, with the request's resourceVersion (its precondition) and managedFields."""
    keep = {k: v for k, v in new["metadata"].items() if k in ("resourceVersion", "managedFields")}
    new["metadata"] = {**old["metadata"], **keep}


class Subresource:
    """A path below one object of a kind (``NAME/status``), declared by the kind that serves it."""

    name: str = ""
    # Verbs it serves, as discovery lists them: get, update, patch, create.
    verbs: tuple[str, ...] = ()
    # (group, version, kind) it accepts and answers when that is not the owning kind.
    kind: tuple[str, str, str] | None = None
    # Whether a write answers a Success Status instead of the object.
    answers_status: bool = False

    def group_version_kind(self, owner: KindStrategy) -> tuple[str, str, str]:
        """What it accepts and answers: its own kind, or else the owning kind."""
        return self.kind or (owner.group, owner.version, owner.kind)

    def api_version_and_kind(self, owner: KindStrategy) -> tuple[str, str]:
        """``group_version_kind`` as an object names it: (apiVersion, kind)."""
        group, version, kind = self.group_version_kind(owner)
        return (f"{group}/{version}" if group else version), kind


class StatusSubresource(Subresource):
    """``/status``: get, update and patch the object under the kind's status strategy."""

    name = "status"
    verbs = ("get", "patch", "update")

    def __init__(self, strategy: StatusStrategy) -> None:
        self.strategy = strategy


class ScaleSubresource(Subresource):
    """``/scale``: the object's desired replicas seen and set as an autoscaling/v1 Scale (what
    ``kubectl scale`` and autoscalers use). Reads answer the Scale of the stored object; writes
    change ``spec.replicas`` through the kind's own update rules."""

    name = "scale"
    verbs = ("get", "patch", "update")
    kind = ("autoscaling", "v1", "Scale")

    def scale_of(self, obj: Obj) -> Obj:
        """The Scale of a stored object (upstream's scaleFrom<Kind>)."""
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
        assert isinstance(spec, dict) and isinstance(status, dict)
        scale_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if meta.get(k) is not None}
        replicas = spec.get("replicas") or 0
        scale_status: Obj = {"replicas": status.get("replicas") or 0}
        selector = self.selector_text(spec.get("selector"))
        if selector:
            scale_status["selector"] = selector
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": scale_meta,
            "spec": {"replicas": replicas} if replicas else {},
            "status": scale_status,
        }

    @staticmethod
    def selector_text(selector: Any) -> str:
        """The label selector as a selector string (upstream's LabelSelectorAsSelector(...).String())."""
        if not isinstance(selector, dict):
            return ""
        try:
            return str(selector_from_label_selector_object(selector))
        except ApiError:
            return ""


class ComputedSubresource(Subresource):
    """A subresource whose one write (a create) computes an answer from the stored object and
    stores nothing (``serviceaccounts/NAME/token`` issues a token)."""

    verbs = ("create",)

    def respond(self, owner: KindStrategy, stored: Obj, body: Obj, ctx: RequestContext) -> Obj:
        """The answer to ``body`` about ``stored``; raises ApiError when it cannot be given."""
        raise NotImplementedError


class ActionSubresource(Subresource):
    """A subresource whose one write (its single verb) changes the stored object by a rule of its
    own (binding a pod to a node, finalizing a namespace). The shared machinery runs it as a
    read-modify-write with retries, checks the preconditions the body states, writes nothing
    when nothing changed, and records the writer in managedFields when asked to."""

    records_managed_fields: bool = True

    def check(self, owner: KindStrategy, name: str, body: Obj) -> None:
        """Refuse a malformed body (ApiError) before the stored object is read."""

    def preconditions(self, body: Obj) -> tuple[str | None, str | None]:
        """The (uid, resourceVersion) the stored object must have, when the body demands them."""
        return None, None

    def apply(self, owner: KindStrategy, name: str, body: Obj, obj: Obj) -> Obj:
        """``obj`` changed as the body asks (``obj`` is a private copy of the stored object);
        raises ApiError when the stored object's state forbids it."""
        raise NotImplementedError


_DEFINITION_VERSION = re.compile(r"^(io\.k8s\.api\.[a-z0-9]+\.)([a-z0-9]+)(\.)")


def _renamed_definitions(properties: dict[str, dict[str, Obj]], version: str, target: str) -> dict[str, dict[str, Obj]]:
    """Extra schema properties declared for one version's definitions, for ``target``'s same-named ones."""

    def rename(name: str) -> str:
        match = _DEFINITION_VERSION.match(name)
        if match is None or match.group(2) != version:
            return name
        return f"{match.group(1)}{target}{match.group(3)}{name[match.end():]}"

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: (f"#/$defs/{rename(v[len('#/$defs/'):])}" if k == "$ref" and isinstance(v, str) and v.startswith("#/$defs/") else walk(v)) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return {rename(name): walk(props) for name, props in properties.items()}
