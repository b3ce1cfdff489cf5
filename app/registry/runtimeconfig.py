"""``--runtime-config``: which API versions and resources a server serves, in kube-apiserver's syntax.

``key=value`` pairs, comma-separated: ``GROUP/VERSION=true|false`` (``v1`` for the core group),
``GROUP/VERSION/RESOURCE=true|false``, and ``api/all``, ``api/ga``, ``api/beta``, ``api/alpha``
for every version of that stability. Without it a server serves the stable versions only; older
beta and alpha versions of a kind are off until enabled. Keys are checked and applied in upstream's
order, with upstream's error messages: first the catch-all keys, then versions, then resources.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from app.registry import ALL_KINDS
from app.registry.base import KindStrategy
from kube.features import FeatureGates

log = logging.getLogger("app.registry")

API_ALL = "api/all"
# The catch-all keys in the order upstream applies them, and the versions each one addresses.
_MATCHERS: dict[str, re.Pattern[str]] = {
    API_ALL: re.compile(r""),
    "api/ga": re.compile(r"^v\d+$"),
    "api/beta": re.compile(r"^v\d+beta\d+$"),
    "api/alpha": re.compile(r"^v\d+alpha\d+$"),
}
_GA = _MATCHERS["api/ga"]
# strconv.ParseBool's spellings.
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


class RuntimeConfigError(ValueError):
    """A --runtime-config the server cannot start with (upstream's message)."""


def parse_configuration_map(text: str) -> dict[str, str]:
    """The flag's ``k=v,k2,k3=v3`` as a map (a key without ``=`` has the value ""), as component-base
    reads it, with kube-apiserver's rewriting of the core group's keys (``v1``, ``api/v1``) to ``/v1``
    and its dropping of the obsolete ``api/legacy``."""
    pairs: dict[str, str] = {}
    for item in text.split(","):
        if not item:
            continue
        key, sep, value = item.partition("=")
        pairs[key.strip()] = value.strip() if sep else ""
    for key in list(pairs):
        if key in ("v1", "api/v1") or key.startswith(("v1/", "api/v1/")):
            pairs["/v1"] = pairs.pop(key)
        elif key == "api/legacy":
            del pairs[key]
    return pairs


@dataclass
class _Enablement:
    versions: dict[tuple[str, str], bool] = field(default_factory=dict)
    resources: dict[tuple[str, str, str], bool] = field(default_factory=dict)

    def enabled(self, kind: KindStrategy) -> bool:
        explicit = self.resources.get((kind.group, kind.version, kind.plural))
        if explicit is not None:
            return explicit
        return self.versions.get((kind.group, kind.version), False)


def _parse_bool(key: str, value: str) -> bool:
    if value == "":
        return True
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    raise RuntimeConfigError(f'invalid value of {key}: {value}, err: strconv.ParseBool: parsing "{value}": invalid syntax')


def _validate(pairs: dict[str, str], kinds: tuple[KindStrategy, ...]) -> None:
    """Upstream's APIEnablementOptions.Validate: the shape of each key and the groups it names."""
    if pairs.get(API_ALL) == "false" and len(pairs) == 1:
        raise RuntimeConfigError(f"invalid key with only {API_ALL}=false")
    groups = {k.group for k in kinds}
    unknown: list[str] = []
    for key in pairs:
        if key in _MATCHERS:
            continue
        tokens = key.split("/")
        if len(tokens) not in (2, 3):
            raise RuntimeConfigError(f"runtime-config invalid key {key}")
        if tokens[0] not in groups:
            unknown.append(tokens[0])
    if unknown:
        raise RuntimeConfigError(f"unknown api groups {','.join(unknown)}")


def enabled_kinds(text: str, gates: FeatureGates | None = None, kinds: tuple[KindStrategy, ...] = ALL_KINDS) -> tuple[KindStrategy, ...]:
    """The kinds (of ``kinds``, in every version registered there) that ``--runtime-config=text``
    serves with these feature gates (default: the defaults); RuntimeConfigError with upstream's
    message for a flag upstream refuses."""
    pairs = parse_configuration_map(text)
    _validate(pairs, kinds)
    group_versions = {(k.group, k.version) for k in kinds}
    state = _Enablement(versions={gv: _GA.match(gv[1]) is not None for gv in group_versions})
    for key, matches in _MATCHERS.items():
        if key not in pairs:
            continue
        value = pairs[key]
        if value not in ("true", "false"):
            raise RuntimeConfigError(f"invalid value {key}={value}")
        for group, version in group_versions:
            if matches.match(version):
                state.versions[(group, version)] = value == "true"
    version_prefs: list[tuple[tuple[str, str], bool]] = []
    resource_prefs: list[tuple[tuple[str, str, str], bool]] = []
    for key, value in pairs.items():
        if key in _MATCHERS:
            continue
        tokens = key.split("/")
        group, version = tokens[0], tokens[1]
        if (group, version) not in group_versions:
            raise RuntimeConfigError(f"group version {group}/{version} that has not been registered" if group else f"group version {version} that has not been registered")
        enabled = _parse_bool(key, value)
        if len(tokens) == 2:
            version_prefs.append(((group, version), enabled))
        else:
            if tokens[2].lower() != tokens[2]:
                raise RuntimeConfigError(f'invalid key {key}: group/version/resource and resource is always lowercase plural, not "{tokens[2]}"')
            resource_prefs.append(((group, version, tokens[2]), enabled))
    for group_version, enabled in version_prefs:
        state.versions[group_version] = enabled
    for resource, enabled in resource_prefs:
        state.resources[resource] = enabled
    gates = gates if gates is not None else FeatureGates()
    served: list[KindStrategy] = []
    for kind in kinds:
        if not state.enabled(kind):
            continue
        if kind.feature_gate and not gates.enabled(kind.feature_gate):
            log.warning("%s, Resource=%s is disabled because the %s feature is disabled", kind.api_version, kind.plural, kind.feature_gate)
            continue
        served.append(kind)
    return tuple(served)
