"""Generic REST semantics shared by every kind: get, list, watch, create, update,
patch, delete, deletecollection, and writes through the subresources kinds declare.

Kind-specific behaviour comes only from the kind's ``KindStrategy`` (its status strategy for
writes through ``/status``) and the ``Subresource`` declarations it owns.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import orjson

from app import protobuf
from app.api import apply as ssa
from app.api import bodies, schemas
from app.api import patch as patches
from app.api.options import (
    EXACT,
    ContinueToken,
    DeleteOptions,
    ListOptions,
    WriteOptions,
    continue_too_old,
    parse_resource_version,
)
from app.auth import context as requests
from app.auth.admission import CREATE, DELETE, UPDATE, AdmissionRequest
from app.registry import SCOPE_KIND, lookup_kind
from app.registry.base import ActionSubresource, ComputedSubresource, KindStrategy, Obj, RequestContext, ScaleSubresource
from app.registry.objectmeta import validate_object_meta, validate_object_meta_update
from app.storage.cache import ADDED, DELETED, MODIFIED, StoredObject
from app.storage.dialects import WriteOp
from app.storage.errors import ContinueExpired, KeyExists, ResourceVersionTooLarge, RevisionCompacted, RevisionMismatch, StorageError
from app.storage.storage import Predicate, Storage, WatchBatch
from kube import errors
from kube.errors import ApiError, FieldError
from kube.features import FeatureGates
from kube.fields import FieldSelector, parse_field_selector, unknown_field_error, unsupported_field_error
from kube.labels import LabelSelector, parse_label_selector
from kube.timeutil import now_rfc3339
from kube.uids import new_uid

log = logging.getLogger("app.api")

GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
GENERATE_NAME_ATTEMPTS = 8
# A generated name is at most 63 characters: the prefix is cut to leave room for the suffix.
GENERATED_NAME_PREFIX_MAX = 58
UPDATE_ATTEMPTS = 16
# Metadata an update cannot change: upstream's BeforeUpdate puts back the stored values.
RESTORED_METADATA = ("uid", "creationTimestamp", "generation")


@dataclass
class WriteResult:
    obj: StoredObject | Obj
    created: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def raw(self) -> bytes:
        return self.obj.raw if isinstance(self.obj, StoredObject) else orjson.dumps(self.obj)


class AdmittedWrite:
    """A create or update about to be written, as the admission steps that may wait see it.

    Read-only (its attributes are Final); a plain class rather than a frozen dataclass, whose
    generated ``__init__`` runs as Python on every write."""

    def __init__(self, operation: str, strategy: KindStrategy, namespace: str, name: str, obj: Obj, old: Obj | None, subresource: str, dry_run: bool) -> None:
        self.operation: Final = operation  # CREATE or UPDATE
        self.strategy: Final = strategy
        self.namespace: Final = namespace  # "" for a cluster-scoped kind
        self.name: Final = name
        self.obj: Final = obj  # as it will be stored
        self.old: Final = old  # as stored (None on CREATE)
        self.subresource: Final = subresource
        self.dry_run: Final = dry_run


# An admission step that may wait (resource quota: it writes the quota's status before the object
# may be written); it raises ApiError to refuse.
WriteAdmission = Callable[[AdmittedWrite], Awaitable[None]]


@dataclass
class DeleteResult:
    obj: StoredObject | Obj | None
    deleted_now: bool
    details: dict[str, Any] = field(default_factory=dict)


def _name_of(obj: Obj) -> str:
    return str(obj.get("metadata", {}).get("name") or "")


class GenericStore:
    """The REST operations, bound to one storage and one set of feature gates."""

    def __init__(
        self,
        storage: Storage,
        gates: FeatureGates,
        min_request_timeout: float = 1800.0,
        tokens: Any = None,
        delete_collection_workers: int = 1,
        allow_privileged: bool = False,
    ) -> None:
        self.storage = storage
        self.gates = gates
        self.allow_privileged = allow_privileged
        self.min_request_timeout = min_request_timeout
        # The service account token issuer, for the token subresource.
        self.tokens = tokens
        self.delete_collection_workers = max(1, delete_collection_workers)
        # Run on every create and update of a stored object after the synchronous admission,
        # whoever writes (the server's own loops too).
        self.write_admission: list[WriteAdmission] = []

    def lookup(self, group: str, resource: str, namespace: str, name: str) -> Obj | None:
        """The object this server holds now, by group and plural (None when there is none)."""
        stored = self.storage.cached(f"{resource}.{group}" if group else resource, namespace, name)
        return stored.obj if stored is not None else None

    def lookup_all(self, group: str, resource: str) -> list[Obj]:
        """Every object of a resource this server holds now, by group and plural."""
        return [stored.obj for stored in self.storage.cached_all(f"{resource}.{group}" if group else resource)]

    # ---- helpers ---------------------------------------------------------------

    def context(self, namespace: str = "") -> RequestContext:
        labels = SCOPE_KIND.labels_of(self._scope(namespace)) if namespace else {}
        return RequestContext(
            self.gates,
            labels,
            allow_privileged=self.allow_privileged,
            requester=requests.current(),
            tokens=self.tokens,
            lookup=self.lookup,
            lookup_all=self.lookup_all,
            resolve_kind=lookup_kind,
        )

    @staticmethod
    def _admit(
        operation: str,
        strategy: KindStrategy,
        namespace: str,
        name: str,
        new: Obj | None,
        old: Obj | None,
        subresource: str = "",
        *,
        options: WriteOptions | DeleteOptions | None = None,
        kind: str = "",
    ) -> None:
        """Admission of one write the requester makes (NodeRestriction, the admission policies)."""
        requester = requests.current()
        if requester is None or not requester.admission:
            return
        requester.admit(
            AdmissionRequest(
                operation=operation,
                user=requester.user,
                group=strategy.group,
                resource=strategy.plural,
                subresource=subresource or strategy.subresource,
                namespace=namespace if strategy.namespaced else "",
                name=name,
                obj=new,
                old=old,
                version=strategy.version,
                kind=kind or strategy.kind,
                dry_run=options is not None and options.dry_run,
                options=(lambda: options.admission_options(operation)) if options is not None else None,
                recorder=requester,
            )
        )

    async def _admit_write(self, operation: str, strategy: KindStrategy, namespace: str, name: str, new: Obj, old: Obj | None, dry_run: bool, subresource: str = "") -> None:
        """The admission steps that may wait, in order; a dry run is admitted without its effects."""
        if not self.write_admission:
            return
        write = AdmittedWrite(operation, strategy, namespace if strategy.namespaced else "", name, new, old, subresource or strategy.subresource, dry_run)
        for admit in self.write_admission:
            await admit(write)

    def _not_found(self, strategy: KindStrategy, name: str) -> ApiError:
        return errors.not_found(strategy.qualified_resource, name, strategy.group, strategy.plural)

    def _conflict(self, strategy: KindStrategy, name: str, why: str) -> ApiError:
        return errors.conflict(strategy.qualified_resource, name, strategy.group, strategy.plural, why)

    def _invalid(self, strategy: KindStrategy, name: str, errs: list[FieldError]) -> ApiError:
        return errors.invalid_object(strategy.kind, name, strategy.group, errs)

    def _check_preconditions(self, strategy: KindStrategy, name: str, meta: Obj, uid: str | None, resource_version: str | None) -> None:
        """A write that demands a uid or resourceVersion of the stored object conflicts when it has
        another: upstream's storage refuses it (an invalid-object StorageError naming the key) and
        the registry answers a Conflict carrying that error's text."""
        if uid is not None and uid != meta.get("uid"):
            why = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta.get('uid', '')}"
        elif resource_version is not None and resource_version != meta.get("resourceVersion"):
            why = f"Precondition failed: ResourceVersion in precondition: {resource_version}, ResourceVersion in object meta: {meta.get('resourceVersion', '')}"
        else:
            return
        key = "/".join(("/registry", strategy.plural, *((meta["namespace"],) if meta.get("namespace") else ()), name))
        raise self._conflict(strategy, name, f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: {why}")

    @staticmethod
    def _check_delete_preconditions(strategy: KindStrategy, name: str, meta: Obj, dopts: DeleteOptions) -> None:
        """upstream's rest.BeforeDelete checks a delete's preconditions early, in its own words,
        naming the object by its kind (the storage's check, with the words above, only sees races)."""
        kind = f"{strategy.kind}.{strategy.group}" if strategy.group else strategy.kind
        uid, resource_version = dopts.preconditions_uid, dopts.preconditions_rv
        if uid is not None and uid != meta.get("uid"):
            why = f"the UID in the precondition ({uid}) does not match the UID in record ({meta.get('uid', '')}). The object might have been deleted and then recreated"
            raise errors.conflict(kind, name, strategy.group, strategy.kind, why)
        if resource_version is not None and resource_version != meta.get("resourceVersion"):
            why = (
                f"the ResourceVersion in the precondition ({resource_version}) does not match the ResourceVersion in record "
                f"({meta.get('resourceVersion', '')}). The object might have been modified"
            )
            raise errors.conflict(kind, name, strategy.group, strategy.kind, why)

    def _scope(self, namespace: str) -> Obj | None:
        """The stored object of the scope (namespace) ``namespace``, None if there is none."""
        stored = self.storage.cached(SCOPE_KIND.qualified_resource, "", namespace)  # as ``lookup`` names it
        return stored.obj if stored is not None else None

    async def _check_namespace_for_create(self, strategy: KindStrategy, namespace: str) -> None:
        # A review (never stored) may ask about a namespace that does not exist, as upstream's
        # namespace lifecycle lets access reviews through.
        if not strategy.namespaced or not strategy.stored:
            return
        scope = self._scope(namespace)
        if scope is None:
            # Not here yet is not gone: a namespace just created through another replica reaches
            # this one's cache a moment later, so a miss reads the newest revision before refusing
            # (upstream's namespace lifecycle looks a missing namespace up live for the same reason).
            stored = await self.storage.get(SCOPE_KIND.qualified_resource, "", namespace)
            scope = stored.obj if stored is not None else None
        refusal = SCOPE_KIND.refuse_new_content(scope, namespace, strategy)
        if refusal is not None:
            raise refusal

    # ---- reads -----------------------------------------------------------------

    async def get(self, strategy: KindStrategy, namespace: str, name: str, resource_version: str = "") -> StoredObject:
        try:
            stored = await self.storage.get(strategy.stored_resource, namespace, name, parse_resource_version(resource_version))
        except ResourceVersionTooLarge as exc:
            raise _read_error(exc) from None
        if stored is None:
            raise self._not_found(strategy, name)
        return _converted(strategy, stored)

    def _selectors(self, strategy: KindStrategy, opts: ListOptions) -> tuple[LabelSelector | None, FieldSelector | None]:
        labels = parse_label_selector(opts.label_selector) if opts.label_selector else None
        if labels is not None and labels.empty:
            labels = None
        fields = parse_field_selector(opts.field_selector) if opts.field_selector else None
        if fields is not None:
            for name in fields.fields():
                if name not in ("metadata.name", "metadata.namespace") and name not in strategy.field_selectors:
                    if not strategy.field_selectors:
                        raise unknown_field_error(name)
                    gvk = f"{strategy.api_version}, Kind={strategy.kind}" if strategy.field_selector_error_names_kind else None
                    raise unsupported_field_error(name, gvk)
        return labels, fields

    def _predicate(self, strategy: KindStrategy, labels: LabelSelector | None, fields: FieldSelector | None) -> Predicate | None:
        """A filter over what the cache extracted from each version: no object is decoded."""
        if labels is None and fields is None:
            return None
        getters = strategy.field_selectors
        # Field name -> its position in each version's extracted ``fields``.
        extracted = {name: position for position, name in enumerate(self.storage.field_names(strategy.stored_resource))}

        def field_value(stored: StoredObject) -> Callable[[str], str]:
            def get(name: str) -> str:
                if name == "metadata.name":
                    return stored.name
                if name == "metadata.namespace":
                    return stored.namespace
                position = extracted.get(name)
                if stored.fields is not None and position is not None:
                    return stored.fields[position]
                return getters[name](stored.obj)

            return get

        def predicate(stored: StoredObject) -> bool:
            if labels is not None and not labels.matches(stored.labels or {}):
                return False
            return fields is None or fields.matches(field_value(stored))

        return predicate

    async def list_objects(self, strategy: KindStrategy, namespace: str | None, opts: ListOptions) -> tuple[list[StoredObject], dict[str, Any]]:
        labels, fields = self._selectors(strategy, opts)
        predicate = self._predicate(strategy, labels, fields)
        if fields is not None and namespace is None:
            # A field selector naming one namespace lists only that namespace.
            namespace = fields.exact_value("metadata.namespace")
        revision: int | None = None
        continue_from: tuple[int, str] | None = None
        if opts.continue_token:
            token = ContinueToken.decode(opts.continue_token)
            continue_from = (token.revision, token.start)
        else:
            revision = parse_resource_version(opts.resource_version)
        try:
            result = await self.storage.list(
                strategy.stored_resource,
                namespace,
                revision=revision,
                exact=opts.resource_version_match == EXACT,
                continue_from=continue_from,
                predicate=predicate,
                limit=opts.limit,
            )
        except ContinueExpired:
            raise continue_too_old(continue_from[1] if continue_from else "") from None
        except (ResourceVersionTooLarge, RevisionCompacted) as exc:
            raise _read_error(exc) from None
        meta: dict[str, Any] = {"resourceVersion": str(result.revision)}
        if result.continue_after:
            meta["continue"] = ContinueToken(result.revision, result.continue_after).encode()
            if result.remaining is not None:
                meta["remainingItemCount"] = result.remaining
        return [_converted(strategy, item) for item in result.items] if strategy.converts else result.items, meta

    # ---- watch -----------------------------------------------------------------

    async def watch(self, strategy: KindStrategy, namespace: str | None, opts: ListOptions) -> AsyncIterator[WatchBatch]:
        """Batches of (event type, object) pairs; BOOKMARK objects are plain dicts.

        RevisionCompacted when the history no longer reaches the resourceVersion asked for."""
        labels, fields = self._selectors(strategy, opts)
        predicate = self._predicate(strategy, labels, fields)
        timeout = opts.timeout_seconds
        if timeout is None or timeout <= 0:
            timeout = int(self.min_request_timeout * (1 + random.random()))
        try:
            events = await self.storage.watch(
                strategy.stored_resource,
                namespace,
                kind=strategy.kind,
                api_version=strategy.api_version,
                revision=parse_resource_version(opts.resource_version),
                send_initial_events=opts.send_initial_events,
                predicate=predicate,
                allow_bookmarks=opts.allow_watch_bookmarks,
                timeout=timeout,
            )
        except ResourceVersionTooLarge as exc:
            raise _read_error(exc) from None
        return _ConvertedBatches(strategy, events) if strategy.converts else events

    # ---- create ----------------------------------------------------------------

    def _check_type_and_scope(self, strategy: KindStrategy, obj: Obj, namespace: str, name: str | None, *, replacing: bool = False) -> None:
        """The body's type and place: its kind and apiVersion, namespace (filled in when absent)
        and, for a write to a named object, its name, which must be the URL's (upstream's
        checkName; a replace checks the namespace that way too, before the generic check)."""
        api_version = obj.get("apiVersion")
        kind = obj.get("kind")
        if api_version not in (None, "") and api_version != strategy.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version ({strategy.api_version})"
            )
        if kind not in (None, "") and kind != strategy.kind:
            raise errors.bad_request(f"{_cannot_handle(strategy, obj)}: {bodies.unconvertible_kind(str(kind), strategy.api_version, strategy.group, strategy.kind)}")
        # Upstream serialises kind, apiVersion and metadata first; keep that order for readers.
        metadata = obj.get("metadata")
        if metadata is None:
            metadata = {}
        ordered: Obj = {"kind": strategy.kind, "apiVersion": strategy.api_version, "metadata": metadata}
        for key, value in obj.items():
            if key not in ordered:
                ordered[key] = value
        obj.clear()
        obj.update(ordered)
        if not isinstance(metadata, dict):
            raise errors.bad_request("metadata must be an object")
        body_ns = metadata.get("namespace")
        if replacing:
            self._check_name(metadata, name)
            if strategy.namespaced and body_ns not in (None, "") and body_ns != namespace:
                raise errors.bad_request(f"the namespace of the object ({body_ns}) does not match the namespace on the request ({namespace})")
        if strategy.namespaced:
            if body_ns not in (None, "") and body_ns != namespace:
                raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the request")
            metadata["namespace"] = namespace
        else:
            metadata.pop("namespace", None)
        self._check_name(metadata, name)

    @staticmethod
    def _check_name(metadata: Obj, name: str | None) -> None:
        """A write to a named object carries that name (an empty one is no exception)."""
        if name is not None and (metadata.get("name") or "") != name:
            raise errors.bad_request(f"the name of the object ({metadata.get('name') or ''}) does not match the name on the URL ({name})")

    @staticmethod
    def _decode_error(
        strategy: KindStrategy, obj: Obj, decoded: bodies.DecodeFindings | None, converted: bool = False
    ) -> tuple[str | None, schemas.UnknownFields | None]:
        """Go's error decoding a body (or a patched object) into the kind's Go type, which
        upstream does before anything else looks at it (a body naming another kind or version is
        refused for that instead); ``converted``: the error of converting it from its
        unstructured form instead. With it, what decoding found of the fields the schema does not
        know, for ``_drop_unknown_fields`` (one walk does both; None when it did not look)."""
        if obj.get("kind") not in (None, "", strategy.kind) or obj.get("apiVersion") not in (None, "", strategy.api_version):
            return None, None
        if converted:
            return bodies.kind_conversion_error(obj, strategy.api_version, strategy.kind), None
        return bodies.decode_finding_unknown(obj, strategy.api_version, strategy.kind, decoded is not None and decoded.out_of_range_numbers)

    def _decode_body(self, strategy: KindStrategy, obj: Obj) -> tuple[bodies.DecodeFindings | None, schemas.UnknownFields | None]:
        """What decoding a create's or update's body found (and of its unknown fields, see
        ``_decode_error``); a value of the wrong JSON type is upstream's 400 from
        transformDecodeError, in the body's document order."""
        decoded = bodies.take_decode_findings()
        if decoded is not None and decoded.typed:
            return decoded, None
        unmarshal, unknown = self._decode_error(strategy, obj, decoded)
        if unmarshal is not None:
            raise errors.bad_request(f"{_cannot_handle(strategy, obj)}: {unmarshal}")
        return decoded, unknown

    @staticmethod
    def _drop_unknown_fields(strategy: KindStrategy, obj: Obj, found: schemas.UnknownFields | None) -> list[str]:
        """Drop the fields the schema does not know, and nulls, from ``obj``: those decoding found
        (after the request's checks of the body's type and place, which fill some nulls in), or
        found now. Their paths in document order."""
        if found is None:
            return schemas.prune_unknown_fields(obj, strategy.api_version, strategy.kind)
        found.drop()
        return found.paths

    def _field_validation(
        self,
        strategy: KindStrategy,
        obj: Obj,
        decoded: bodies.DecodeFindings | None,
        found: schemas.UnknownFields | None,
        wopts: WriteOptions,
        warnings: list[str],
    ) -> None:
        """Drop fields the schema does not know; Strict refuses them and repeated keys of the body
        (400, as upstream's decoder), Warn reports them."""
        if found is None and decoded is not None and decoded.typed and bodies.typed_bodies_fully_known(strategy.api_version, strategy.kind):
            return  # decoded from protobuf into the kind's Go type (obj is of strategy's kind by now): the walk would find nothing
        ordered = decoded is not None and bool(decoded.duplicate_fields) and wopts.field_validation != "Ignore"
        positions = bodies.document_positions(obj) if ordered else None
        unknown = self._drop_unknown_fields(strategy, obj, found)
        if wopts.field_validation == "Ignore" or (not unknown and (decoded is None or decoded.typed)):
            return  # nothing to report: a typed body (protobuf) has no repeated keys
        strict = (decoded or bodies.DecodeFindings()).strict_errors(unknown, positions)
        if not strict:
            return
        if wopts.field_validation == "Strict":
            raise errors.bad_request(f"{_cannot_handle(strategy, obj)}: strict decoding error: {', '.join(strict)}")
        warnings.extend(bodies.strict_warnings(strict))

    def _patch_field_validation(
        self,
        strategy: KindStrategy,
        new: Obj,
        patch: Any,
        patch_type: str,
        decoded: bodies.DecodeFindings | None,
        found: schemas.UnknownFields | None,
        wopts: WriteOptions,
        warnings: list[str],
    ) -> None:
        """A patched object's unknown fields are dropped; Strict refuses them and the repeated keys
        of the patch (422 on the field "patch", as upstream's patchers), Warn reports them."""
        snapshot = orjson.dumps(new, option=orjson.OPT_SORT_KEYS) if wopts.field_validation == "Strict" else b""
        unknown = self._drop_unknown_fields(strategy, new, found)
        if wopts.field_validation == "Ignore":
            return
        strict = patches.patch_strict_errors(patch, patch_type, decoded.duplicate_fields if decoded is not None else [])
        strict += [f'unknown field "{path}"' for path in sorted(unknown, key=bodies.sorted_field_order)]
        if not strict:
            return
        if wopts.field_validation == "Strict":
            shown = patches.go_format(patch) if patch_type == "strategic" else snapshot.decode()
            raise patches.invalid_patch(shown, f"strict decoding error: {', '.join(strict)}")
        warnings.extend(strict)

    @staticmethod
    def _apply_field_validation(decoded: bodies.DecodeFindings | None, wopts: WriteOptions, warnings: list[str]) -> None:
        """Upstream reads an applied configuration strictly only for repeated keys (unknown fields
        fail the apply itself), after the apply: Strict refuses them (400), Warn reports them."""
        if decoded is None or not decoded.yaml_duplicates or wopts.field_validation == "Ignore":
            return
        error = bodies.YAML_UNMARSHAL_ERRORS + "\n  ".join(decoded.yaml_duplicates)
        if wopts.field_validation == "Strict":
            raise errors.bad_request(f"error strict decoding YAML: error converting YAML to JSON: {error}")
        warnings.extend(bodies.strict_warnings([error]))

    def _validate_meta(self, strategy: KindStrategy, obj: Obj, old: Obj | None = None) -> list[FieldError]:
        """Upstream's ObjectMeta rules (core/v1 Events are exempt upstream)."""
        if not strategy.validates_object_meta:
            return []
        if old is None:
            return validate_object_meta(obj, strategy.namespaced, strategy.name_rule, kube_finalizers=strategy.object_meta_kube_finalizers)
        return validate_object_meta_update(obj, old, kube_finalizers=strategy.object_meta_kube_finalizers)

    async def create(self, strategy: KindStrategy, namespace: str, obj: Any, wopts: WriteOptions, applied: bool = False, replacing: bool = False) -> WriteResult:
        """Create ``obj``. ``applied``: it comes from a server-side apply, which recorded managedFields
        already; ``replacing``: from a PUT (both drop a resourceVersion the body carries, where a
        POST is refused one). ``obj`` is a decoded body, of any JSON type until checked here (typed
        ``Any``: mypyc, kube/compiled.py, would refuse a list with a TypeError, a 500)."""
        if not isinstance(obj, dict):
            raise errors.bad_request(f"the body of the request must be a {strategy.kind} object")
        decoded, unknown = self._decode_body(strategy, obj)
        self._check_type_and_scope(strategy, obj, namespace, None)
        warnings: list[str] = []
        self._field_validation(strategy, obj, decoded, unknown, wopts, warnings)
        await self._check_namespace_for_create(strategy, namespace)
        metadata = obj["metadata"]
        name = metadata.get("name") or ""
        generate = metadata.get("generateName") or ""
        if not isinstance(name, str) or not isinstance(generate, str):
            raise self._invalid(strategy, "", [errors.invalid("metadata.name", name, "must be a string")])
        if not (applied or replacing or wopts.dry_run) and _numbered_revision(metadata.get("resourceVersion")):
            # upstream's storage refuses this (a plain error there, a 500): the client's mistake.
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        for key in ("uid", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            metadata.pop(key, None)
        if not applied:
            metadata.pop("managedFields", None)
        now = now_rfc3339()
        metadata["uid"] = new_uid()
        metadata["creationTimestamp"] = now
        if strategy.tracks_generation:
            metadata["generation"] = 1
        else:
            metadata.pop("generation", None)
        ctx = self.context(namespace)
        # Pods' admission runs here and names a pod by its generateName, as upstream's mutating
        # admission does before the store generates the name.
        strategy.prepare_for_create(obj, ctx)
        generated = not name and bool(generate)
        if generated:
            # After PrepareForCreate and before validation, which checks the name too (upstream's BeforeCreate).
            metadata["name"] = _generated_name(generate)
        strategy.prepare_named(obj, ctx)
        strategy.default(obj, ctx)
        strategy.drop_disabled_fields(obj, None, ctx)
        if strategy.stored:
            complete_status(strategy, obj)
        errs = self._validate_meta(strategy, obj) + strategy.validate_create(obj, ctx)
        if errs:
            raise self._invalid(strategy, metadata.get("name") or "", errs)
        warnings.extend(ctx.warnings)
        if not strategy.stored:
            return WriteResult(strategy.respond(obj, ctx), created=True, warnings=warnings)
        self._admit(CREATE, strategy, namespace, name, obj, None, options=wopts)
        if not applied:
            ssa.update_managed_fields(None, obj, wopts.field_manager, "Update", strategy.api_version, now, reset_fields=strategy.reset_fields())
        await self._admit_write(CREATE, strategy, namespace, metadata["name"], obj, None, wopts.dry_run)
        if wopts.dry_run:
            return WriteResult(obj, created=True, warnings=warnings)
        for attempt in range(GENERATE_NAME_ATTEMPTS if generated else 1):
            if attempt:
                metadata["name"] = _generated_name(generate)
            op = WriteOp(ADDED, strategy.stored_resource, namespace if strategy.namespaced else "", metadata["name"], strategy.to_stored(obj))
            try:
                stored = await self.storage.write(op)
            except KeyExists:
                if name:
                    raise errors.already_exists(strategy.qualified_resource, name, strategy.group, strategy.plural) from None
                continue
            return WriteResult(_converted(strategy, stored), created=True, warnings=warnings)
        raise errors.already_exists(strategy.qualified_resource, metadata["name"], strategy.group, strategy.plural)

    # ---- update, patch ---------------------------------------------------------------

    async def _current(self, strategy: KindStrategy, namespace: str, name: str, fresh: bool) -> StoredObject | None:
        """The stored object to change, in the request's version."""
        current = await self.storage.read_for_update(strategy.stored_resource, namespace, name, fresh)
        return _converted(strategy, current) if current is not None else None

    async def guaranteed_update(
        self,
        strategy: KindStrategy,
        namespace: str,
        name: str,
        mutate: Callable[[StoredObject | None], Obj | None],
        *,
        dry_run: bool = False,
        create: Callable[[Obj], Any] | None = None,
        subresource: str = "",
    ) -> WriteResult:
        """Read, mutate, write with the read revision as precondition; retry on races.

        ``mutate`` returns the new object, or None for "nothing to change". It raises
        ApiError for client mistakes (including a stale resourceVersion the client gave).
        ``subresource``: the action subresource writing (the strategy's own otherwise).
        """
        ns = namespace if strategy.namespaced else ""
        fresh = False
        for _attempt in range(UPDATE_ATTEMPTS):
            current = await self._current(strategy, ns, name, fresh)
            new = mutate(current)
            if current is None:
                if new is None or create is None:
                    raise self._not_found(strategy, name)
                result: WriteResult = await create(new)
                return result
            if new is None:
                return WriteResult(current)
            deleting = bool(new["metadata"].get("deletionTimestamp")) and not strategy.blocks_deletion(new) and not new["metadata"].get("deletionGracePeriodSeconds")
            await self._admit_write(UPDATE, strategy, ns, name, new, current.obj, dry_run, subresource)
            if dry_run:
                return WriteResult(new)
            op = WriteOp(DELETED if deleting else MODIFIED, strategy.stored_resource, ns, name, strategy.to_stored(new), current.revision)
            try:
                stored = await self.storage.write(op)
            except RevisionMismatch:
                fresh = True
                continue
            return WriteResult(_converted(strategy, stored))
        raise self._conflict(strategy, name, "the object has been modified; please apply your changes to the latest version and try again")

    def _prepare_update(
        self,
        strategy: KindStrategy,
        current: StoredObject,
        new: Obj,
        wopts: WriteOptions,
        operation: str,
        warnings: list[str],
        subresource: str = "",
    ) -> Obj | None:
        """Shared update rules: preconditions, system metadata, strategy hooks, validation.

        A write through ``/status`` comes with the kind's status strategy, whose hooks keep
        everything but status from the stored object; a write through another subresource
        (``scale``) with the kind's own strategy names that subresource here."""
        subresource = subresource or strategy.subresource
        old = current.obj
        metadata = new["metadata"]
        name = old["metadata"]["name"]
        rv = metadata.get("resourceVersion")
        if rv not in (None, ""):
            if not isinstance(rv, str):
                raise errors.bad_request("metadata.resourceVersion must be a string")
            parse_resource_version(rv)
            if int(rv) != current.revision:
                raise self._conflict(strategy, name, "the object has been modified; please apply your changes to the latest version and try again")
        elif not strategy.allow_unconditional_update and operation == "Update":
            raise self._invalid(strategy, name, [errors.invalid("metadata.resourceVersion", 0, "must be specified for an update")])
        uid = metadata.get("uid")
        # An update naming a uid makes it a precondition (upstream's DefaultUpdatedObjectInfo).
        self._check_preconditions(strategy, name, old["metadata"], uid or None, None)
        old_meta = old["metadata"]
        for key in RESTORED_METADATA:
            if key in old_meta:
                metadata[key] = old_meta[key]
            else:
                metadata.pop(key, None)
        # A deletion once started stays as it is; one a client starts by hand is refused by
        # validation (the fields are immutable), as upstream refuses it.
        if old_meta.get("deletionTimestamp"):
            metadata["deletionTimestamp"] = old_meta["deletionTimestamp"]
        if old_meta.get("deletionGracePeriodSeconds") is not None and metadata.get("deletionGracePeriodSeconds") is None:
            metadata["deletionGracePeriodSeconds"] = old_meta["deletionGracePeriodSeconds"]
        metadata["resourceVersion"] = old["metadata"].get("resourceVersion")
        ctx = self.context(old["metadata"].get("namespace", ""))
        strategy.prepare_for_update(new, old, ctx)
        strategy.default(new, ctx)
        strategy.drop_disabled_fields(new, old, ctx)
        complete_status(strategy, new)
        if operation != "Apply":
            # Before validation, as upstream's field manager runs first: managedFields a client
            # sent that cannot be read give way to the stored ones, and what is left is validated.
            ssa.update_managed_fields(
                old, new, wopts.field_manager, operation, strategy.api_version, now_rfc3339(), subresource, reset_fields=strategy.reset_fields()
            )
        errs = self._validate_meta(strategy, new, old) + strategy.validate_update(new, old, ctx)
        if strategy.tracks_generation and strategy.spec_changed(new, old):
            new["metadata"]["generation"] = int(old["metadata"].get("generation") or 0) + 1
        if errs:
            raise self._invalid(strategy, name, errs)
        warnings.extend(ctx.warnings)
        self._admit(UPDATE, strategy, old["metadata"].get("namespace", ""), name, new, old, subresource, options=wopts)
        if _same_object(new, old):
            return None
        return new

    async def update(self, strategy: KindStrategy, namespace: str, name: str, obj: Any, wopts: WriteOptions) -> WriteResult:
        if not isinstance(obj, dict):
            raise errors.bad_request(f"the body of the request must be a {strategy.kind} object")
        decoded, unknown = self._decode_body(strategy, obj)
        self._check_type_and_scope(strategy, obj, namespace, name, replacing=True)
        warnings: list[str] = []
        self._field_validation(strategy, obj, decoded, unknown, wopts, warnings)
        body = orjson.dumps(obj)

        def mutate(current: StoredObject | None) -> Obj | None:
            new: Obj = orjson.loads(body)
            if current is None:
                return new if strategy.allow_create_on_update and not strategy.subresource else None
            return self._prepare_update(strategy, current, new, wopts, "Update", warnings)

        async def create(new: Obj) -> WriteResult:
            return await self.create(strategy, namespace, new, wopts, replacing=True)

        result = await self.guaranteed_update(strategy, namespace, name, mutate, dry_run=wopts.dry_run, create=create)
        result.warnings = warnings + result.warnings
        return result

    async def patch(
        self,
        strategy: KindStrategy,
        namespace: str,
        name: str,
        patch_body: Any,
        patch_type: str,
        wopts: WriteOptions,
    ) -> WriteResult:
        warnings: list[str] = []
        schema = schemas.schema_for_kind(strategy.api_version, strategy.kind)
        is_apply = patch_type == "apply"
        # What decoding the patch found (repeated keys), reported once whatever the retries.
        decoded = bodies.take_decode_findings()
        if not is_apply and wopts.field_validation != "Ignore":
            patches.check_patch_types(patch_body, patch_type)

        def mutate(current: StoredObject | None) -> Obj | None:
            now = now_rfc3339()
            unknown: schemas.UnknownFields | None = None  # what decoding the patched object found
            if is_apply and current is None and strategy.subresource:
                return None  # a subresource is never created: upstream's 404 comes before the apply
            if is_apply:
                applied = orjson.loads(orjson.dumps(patch_body))
                live = current.copy() if current is not None else None
                new = ssa.apply_patch(
                    live, applied, wopts.field_manager, wopts.force, schema, strategy.api_version, now, strategy.subresource,
                    kind=strategy.kind, reset_fields=strategy.reset_fields(),
                )
                self._apply_field_validation(decoded, wopts, warnings)
                if current is None:
                    uid = (new.get("metadata") or {}).get("uid")
                    if uid:
                        raise self._conflict(strategy, name, f"uid mismatch: the provided object specified uid {uid}, and no existing object was found")
                    self._check_type_and_scope(strategy, new, namespace, name)
                    return new
            else:
                if current is None:
                    return None
                doc = current.copy()  # this write's own: the patch changes it in place
                complete_status(strategy, doc)  # an object stored before statuses were completed
                if patch_type == "json":
                    new = patches.apply_json_patch(doc, patch_body, owned=True)
                elif patch_type == "merge":
                    new = patches.apply_merge_patch(doc, patch_body, owned=True)
                else:
                    new = patches.apply_strategic_merge_patch(doc, patch_body, schema, owned=True)
                # Upstream decodes a JSON or merge patch's result as a body, and converts a
                # strategic merge patch's from its unstructured form.
                mismatch, unknown = self._decode_error(strategy, new, None, converted=patch_type == "strategic")
                if mismatch is not None:
                    raise patches.undecodable_patch(new, patch_body, patch_type, mismatch)
            self._check_type_and_scope(strategy, new, namespace, name)
            if not is_apply:
                self._patch_field_validation(strategy, new, patch_body, patch_type, decoded, unknown, wopts, warnings)
            return self._prepare_update(strategy, current, new, wopts, "Apply" if is_apply else "Update", warnings)

        async def create(new: Obj) -> WriteResult:
            return await self.create(strategy, namespace, new, wopts, applied=True)

        result = await self.guaranteed_update(
            strategy, namespace, name, mutate, dry_run=wopts.dry_run, create=create if is_apply and not strategy.subresource else None
        )
        result.warnings = warnings + result.warnings
        return result

    # ---- delete ---------------------------------------------------------------------

    async def delete(self, strategy: KindStrategy, namespace: str, name: str, dopts: DeleteOptions) -> DeleteResult:
        ns = namespace if strategy.namespaced else ""
        fresh = False
        for _attempt in range(UPDATE_ATTEMPTS):
            current = await self._current(strategy, ns, name, fresh)
            if current is None:
                raise self._not_found(strategy, name)
            meta = current.obj["metadata"]
            self._check_delete_preconditions(strategy, name, meta, dopts)
            strategy.check_delete(current.obj)
            self._admit(DELETE, strategy, ns, name, None, current.obj, options=dopts)
            new = current.copy()
            new_meta = new["metadata"]
            grace = strategy.delete_grace_period(current.obj, dopts.grace_period_seconds)
            existing_grace = meta.get("deletionGracePeriodSeconds")
            if meta.get("deletionTimestamp") and existing_grace is not None and grace >= existing_grace and strategy.blocks_deletion(current.obj) is False and grace > 0:
                # Already being deleted gracefully with a shorter or equal grace period.
                return DeleteResult(current, False)
            finalizers = list(new_meta.get("finalizers") or [])
            policy = dopts.propagation_policy
            if policy is None and dopts.orphan_dependents:
                policy = "Orphan"
            if policy is None and dopts.orphan_dependents is None and not {"orphan", "foregroundDeletion"} & set(finalizers):
                # Neither the request nor the object says: the kind's default (upstream's DefaultGarbageCollectionPolicy).
                policy = strategy.default_propagation_policy
            if policy == "Foreground" and "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
            elif policy == "Orphan" and "orphan" not in finalizers:
                finalizers.append("orphan")
            if finalizers:
                new_meta["finalizers"] = finalizers
            blocked = strategy.blocks_deletion(new)
            if grace > 0 or blocked:
                if not new_meta.get("deletionTimestamp") or grace > 0:
                    try:
                        when = datetime.now(UTC) + timedelta(seconds=grace)
                    except OverflowError:  # a grace period of millennia: the latest time RFC 3339 can say
                        when = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
                    new_meta["deletionTimestamp"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
                new_meta["deletionGracePeriodSeconds"] = grace
                if new_meta.get("generation") is not None and not meta.get("deletionTimestamp"):
                    new_meta["generation"] = int(new_meta["generation"]) + 1
                strategy.prepare_for_delete(new)
                if dopts.dry_run:
                    return DeleteResult(new, False)
                op = WriteOp(MODIFIED, strategy.stored_resource, ns, name, strategy.to_stored(new), current.revision)
                deleted_now = False
            else:
                if dopts.dry_run:
                    return DeleteResult(current, True)
                if not new_meta.get("deletionTimestamp"):
                    new_meta["deletionTimestamp"] = now_rfc3339()
                    new_meta["deletionGracePeriodSeconds"] = 0
                op = WriteOp(DELETED, strategy.stored_resource, ns, name, strategy.to_stored(new), current.revision)
                deleted_now = True
            try:
                stored = await self.storage.write(op)
            except RevisionMismatch:
                fresh = True
                continue
            return DeleteResult(_converted(strategy, stored), deleted_now, {"name": name, "group": strategy.group, "kind": strategy.plural, "uid": meta.get("uid")})
        raise self._conflict(strategy, name, "the object has been modified; please apply your changes to the latest version and try again")

    async def delete_collection(self, strategy: KindStrategy, namespace: str | None, opts: ListOptions, dopts: DeleteOptions) -> tuple[list[StoredObject | Obj], dict[str, Any]]:
        """Delete what the selectors select; the first failure is the answer."""
        items, _meta = await self.list_objects(strategy, namespace, ListOptions(label_selector=opts.label_selector, field_selector=opts.field_selector))
        return await self.delete_each(strategy, items, dopts), {"resourceVersion": str(self.storage.revision)}

    async def delete_each(self, strategy: KindStrategy, items: list[StoredObject], dopts: DeleteOptions, *, stop_at_refusal: bool = True) -> list[StoredObject | Obj]:
        """Delete ``items``, each as its own DELETE would, up to ``delete_collection_workers`` at
        once (their writes share group commits); what was deleted or marked for deletion, in the
        items' order. Objects already gone are skipped; the first refusal (an ApiError) stops the
        rest from starting and is raised, or with ``stop_at_refusal=False`` is passed over."""
        run = _CollectionDelete(self, strategy, items, dopts, stop_at_refusal)
        await asyncio.gather(*(run.work() for _ in range(min(self.delete_collection_workers, len(items)))))
        if run.failure is not None:
            raise run.failure
        return [obj for obj in run.deleted if obj is not None]

    # ---- subresources ---------------------------------------------------------------

    async def write_subresource(self, strategy: KindStrategy, subresource: ActionSubresource, namespace: str, name: str, body: Any, wopts: WriteOptions) -> WriteResult:
        """The one write of an action subresource (``NAME/binding``): the subresource's own rule
        applied to the stored object, retried on races like any update."""
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body of the request must be a {subresource.group_version_kind(strategy)[2]} object")
        subresource.check(strategy, name, body)
        uid, resource_version = subresource.preconditions(body)

        def mutate(current: StoredObject | None) -> Obj | None:
            if current is None:
                return None
            self._check_preconditions(strategy, name, current.obj["metadata"], uid, resource_version)
            operation = CREATE if "create" in subresource.verbs else UPDATE
            kind = subresource.group_version_kind(strategy)[2]
            self._admit(operation, strategy, namespace, name, body, current.obj, subresource.name, options=wopts, kind=kind)
            new = subresource.apply(strategy, name, body, current.copy())
            if new == current.obj:
                return None
            if subresource.records_managed_fields:
                ssa.update_managed_fields(current.obj, new, wopts.field_manager, "Update", strategy.api_version, now_rfc3339(), subresource.name)
            return new

        return await self.guaranteed_update(strategy, namespace, name, mutate, dry_run=wopts.dry_run, subresource=subresource.name)


    async def get_scale(self, strategy: KindStrategy, subresource: ScaleSubresource, namespace: str, name: str) -> Obj:
        """The Scale of the stored object."""
        stored = await self.get(strategy, namespace, name)
        return subresource.scale_of(stored.obj)

    async def update_scale(
        self, strategy: KindStrategy, subresource: ScaleSubresource, namespace: str, name: str, change: Callable[[Obj], Any], wopts: WriteOptions
    ) -> tuple[Obj, list[str]]:
        """Set the object's replicas from the Scale ``change`` makes of its current Scale (a PUT's
        body, a patch applied to it), as upstream's ScaleREST: the Scale is checked (its type, name,
        replicas), its resourceVersion and uid are the update's preconditions, and the object is
        updated under the kind's own rules. Returns the new Scale and the write's warnings."""
        warnings: list[str] = []

        def mutate(current: StoredObject | None) -> Obj | None:
            if current is None:
                return None
            scale = self._checked_scale(strategy, subresource, namespace, name, change(subresource.scale_of(current.obj)))
            meta = scale["metadata"]
            uid = meta.get("uid")
            if uid and uid != current.obj["metadata"].get("uid"):
                why = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {current.obj['metadata'].get('uid', '')}"
                raise errors.conflict(f"{strategy.plural}/scale.{strategy.group}" if strategy.group else f"{strategy.plural}/scale", name, strategy.group, f"{strategy.plural}/scale", why)
            new = current.copy()
            new["spec"]["replicas"] = (scale.get("spec") or {}).get("replicas") or 0
            new["metadata"]["resourceVersion"] = meta.get("resourceVersion") or ""
            return self._prepare_update(strategy, current, new, wopts, "Update", warnings, subresource.name)

        result = await self.guaranteed_update(strategy, namespace, name, mutate, dry_run=wopts.dry_run)
        obj = result.obj.obj if isinstance(result.obj, StoredObject) else result.obj
        return subresource.scale_of(obj), warnings

    def _checked_scale(self, strategy: KindStrategy, subresource: ScaleSubresource, namespace: str, name: str, scale: Any) -> Obj:
        """A Scale a client wrote, as upstream's decoding and ValidateScale take it: 400 for another
        type or place, 422 (Scale.autoscaling) for replicas below 0."""
        group, version, kind = subresource.group_version_kind(strategy)
        api_version = f"{group}/{version}"
        if not isinstance(scale, dict):
            raise errors.bad_request(f"the body of the request must be a {kind} object")
        if scale.get("apiVersion") not in (None, "", api_version) or scale.get("kind") not in (None, "", kind):
            raise errors.bad_request(f'{scale.get("kind") or kind} in version "{str(scale.get("apiVersion") or api_version).rsplit("/", 1)[-1]}" cannot be handled as a {kind}')
        mismatch = bodies.kind_decode_error(scale, api_version, kind)
        if mismatch is not None:
            raise errors.bad_request(f'{kind} in version "{version}" cannot be handled as a {kind}: {mismatch}')
        schemas.prune_unknown_fields(scale, api_version, kind)
        meta = scale.get("metadata")
        if meta is None:
            meta = scale["metadata"] = {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        self._check_name(meta, name)
        if meta.get("namespace") not in (None, "", namespace):
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the request")
        replicas = (scale.get("spec") or {}).get("replicas") or 0
        if replicas < 0:
            raise errors.invalid_object(kind, name, group, [errors.invalid("spec.replicas", replicas, "must be greater than or equal to 0")])
        return scale

    async def compute_subresource(self, strategy: KindStrategy, subresource: ComputedSubresource, namespace: str, name: str, body: Any) -> Obj:
        """The answer of a computed subresource (a token) about the stored object; nothing is written."""
        kind = subresource.group_version_kind(strategy)[2]
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body of the request must be a {kind} object")
        current = self.storage.cached(strategy.stored_resource, namespace if strategy.namespaced else "", name)
        if current is None:
            raise self._not_found(strategy, name)
        self._admit(CREATE, strategy, namespace, name, body, current.obj, subresource.name, kind=kind)
        return subresource.respond(strategy, current.obj, body, self.context(namespace))


# (apiVersion, kind) -> the message of the kind's status when its Go type holds it by value.
_STATUS_MESSAGES: dict[tuple[str, str], protobuf.Message | None] = {}


def _status_message(api_version: str, kind: str) -> protobuf.Message | None:
    key = (api_version, kind)
    if key not in _STATUS_MESSAGES:
        message = protobuf.schema().kinds.get(key)
        found = next((f for f in message.fields if f.json == "status"), None) if message is not None else None
        by_value = found is not None and found.label == protobuf.MESSAGE and not found.pointer
        _STATUS_MESSAGES[key] = found.message if found is not None and by_value else None
    return _STATUS_MESSAGES[key]


def complete_status(strategy: KindStrategy, obj: Obj) -> None:
    """Give ``obj`` the status upstream serialises for it: a kind whose Go type holds its status by
    value (not a pointer) always has one, ``"status": {}`` at least, with the zero fields Go writes
    (``app.protobuf.fill_zero_fields``), so that a JSON patch can add to a new object's status."""
    message = _status_message(strategy.api_version, strategy.kind)
    if message is None:
        return
    status = obj.get("status")
    if status is None:
        obj["status"] = status = {}
    if isinstance(status, dict):
        protobuf.fill_zero_fields(status, message)


def _numbered_revision(value: Any) -> bool:
    """Whether a resourceVersion names a revision (a positive number; storage ignores others)."""
    return isinstance(value, str) and value.isascii() and value.isdigit() and int(value) > 0


def _cannot_handle(strategy: KindStrategy, obj: Obj) -> str:
    """The start of upstream's decoding errors (transformDecodeError): the kind and version the
    body named, and the kind the endpoint takes."""
    version = str(obj.get("apiVersion") or strategy.api_version).rsplit("/", 1)[-1]
    return f'{obj.get("kind") or strategy.kind} in version "{version}" cannot be handled as a {strategy.kind}'


def _converted(strategy: KindStrategy, stored: StoredObject) -> StoredObject:
    """A stored object in the version ``strategy`` serves (itself when that is the stored version)."""
    if not strategy.converts:
        return stored
    return StoredObject(strategy.from_stored(stored.obj), stored.revision)


class _CollectionDelete:
    """One deletecollection's deletes, shared by its workers: each takes the next object."""

    def __init__(self, store: GenericStore, strategy: KindStrategy, items: list[StoredObject], dopts: DeleteOptions, stop_at_refusal: bool) -> None:
        self.store = store
        self.stop_at_refusal = stop_at_refusal
        self.strategy = strategy
        self.items = items
        self.dopts = dopts
        self.next = 0
        self.deleted: list[StoredObject | Obj | None] = [None] * len(items)  # in the list's order
        self.failure: Exception | None = None

    async def work(self) -> None:
        while self.failure is None and self.next < len(self.items):
            index = self.next
            self.next += 1
            m = self.items[index].obj["metadata"]
            try:
                result = await self.store.delete(self.strategy, m.get("namespace", ""), m["name"], self.dopts)
            except ApiError as exc:
                if exc.code == 404 or not self.stop_at_refusal:
                    continue  # deleted meanwhile, or refused and passed over
                self.failure = exc
                return
            except Exception as exc:
                self.failure = exc
                return
            self.deleted[index] = result.obj


class _ConvertedBatches:
    """A watch's batches with each object in the version ``strategy`` serves (bookmarks as they are).

    A class rather than an async generator: mypyc (kube/compiled.py) compiles this module and has none."""

    def __init__(self, strategy: KindStrategy, batches: AsyncIterator[WatchBatch]) -> None:
        self._strategy = strategy
        self._batches = batches

    def __aiter__(self) -> _ConvertedBatches:
        return self

    async def __anext__(self) -> WatchBatch:
        batch = await anext(self._batches)
        strategy = self._strategy
        return [(kind, _converted(strategy, obj) if isinstance(obj, StoredObject) else obj) for kind, obj in batch]

    async def aclose(self) -> None:
        """Close the storage's stream too: it unregisters its watcher when closed."""
        close = getattr(self._batches, "aclose", None)
        if close is not None:
            await close()


def _read_error(exc: StorageError) -> ApiError:
    """The API status of a read storage could not serve."""
    if isinstance(exc, ResourceVersionTooLarge):
        if exc.requested is None:
            return ApiError(504, "Timeout", "Timeout: Too large resource version")
        return ApiError(
            504,
            "Timeout",
            f"Timeout: Too large resource version: {exc.requested}, current: {exc.current}",
            {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1},
        )
    return errors.gone(str(exc))


def _same_object(new: Obj, old: Obj) -> bool:
    """An update that changes nothing but managedFields timestamps is a no-op upstream."""
    if new == old:
        return True
    a = dict(new)
    b = dict(old)
    a["metadata"] = {k: v for k, v in new["metadata"].items() if k != "managedFields"}
    b["metadata"] = {k: v for k, v in old["metadata"].items() if k != "managedFields"}
    if a != b:
        return False
    return _strip_times(new["metadata"].get("managedFields")) == _strip_times(old["metadata"].get("managedFields"))


def _strip_times(entries: Any) -> Any:
    if not isinstance(entries, list):
        return entries
    return [{k: v for k, v in e.items() if k != "time"} if isinstance(e, dict) else e for e in entries]


def _generated_name(base: str) -> str:
    """upstream's SimpleNameGenerator: the prefix cut to 58 characters, and 5 random ones."""
    return base[:GENERATED_NAME_PREFIX_MAX] + "".join(random.choice(GENERATE_NAME_ALPHABET) for _ in range(5))
