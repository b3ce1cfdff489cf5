"""Query parameters of API requests, parsed and validated once, the way upstream does."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from app.api.patch import go_json_type
from app.registry.objectmeta import field_manager_errors, go_string_list
from kube.errors import ApiError, FieldError, GoSyntax, bad_request, forbidden, go_quote, invalid, invalid_object, not_supported, required
from kube.query import query_pairs

NOT_OLDER_THAN = "NotOlderThan"
EXACT = "Exact"


def query_bool(params: Mapping[str, str], name: str) -> bool | None:
    """Upstream's query decoding of a boolean: None when absent; otherwise anything but "0" or
    "false" (any case) is true, the empty string included (``?watch`` means watch)."""
    value = params.get(name)
    if value is None:
        return None
    return not (value == "0" or value.casefold() == "false")


def parse_bool(params: Mapping[str, str], name: str) -> bool:
    return bool(query_bool(params, name))


_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64_LIMIT = 1 << 63


def parse_int(params: Mapping[str, str], name: str) -> int | None:
    """upstream's parameter codec for an integer: Go's strconv.ParseInt(value, 10, 64), ASCII
    digits with an optional sign, in int64 range; a present but empty value is refused too. The
    400 carries strconv's error alone, as upstream's does.

    Python's int() is laxer (spaces, "1_000", other scripts' digits, any size), and an unbounded
    number once reached a timedelta and failed there with a 500.
    """
    value = params.get(name)
    if value is None:
        return None
    if not _GO_INT.fullmatch(value):
        raise bad_request(f"strconv.ParseInt: parsing {go_quote(value)}: invalid syntax")
    number = int(value)
    if not -_INT64_LIMIT <= number < _INT64_LIMIT:
        raise bad_request(f"strconv.ParseInt: parsing {go_quote(value)}: value out of range")
    return number


def parse_resource_version(value: str | None) -> int | None:
    """``None`` for unset or empty; the number otherwise; 400 for anything else."""
    if value is None or value == "":
        return None
    if not (value.isascii() and value.isdigit()):  # str.isdigit() is also true for "²", which int() refuses
        raise bad_request(f'invalid resource version "{value}": resource version must be a non-negative integer')
    return int(value)


@dataclass
class ListOptions:
    label_selector: str = ""
    field_selector: str = ""
    limit: int = 0
    continue_token: str = ""
    resource_version: str = ""
    resource_version_match: str = ""
    watch: bool = False
    allow_watch_bookmarks: bool = False
    send_initial_events: bool | None = None
    timeout_seconds: int | None = None
    include_object: str = ""

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> ListOptions:
        opts = cls(
            label_selector=params.get("labelSelector", ""),
            field_selector=params.get("fieldSelector", ""),
            limit=max(parse_int(params, "limit") or 0, 0),
            continue_token=params.get("continue", ""),
            resource_version=params.get("resourceVersion", ""),
            resource_version_match=params.get("resourceVersionMatch", ""),
            watch=parse_bool(params, "watch"),
            allow_watch_bookmarks=parse_bool(params, "allowWatchBookmarks"),
            send_initial_events=query_bool(params, "sendInitialEvents"),
            timeout_seconds=parse_int(params, "timeoutSeconds"),
            include_object=params.get("includeObject", ""),
        )
        opts.validate()
        return opts

    def validate(self) -> None:
        """apimachinery's ValidateListOptions (with the WatchList feature on): errors are a 422 on
        kind ListOptions. ``includeObject`` is read only by a Table conversion (``table_include_object``)."""
        parse_resource_version(self.resource_version)
        errors = self._watch_errors() if self.watch else self._list_errors()
        if errors:
            raise invalid_object("ListOptions", "", "meta.k8s.io", errors)

    def _list_errors(self) -> list[FieldError]:
        errors: list[FieldError] = []
        match = self.resource_version_match
        if match:
            if not self.resource_version:
                errors.append(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"))
            if self.continue_token:
                errors.append(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"))
            if match not in (EXACT, NOT_OLDER_THAN):
                errors.append(not_supported("resourceVersionMatch", match, [EXACT, NOT_OLDER_THAN, ""]))
            if match == EXACT and self.resource_version == "0":
                errors.append(forbidden("resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
        if self.send_initial_events is not None:
            errors.append(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
        return errors

    def _watch_errors(self) -> list[FieldError]:
        errors: list[FieldError] = []
        match = self.resource_version_match
        if self.send_initial_events is not None and match != NOT_OLDER_THAN:
            errors.append(forbidden("resourceVersionMatch", f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}"))
        if match:
            if self.send_initial_events is None:
                errors.append(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
            if match != NOT_OLDER_THAN:
                errors.append(not_supported("resourceVersionMatch", match, [NOT_OLDER_THAN]))
            if self.continue_token:
                errors.append(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"))
        return errors


TABLE_INCLUDE_OBJECT = ("", "None", "Metadata", "Object")


def table_include_object(value: str) -> str:
    """upstream's ValidateTableOptions, read only when an answer is converted to a Table: 400
    for a value other than Metadata, Object, None or empty (which means Metadata)."""
    if value not in TABLE_INCLUDE_OBJECT:
        error = invalid("includeObject", value, "must be 'Metadata', 'Object', 'None', or empty")
        raise bad_request(f"Unable to convert to Table as requested: {error}")
    return value or "Metadata"


CREATE_OPTIONS = "CreateOptions"
UPDATE_OPTIONS = "UpdateOptions"
PATCH_OPTIONS = "PatchOptions"
DRY_RUN_ALL = "All"
FIELD_VALIDATIONS = ("Ignore", "Strict", "Warn")


def dry_run_values(params: Mapping[str, str], query_string: bytes) -> list[str]:
    """Every ``dryRun`` value of the query, as upstream's parameter codec reads a []string (the
    query is parsed again only when there is one)."""
    if "dryRun" not in params:
        return []
    return [value for key, value in query_pairs(query_string) if key == "dryRun"] or [params["dryRun"]]


def _dry_run_errors(values: list[str]) -> list[FieldError]:
    """upstream's ValidateDryRun: every value must be "All" (the value is shown as Go's []string)."""
    if all(value == DRY_RUN_ALL for value in values):
        return []
    return [not_supported("dryRun", GoSyntax(go_string_list(values)), [DRY_RUN_ALL])]


@dataclass
class WriteOptions:
    dry_run: bool = False
    field_manager: str = ""
    field_validation: str = "Warn"
    force: bool = False
    # Which options these are (CreateOptions, UpdateOptions, PatchOptions).
    kind: str = CREATE_OPTIONS

    def admission_options(self, operation: str) -> dict[str, Any]:
        """These options as admission shows them (``request.options``): a CREATE is made with
        CreateOptions, whatever verb asked for it (a PUT or an apply that creates)."""
        kind = CREATE_OPTIONS if operation == "CREATE" else self.kind
        out: dict[str, Any] = {"kind": kind, "apiVersion": "meta.k8s.io/v1"}
        if self.dry_run:
            out["dryRun"] = [DRY_RUN_ALL]
        if kind == PATCH_OPTIONS and self.force:
            out["force"] = True
        if self.field_manager:
            out["fieldManager"] = self.field_manager
        out["fieldValidation"] = self.field_validation
        return out

    @classmethod
    def parse(
        cls,
        params: Mapping[str, str],
        user_agent: str = "",
        kind: str = CREATE_OPTIONS,
        patch_type: str | None = None,
        dry_run: list[str] | None = None,
    ) -> WriteOptions:
        """Create, Update or PatchOptions from the query, refused (422 on ``kind``) as upstream's
        ValidateCreateOptions, ValidateUpdateOptions and ValidatePatchOptions refuse them.
        ``dry_run`` holds every dryRun value (default: the one in ``params``)."""
        errors: list[FieldError] = []
        manager = params.get("fieldManager", "")
        if kind == PATCH_OPTIONS:
            if patch_type != "apply":
                if "force" in params:
                    errors.append(forbidden("force", "may not be specified for non-apply patch"))
            elif not manager:
                errors.append(required("fieldManager", "is required for apply patch"))
        errors += field_manager_errors(manager)
        values = dry_run if dry_run is not None else ([params["dryRun"]] if "dryRun" in params else [])
        errors += _dry_run_errors(values)
        validation = params.get("fieldValidation", "")
        if validation and validation not in FIELD_VALIDATIONS:
            errors.append(not_supported("fieldValidation", validation, ["", *FIELD_VALIDATIONS]))
        if errors:
            raise invalid_object(kind, "", "meta.k8s.io", errors)
        return cls(
            dry_run=bool(values),
            field_manager=manager or default_field_manager(user_agent),
            field_validation=validation or "Warn",
            force=parse_bool(params, "force"),
            kind=kind,
        )


def default_field_manager(user_agent: str) -> str:
    """Upstream names a manager after the client's User-Agent up to the first '/'."""
    name = (user_agent or "unknown").split("/", 1)[0]
    if not name.isprintable():  # rare: checked as a whole first, the common case skips the filter
        name = "".join(ch for ch in name if ch.isprintable())
    return name[:128] or "unknown"


@dataclass
class ContinueToken:
    revision: int
    start: str

    def encode(self) -> str:
        raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": self.revision, "start": self.start})
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, token: str) -> ContinueToken:
        try:
            padded = token + "=" * (-len(token) % 4)
            data = orjson.loads(base64.urlsafe_b64decode(padded.encode()))
            if data.get("v") != "meta.k8s.io/v1" or not isinstance(data.get("rv"), int) or not isinstance(data.get("start"), str):
                raise ValueError("unexpected content")
            if data["rv"] == 0:  # negative: continue at the newest revision (see continue_too_old)
                raise ValueError("invalid resource version")
            return cls(int(data["rv"]), data["start"])
        except (ValueError, TypeError, AttributeError, orjson.JSONDecodeError):
            raise bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)") from None


def continue_too_old(start: str) -> ApiError:
    """The 410 of a continue token whose revision is compacted away. Its Status carries a token that
    continues after the same key at the newest revision (revision -1), as upstream's does."""
    return ApiError(
        410,
        "Expired",
        "The provided continue parameter is too old to display a consistent list result. You can start a new list "
        "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
        "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
        "modified, or deleted between the time the first chunk was returned and now may show up in the list.",
        list_meta={"continue": ContinueToken(-1, start).encode()},
    )


@dataclass
class DeleteOptions:
    grace_period_seconds: int | None = None
    propagation_policy: str | None = None
    preconditions_uid: str | None = None
    preconditions_rv: str | None = None
    dry_run: bool = False
    orphan_dependents: bool | None = None

    def admission_options(self, operation: str = "DELETE") -> dict[str, Any]:
        """These options as admission shows them (``request.options``)."""
        out: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}
        if self.grace_period_seconds is not None:
            out["gracePeriodSeconds"] = self.grace_period_seconds
        preconditions = {k: v for k, v in (("uid", self.preconditions_uid), ("resourceVersion", self.preconditions_rv)) if v is not None}
        if preconditions:
            out["preconditions"] = preconditions
        if self.orphan_dependents is not None:
            out["orphanDependents"] = self.orphan_dependents
        if self.propagation_policy is not None:
            out["propagationPolicy"] = self.propagation_policy
        if self.dry_run:
            out["dryRun"] = [DRY_RUN_ALL]
        return out

    @classmethod
    def parse(cls, params: Mapping[str, str], body: object, dry_run: list[str] | None = None) -> DeleteOptions:
        """From the body when the request has one (``body`` not None), else from the query string
        (``dry_run``: every dryRun value in it): upstream reads one or the other, never both.
        Refused (422 on DeleteOptions) as upstream's ValidateDeleteOptions refuses them."""
        opts = cls()
        if body is not None:
            values = opts._read_body(body)
        else:
            opts.grace_period_seconds = parse_int(params, "gracePeriodSeconds")
            # Present, even empty, is a value (a pointer upstream), and an empty one is refused.
            opts.propagation_policy = params.get("propagationPolicy")
            opts.orphan_dependents = query_bool(params, "orphanDependents")
            values = dry_run if dry_run is not None else ([params["dryRun"]] if "dryRun" in params else [])
        problems: list[FieldError] = []
        if opts.orphan_dependents is not None and opts.propagation_policy is not None:
            problems.append(invalid("propagationPolicy", opts.propagation_policy, "orphanDependents and deletionPropagation cannot be both set"))
        if opts.propagation_policy not in (None, "Orphan", "Background", "Foreground"):
            problems.append(not_supported("propagationPolicy", opts.propagation_policy, ["Foreground", "Background", "Orphan", "nil"]))
        problems += _dry_run_errors(values)
        if problems:
            raise invalid_object("DeleteOptions", "", "meta.k8s.io", problems)
        opts.dry_run = bool(values)
        return opts

    def _read_body(self, body: object) -> list[str]:
        """The options of a DeleteOptions body (Go's decoding errors for wrong JSON types); its dryRun values."""
        if not isinstance(body, dict):
            raise bad_request(f"json: cannot unmarshal {go_json_type(body)} into Go value of type v1.DeleteOptions")
        kind = body.get("kind")
        if kind not in (None, "", "DeleteOptions"):
            raise bad_request(f"expected DeleteOptions, got {kind}")
        self.grace_period_seconds = _typed(body, "gracePeriodSeconds", int, "DeleteOptions.gracePeriodSeconds", "int64")
        self.propagation_policy = _typed(body, "propagationPolicy", str, "DeleteOptions.propagationPolicy", "v1.DeletionPropagation")
        self.orphan_dependents = _typed(body, "orphanDependents", bool, "DeleteOptions.orphanDependents", "bool")
        pre = _typed(body, "preconditions", dict, "DeleteOptions.preconditions", "v1.Preconditions") or {}
        self.preconditions_uid = _typed(pre, "uid", str, "Preconditions.preconditions.uid", "types.UID")
        self.preconditions_rv = _typed(pre, "resourceVersion", str, "Preconditions.preconditions.resourceVersion", "string")
        values = _typed(body, "dryRun", list, "DeleteOptions.dryRun", "[]string") or []
        for value in values:
            if not isinstance(value, str):
                raise bad_request(f"json: cannot unmarshal {go_json_type(value)} into Go struct field DeleteOptions.dryRun of type string")
        return values


def _typed(body: dict[str, Any], key: str, wanted: type, field: str, go_type: str) -> Any:
    """``body[key]`` (None when absent or null), or Go's error decoding a value of another JSON type."""
    value = body.get(key)
    if value is None:
        return None
    fits = isinstance(value, wanted) and (wanted is bool or not isinstance(value, bool))
    if not fits:
        # Go names a number by its literal where an integer cannot hold it, else values by their JSON type.
        shown = f"number {value}" if wanted is int and isinstance(value, float) else go_json_type(value)
        raise bad_request(f"json: cannot unmarshal {shown} into Go struct field {field} of type {go_type}")
    return value
