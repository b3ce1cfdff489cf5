"""Query parameters of API requests, parsed and validated once, the way upstream does."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from app.api.patch import go_json_type
from kube.errors import ApiError, FieldError, bad_request, forbidden, invalid, invalid_object, not_supported

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
    """Go's strconv.ParseInt(value, 10, 64): ASCII digits with an optional sign, in int64 range.

    Python's int() is laxer (spaces, "1_000", other scripts' digits, any size), and an unbounded
    number once reached a timedelta and failed there with a 500.
    """
    value = params.get(name)
    if value is None or value == "":
        return None
    if not _GO_INT.fullmatch(value):
        raise bad_request(f'invalid value for {name}: strconv.ParseInt: parsing "{value}": invalid syntax')
    number = int(value)
    if not -_INT64_LIMIT <= number < _INT64_LIMIT:
        raise bad_request(f'invalid value for {name}: strconv.ParseInt: parsing "{value}": value out of range')
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
    include_object: str = "Metadata"

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
            include_object=params.get("includeObject", "Metadata") or "Metadata",
        )
        opts.validate()
        return opts

    def validate(self) -> None:
        """apimachinery's ValidateListOptions: errors are a 422 on kind ListOptions."""
        errors: list[FieldError] = []
        parse_resource_version(self.resource_version)
        match = self.resource_version_match
        if match:
            if match not in (NOT_OLDER_THAN, EXACT):
                errors.append(not_supported("resourceVersionMatch", match, [EXACT, NOT_OLDER_THAN]))
            if self.watch and self.send_initial_events is None:
                errors.append(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
            if not self.resource_version and not (self.watch and self.send_initial_events):
                errors.append(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"))
            if self.continue_token:
                errors.append(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"))
            if match == EXACT and self.resource_version == "0":
                errors.append(forbidden("resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
        if self.send_initial_events is not None:
            if not self.watch:
                errors.append(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
            elif match != NOT_OLDER_THAN:
                errors.append(
                    forbidden("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
                )
            if self.watch and not self.allow_watch_bookmarks and self.send_initial_events:
                errors.append(forbidden("allowWatchBookmarks", "sendInitialEvents requires setting allowWatchBookmarks to true"))
        if self.include_object not in ("None", "Metadata", "Object"):
            errors.append(not_supported("includeObject", self.include_object, ["None", "Metadata", "Object"]))
        if errors:
            raise invalid_object("ListOptions", "", "meta.k8s.io", errors)


@dataclass
class WriteOptions:
    dry_run: bool = False
    field_manager: str = ""
    field_validation: str = "Warn"
    force: bool = False

    @classmethod
    def parse(cls, params: Mapping[str, str], user_agent: str = "") -> WriteOptions:
        dry_run_values = [v for k, v in _multi(params, "dryRun")]
        for value in dry_run_values:
            if value != "All":
                raise invalid_object("CreateOptions", "", "meta.k8s.io", [not_supported("dryRun", value, ["All"])])
        validation = params.get("fieldValidation", "") or "Warn"
        lowered = {"strict": "Strict", "warn": "Warn", "ignore": "Ignore"}.get(validation.lower())
        if lowered is None:
            raise bad_request(f"fieldValidation parameter unsupported: {validation}; must be one of Strict, Warn, Ignore")
        manager = params.get("fieldManager", "")
        if len(manager) > 128:
            raise invalid_object("CreateOptions", "", "meta.k8s.io", [invalid("fieldManager", manager, "must be no more than 128 characters")])
        return cls(
            dry_run=bool(dry_run_values),
            field_manager=manager or default_field_manager(user_agent),
            field_validation=lowered,
            force=parse_bool(params, "force"),
        )


def _multi(params: Mapping[str, str], name: str) -> list[tuple[str, str]]:
    getter = getattr(params, "getlist", None)
    if getter is not None:
        return [(name, v) for v in getter(name)]
    value = params.get(name)
    return [(name, value)] if value is not None else []


def default_field_manager(user_agent: str) -> str:
    """Upstream names a manager after the client's User-Agent up to the first '/'."""
    name = (user_agent or "unknown").split("/", 1)[0]
    return "".join(ch for ch in name if ch.isprintable())[:128] or "unknown"


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
            if data["rv"] <= 0:
                raise ValueError("invalid resource version")
            return cls(int(data["rv"]), data["start"])
        except (ValueError, TypeError, AttributeError, orjson.JSONDecodeError):
            raise bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)") from None


def continue_too_old(token_revision: int) -> ApiError:
    return ApiError(
        410,
        "Expired",
        "The provided continue parameter is too old to display a consistent list result. You can start a new list "
        "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
        "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
        "modified, or deleted between the time the first chunk was returned and now may show up in the list.",
    )


@dataclass
class DeleteOptions:
    grace_period_seconds: int | None = None
    propagation_policy: str | None = None
    preconditions_uid: str | None = None
    preconditions_rv: str | None = None
    dry_run: bool = False
    orphan_dependents: bool | None = None

    @classmethod
    def parse(cls, params: Mapping[str, str], body: object) -> DeleteOptions:
        """From the body when the request has one (``body`` not None), else from the query string:
        upstream reads one or the other, never both."""
        opts = cls()
        if body is not None:
            if not isinstance(body, dict):
                raise bad_request(f"json: cannot unmarshal {go_json_type(body)} into Go value of type v1.DeleteOptions")
            kind = body.get("kind")
            if kind not in (None, "DeleteOptions"):
                raise bad_request(f"expected DeleteOptions, got {kind}")
            grace = body.get("gracePeriodSeconds")
            if grace is not None and not isinstance(grace, int):
                raise bad_request("gracePeriodSeconds must be an integer")
            opts.grace_period_seconds = grace
            opts.propagation_policy = body.get("propagationPolicy")
            pre = body.get("preconditions") or {}
            if not isinstance(pre, dict):
                raise bad_request("preconditions must be an object")
            opts.preconditions_uid = pre.get("uid")
            opts.preconditions_rv = pre.get("resourceVersion")
            orphan = body.get("orphanDependents")
            if orphan is not None and not isinstance(orphan, bool):
                raise bad_request(f"json: cannot unmarshal {go_json_type(orphan)} into Go struct field DeleteOptions.orphanDependents of type bool")
            opts.orphan_dependents = orphan
            if body.get("dryRun"):
                if body["dryRun"] != ["All"]:
                    raise invalid_object("DeleteOptions", "", "meta.k8s.io", [not_supported("dryRun", body["dryRun"], ["All"])])
                opts.dry_run = True
        else:
            opts.grace_period_seconds = parse_int(params, "gracePeriodSeconds")
            if params.get("propagationPolicy"):
                opts.propagation_policy = params["propagationPolicy"]
            opts.orphan_dependents = query_bool(params, "orphanDependents")
            if params.get("dryRun"):
                if params["dryRun"] != "All":
                    raise invalid_object("DeleteOptions", "", "meta.k8s.io", [not_supported("dryRun", params["dryRun"], ["All"])])
                opts.dry_run = True
        problems: list[FieldError] = []
        if opts.orphan_dependents is not None and opts.propagation_policy is not None:
            problems.append(invalid("propagationPolicy", opts.propagation_policy, "orphanDependents and deletionPropagation cannot be both set"))
        if opts.propagation_policy not in (None, "Orphan", "Background", "Foreground"):
            problems.append(not_supported("propagationPolicy", opts.propagation_policy, ["Foreground", "Background", "Orphan", "nil"]))
        if problems:
            raise invalid_object("DeleteOptions", "", "meta.k8s.io", problems)
        return opts
