"""Name and format rules shared by every kind (apimachinery's validation helpers)."""

from __future__ import annotations

import re
from typing import Any

from kube.errors import REQUIRED, FieldError, GoSyntax, forbidden, invalid, required, too_long
from kube.labels import go_quote, label_key_errors, label_value_errors, remember_valid

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + r"(\." + _LABEL_FMT + ")*"
_LABEL_RE = re.compile(f"^{_LABEL_FMT}$")
_SUBDOMAIN_RE = re.compile(f"^{_SUBDOMAIN_FMT}$")


@remember_valid
def dns1123_label_problems(value: str) -> list[str]:
    problems: list[str] = []
    if len(value) > DNS1123_LABEL_MAX:
        problems.append(f"must be no more than {DNS1123_LABEL_MAX} characters")
    if not _LABEL_RE.match(value):
        problems.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
            "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
            f"'{_LABEL_FMT}')"
        )
    return problems


@remember_valid
def dns1123_subdomain_problems(value: str) -> list[str]:
    problems: list[str] = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        problems.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters")
    if not _SUBDOMAIN_RE.match(value):
        problems.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
            "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
            f"'{_SUBDOMAIN_FMT}')"
        )
    return problems


def validate_object_name(name: str, rule: str, path: str = "metadata.name", generated: bool = False) -> list[FieldError]:
    """Upstream's NameIsDNSSubdomain / NameIsDNSLabel, or for ``rule`` "path" (RBAC's names)
    ValidatePathSegmentName. A generateName prefix may end in '-'."""
    if not name:
        return [required(path, "name or generateName is required")]
    if rule == "path":
        return [invalid(path, name, p) for p in path_segment_problems(name, prefix=generated)]
    checked = name[:-1] if generated and name.endswith("-") else name
    if not checked:
        return []
    problems = dns1123_label_problems(checked) if rule == "label" else dns1123_subdomain_problems(checked)
    return [invalid(path, name, p) for p in problems]


def path_segment_problems(name: str, prefix: bool = False) -> list[str]:
    """Why ``name`` cannot be one segment of a URL path (a prefix may still be "." or "..")."""
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def validate_max_bytes(value: str, path: str, limit: int) -> list[FieldError]:
    return [too_long(path, limit)] if len(value.encode()) > limit else []


# ---------------------------------------------------------------------------------------------
# Generic field helpers (apimachinery's util/validation and api/validation, as field errors).
# ---------------------------------------------------------------------------------------------

# Message of an immutable field (apimachinery's FieldImmutableErrorMsg).
FIELD_IMMUTABLE = "field is immutable"
# Total bytes of annotation keys plus values an object may carry.
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * (1 << 10)
IS_NEGATIVE = "must be greater than or equal to 0"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_ERR = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
# Finalizers that need no domain prefix (core's IsStandardFinalizerName).
STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})
# Owner kinds upstream refuses (apimachinery's BannedOwners).
_BANNED_OWNERS = frozenset({("", "v1", "Event")})


@remember_valid
def qualified_name_problems(value: str) -> list[str]:
    """Upstream's IsQualifiedName: an optional DNS-subdomain prefix and a name of at most 63 bytes."""
    if value.count("/") > 1:
        # labels.py words this case for label keys; generic qualified names use upstream's wording.
        return [
            "a qualified name " + _QUALIFIED_NAME_ERR
            + f" (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{_QUALIFIED_NAME_FMT}')"
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    return label_key_errors(value)


def validate_qualified_name(value: str, path: str) -> list[FieldError]:
    """One Invalid error per problem with ``value`` as a qualified name."""
    return [invalid(path, value, p) for p in qualified_name_problems(value)]


def validate_label_key(value: str, path: str) -> list[FieldError]:
    """One Invalid error per problem with ``value`` as a label key."""
    return [invalid(path, value, p) for p in label_key_errors(value)]


def validate_label_value(value: str, path: str) -> list[FieldError]:
    """One Invalid error per problem with ``value`` as a label value."""
    return [invalid(path, value, p) for p in label_value_errors(value)]


def validate_dns1123_label(value: str, path: str) -> list[FieldError]:
    """One Invalid error per problem with ``value`` as an RFC 1123 label."""
    return [invalid(path, value, p) for p in dns1123_label_problems(value)]


def validate_dns1123_subdomain(value: str, path: str) -> list[FieldError]:
    """One Invalid error per problem with ``value`` as an RFC 1123 subdomain."""
    return [invalid(path, value, p) for p in dns1123_subdomain_problems(value)]


_HTTP_PATH = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"
_HTTP_PATH_RE = re.compile(f"^{_HTTP_PATH}$")


def validate_domain_prefixed_path(value: str, path: str) -> list[FieldError]:
    """apimachinery's IsDomainPrefixedPath: ``host/path`` with a DNS subdomain host and an HTTP path."""
    if not value:
        return [required(path)]
    host, slash, rest = value.partition("/")
    if not slash or not host or not rest:
        return [invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    errors = [invalid(path, host, problem) for problem in dns1123_subdomain_problems(host)]
    if not _HTTP_PATH_RE.match(rest):
        return [*errors, invalid(path, rest, f"Invalid path (regex used for validation is '{_HTTP_PATH}')")]
    return errors


def validate_nonnegative(value: object, path: str) -> list[FieldError]:
    """Upstream's ValidateNonnegativeField; a non-integer is reported instead of raising."""
    if not is_int(value):
        return [invalid(path, value, "must be an integer")]
    return [invalid(path, value, IS_NEGATIVE)] if value < 0 else []  # type: ignore[operator]


def validate_immutable(new: object, old: object, path: str) -> list[FieldError]:
    """Upstream's ValidateImmutableField (values compared after JSON decoding)."""
    return [] if new == old else [invalid(path, new, FIELD_IMMUTABLE)]


def is_int(value: object) -> bool:
    """A JSON integer (bool is not one, although Python thinks so)."""
    return isinstance(value, int) and not isinstance(value, bool)


def go_string_list(values: list[str]) -> str:
    """Go's ``%#v`` of a []string, as upstream embeds it in some messages."""
    return "[]string{" + ", ".join(go_quote(v) for v in values) + "}"


def _is_string_map(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def validate_labels(labels: object, path: str) -> list[FieldError]:
    """Label keys and values, reported at the map's path as upstream does (no per-key path)."""
    if labels is None:
        return []
    if not _is_string_map(labels):
        return [invalid(path, labels, "must be a map of string keys to string values")]
    assert isinstance(labels, dict)
    errs: list[FieldError] = []
    for key, value in labels.items():
        errs += validate_qualified_name(key, path)
        errs += validate_label_value(value, path)
    return errs


def validate_annotations(annotations: object, path: str) -> list[FieldError]:
    """Annotation keys are qualified names (case-insensitive); the whole map stays under 256 KiB."""
    if annotations is None:
        return []
    if not _is_string_map(annotations):
        return [invalid(path, annotations, "must be a map of string keys to string values")]
    assert isinstance(annotations, dict)
    errs: list[FieldError] = []
    total = 0
    for key, value in annotations.items():
        errs += [invalid(path, key, p) for p in qualified_name_problems(key.lower())]
        total += len(key.encode()) + len(value.encode())
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return errs


def _split_api_version(api_version: str) -> tuple[str, str] | None:
    """(group, version) as schema.ParseGroupVersion does; None when it would fail."""
    if not api_version:
        return "", ""
    parts = api_version.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    return None


def validate_owner_references(refs: object, path: str) -> list[FieldError]:
    """apiVersion (with a version), kind, name and uid set; no Event owners; at most one controller."""
    if refs is None:
        return []
    if not isinstance(refs, list):
        return [invalid(path, refs, "must be a list")]
    errs: list[FieldError] = []
    first_controller = ""
    for index, ref in enumerate(refs):
        if not isinstance(ref, dict):
            errs.append(invalid(f"{path}[{index}]", ref, "must be an object"))
            continue
        api_version = ref.get("apiVersion") if isinstance(ref.get("apiVersion"), str) else ""
        kind = ref.get("kind") if isinstance(ref.get("kind"), str) else ""
        name = ref.get("name") if isinstance(ref.get("name"), str) else ""
        uid = ref.get("uid") if isinstance(ref.get("uid"), str) else ""
        assert isinstance(api_version, str) and isinstance(kind, str)
        group_version = _split_api_version(api_version)
        # Upstream reports these at the list's path, not the entry's.
        if group_version is None or not group_version[1]:
            errs.append(invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
        if not kind:
            errs.append(invalid(f"{path}.kind", kind, "must not be empty"))
        if not name:
            errs.append(invalid(f"{path}.name", name, "must not be empty"))
        if not uid:
            errs.append(invalid(f"{path}.uid", uid, "must not be empty"))
        if group_version is not None and (group_version[0], group_version[1], kind) in _BANNED_OWNERS:
            errs.append(invalid(path, ref, f"{group_version[0]}/{group_version[1]}, Kind={kind} is disallowed from being an owner"))
        if ref.get("controller") is True:
            current = f"{kind}/{name}"
            if first_controller:
                errs.append(
                    invalid(
                        path,
                        refs,
                        'Only one reference can have Controller set to true. Found "true" in references for '
                        f"{first_controller} and {current}",
                    )
                )
            else:
                first_controller = current
    return errs


def validate_finalizers(finalizers: object, path: str, kube_names: bool = True) -> list[FieldError]:
    """Finalizer names (qualified names; core kinds also need a domain unless standard) and the
    orphan/foregroundDeletion conflict. Duplicates are allowed, as upstream allows them."""
    if finalizers is None:
        return []
    if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
        return [invalid(path, finalizers, "must be a list of strings")]
    errs: list[FieldError] = []
    for finalizer in finalizers:
        # apimachinery reports the qualified-name check at the list's path.
        errs += validate_qualified_name(finalizer, path)
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        errs.append(invalid(path, GoSyntax(go_string_list(finalizers)), "finalizer orphan and foregroundDeletion cannot be both set"))
    if kube_names:
        errs += _kube_finalizer_errors(finalizers, path)
    return errs


def _kube_finalizer_errors(finalizers: list[str], path: str) -> list[FieldError]:
    """Core's extra rule: a finalizer without a '/' must be one of the standard names."""
    return [
        invalid(f"{path}[{index}]", finalizer, "name is neither a standard finalizer name nor is it fully qualified")
        for index, finalizer in enumerate(finalizers)
        if "/" not in finalizer and finalizer not in STANDARD_FINALIZERS
    ]


FIELD_MANAGER_MAX_LENGTH = 128
SUBRESOURCE_NAME_MAX_LENGTH = 256


def field_manager_errors(manager: str, path: str = "fieldManager") -> list[FieldError]:
    """upstream's ValidateFieldManager: at most 128 bytes, printable characters only (the
    position is a byte offset, as Go ranges over a string)."""
    errs: list[FieldError] = []
    if len(manager.encode()) > FIELD_MANAGER_MAX_LENGTH:
        errs.append(too_long(path, FIELD_MANAGER_MAX_LENGTH))
    position = 0
    for char in manager:
        if not char.isprintable():
            errs.append(invalid(path, manager, f"invalid character U+{ord(char):04X} (at position {position})"))
        position += len(char.encode())
    return errs


def _validate_managed_fields(entries: object, path: str) -> list[FieldError]:
    if entries is None:
        return []
    if not isinstance(entries, list):
        return [invalid(path, entries, "must be a list")]
    errs: list[FieldError] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            errs.append(invalid(f"{path}[{index}]", entry, "must be an object"))
            continue
        operation = entry.get("operation")
        if operation not in ("Apply", "Update"):
            errs.append(invalid(f"{path}[{index}].operation", operation, "must be `Apply` or `Update`"))
        fields_type = entry.get("fieldsType")
        if fields_type and fields_type != "FieldsV1":
            errs.append(invalid(f"{path}[{index}].fieldsType", fields_type, "must be `FieldsV1`"))
        manager = entry.get("manager")
        if isinstance(manager, str):
            errs += field_manager_errors(manager, f"{path}[{index}].manager")
        subresource = entry.get("subresource")
        if isinstance(subresource, str) and len(subresource.encode()) > SUBRESOURCE_NAME_MAX_LENGTH:
            errs.append(too_long(f"{path}[{index}].subresource", SUBRESOURCE_NAME_MAX_LENGTH))
    return errs


def _str_field(metadata: dict[str, Any], key: str, errs: list[FieldError]) -> str:
    """A string metadata field; a wrong JSON type becomes a field error and reads as empty."""
    value = metadata.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        errs.append(invalid(f"metadata.{key}", value, "must be a string"))
        return ""
    return value


def validate_object_meta(
    obj: dict[str, Any], namespaced: bool, name_rule: str, kube_finalizers: bool = True
) -> list[FieldError]:
    """Upstream's ValidateObjectMeta for a create (name generation may still be pending).

    ``name_rule`` is "subdomain" or "label"; ``kube_finalizers`` adds core's rule that a finalizer
    without a domain must be a standard one (all built-in kinds but Lease and Event use it).
    """
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return [invalid("metadata", metadata, "must be an object")]
    errs: list[FieldError] = []
    name = _str_field(metadata, "name", errs)
    generate_name = _str_field(metadata, "generateName", errs)
    namespace = _str_field(metadata, "namespace", errs)
    if generate_name:
        errs += [
            e for e in validate_object_name(generate_name, name_rule, "metadata.generateName", generated=True)
            if e.reason != REQUIRED
        ]
    if name:
        errs += validate_object_name(name, name_rule)
    elif not generate_name:
        errs.append(required("metadata.name", "name or generateName is required"))
    if namespaced:
        if not namespace:
            errs.append(required("metadata.namespace"))
        else:
            errs += validate_object_name(namespace, "label", "metadata.namespace")
    elif namespace:
        errs.append(forbidden("metadata.namespace", "not allowed on this type"))
    if metadata.get("generation") is not None:
        errs += validate_nonnegative(metadata["generation"], "metadata.generation")
    errs += _validate_common_meta(metadata)
    errs += validate_finalizers(metadata.get("finalizers"), "metadata.finalizers", kube_finalizers)
    return errs


def _validate_common_meta(metadata: dict[str, Any]) -> list[FieldError]:
    errs = validate_labels(metadata.get("labels"), "metadata.labels")
    errs += validate_annotations(metadata.get("annotations"), "metadata.annotations")
    errs += validate_owner_references(metadata.get("ownerReferences"), "metadata.ownerReferences")
    errs += _validate_managed_fields(metadata.get("managedFields"), "metadata.managedFields")
    return errs


def validate_object_meta_update(new: dict[str, Any], old: dict[str, Any], kube_finalizers: bool = True) -> list[FieldError]:
    """Upstream's ValidateObjectMetaUpdate (without its resourceVersion check, which the REST
    layer owns: an unconditional update is given the stored resourceVersion before validation)."""
    new_meta = new.get("metadata")
    old_meta = old.get("metadata") or {}
    if not isinstance(new_meta, dict):
        return [invalid("metadata", new_meta, "must be an object")]
    errs: list[FieldError] = []
    new_finalizers = new_meta.get("finalizers")
    if old_meta.get("deletionTimestamp") and isinstance(new_finalizers, list):
        old_set = set(old_meta.get("finalizers") or [])
        extra = sorted({f for f in new_finalizers if isinstance(f, str)} - old_set)
        if extra:
            errs.append(
                forbidden(
                    "metadata.finalizers",
                    "no new finalizers can be added if the object is being deleted, found new finalizers "
                    + go_string_list(extra),
                )
            )
    new_generation = new_meta.get("generation") or 0
    old_generation = old_meta.get("generation") or 0
    if is_int(new_generation) and is_int(old_generation) and new_generation < old_generation:
        errs.append(invalid("metadata.generation", new_generation, "must not be decremented"))
    for key in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
        # Absent and empty are the same field value upstream.
        errs += validate_immutable(new_meta.get(key) or None, old_meta.get(key) or None, f"metadata.{key}")
    errs += _validate_common_meta(new_meta)
    if new_finalizers is not None and (
        not isinstance(new_finalizers, list) or not all(isinstance(f, str) for f in new_finalizers)
    ):
        errs.append(invalid("metadata.finalizers", new_finalizers, "must be a list of strings"))
    elif kube_finalizers and new_finalizers:
        errs += _kube_finalizer_errors(new_finalizers, "metadata.finalizers")
    return errs
