"""Name and format rules shared by every kind (apimachinery's validation helpers)."""

from __future__ import annotations

import re

from app.kube.errors import FieldError, invalid, required, too_long

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + r"(\." + _LABEL_FMT + ")*"
_LABEL_RE = re.compile(f"^{_LABEL_FMT}$")
_SUBDOMAIN_RE = re.compile(f"^{_SUBDOMAIN_FMT}$")


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
    """Upstream's NameIsDNSSubdomain / NameIsDNSLabel. A generateName prefix may end in '-'."""
    if not name:
        return [required(path, "name or generateName is required")]
    checked = name[:-1] if generated and name.endswith("-") else name
    if not checked:
        return []
    problems = dns1123_label_problems(checked) if rule == "label" else dns1123_subdomain_problems(checked)
    return [invalid(path, name, p) for p in problems]


def validate_max_bytes(value: str, path: str, limit: int) -> list[FieldError]:
    return [too_long(path, limit)] if len(value.encode()) > limit else []
