"""What an object uses of a quota, per resource, as upstream's quota evaluators measure it.

An evaluator knows one resource (group and plural): which quota names it can count
(``matching_resources``), which writes can change what it counts (``handles``), whether an object
falls under a quota's scopes (``matches``), what one object uses (``usage``) and what a namespace
uses (``usage_stats``, from ``Objects``: the server's watch cache or a controller's informers).

- Pods: ``pods``, ``count/pods``, cpu, memory and ephemeral storage requests and limits,
  hugepages, and ``requests.<extended resource>`` (the pod's effective requests: containers summed,
  at least the largest init container, pod-level resources and overhead). A pod in a terminal
  phase, or deleted longer ago than its grace period, uses nothing but ``count/pods``. Scopes:
  Terminating, NotTerminating, BestEffort, NotBestEffort, PriorityClass, CrossNamespacePodAffinity.
- Services (``services``, ``services.nodeports``, ``services.loadbalancers``) and
  PersistentVolumeClaims (``persistentvolumeclaims``, ``requests.storage``, per storage class, and
  the VolumeAttributesClass scope).
- ResourceClaims: ``count/resourceclaims.resource.k8s.io`` and, per DeviceClass,
  ``<class>.deviceclass.resource.k8s.io/devices``: the devices a request asks for (``All`` counts
  as the most a claim can get, 32; of a prioritized list, the most any alternative asks of each
  class; admin access counts too). Devices of a class that serves an extended resource count as
  ``requests.deviceclass.resource.kubernetes.io/<class>`` and ``requests.<extended resource>`` too,
  less what the pod a scheduler's claim belongs to already counts for them.
- Everything else: ``count/<resource>.<group>`` (and the old names ``configmaps``, ``secrets``,
  ``replicationcontrollers`` and ``resourcequotas``), one per object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from kube.dra.claims import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from kube.dra.extendedresources import DEVICE_CLASS_PREFIX, class_resources, is_dra_extended_resource_name, resource_classes
from kube.dra.pods import pod_level_resources, pod_limit_quantities, pod_request_quantities, qos_class
from kube.errors import ApiError
from kube.labels import DOES_NOT_EXIST, EXISTS, IN, NOT_IN, new_requirement
from kube.objects import Obj, meta, spec, status
from kube.quantity import Quantity, parse_quantity_or_none
from kube.quota.resources import ResourceList, add, object_count_name, parse_list

CREATE = "CREATE"
UPDATE = "UPDATE"

REQUESTS_PREFIX = "requests."
# <class>.deviceclass.resource.k8s.io/devices: the devices claims ask for of one class.
DEVICES_PER_CLASS_SUFFIX = ".deviceclass.resource.k8s.io/devices"
# requests.deviceclass.resource.kubernetes.io/<class>: the same, by the class's implicit extended resource.
IMPLICIT_EXTENDED_PREFIX = REQUESTS_PREFIX + DEVICE_CLASS_PREFIX
# The devices a claim gets at most; a request for All of a class counts as this many.
ALLOCATION_RESULTS_MAX = 32
STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"

# Resources quota never counts: not stored, or (events) never counted.
IGNORED_RESOURCES = frozenset(
    {
        ("", "bindings"), ("", "componentstatuses"), ("", "events"), ("events.k8s.io", "events"),
        ("authentication.k8s.io", "tokenreviews"), ("authentication.k8s.io", "selfsubjectreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"), ("authorization.k8s.io", "selfsubjectaccessreviews"),
        ("authorization.k8s.io", "localsubjectaccessreviews"), ("authorization.k8s.io", "selfsubjectrulesreviews"),
    }
)  # fmt: skip
# Object counts that also go by an older name.
LEGACY_COUNT_NAMES = {"configmaps": "configmaps", "resourcequotas": "resourcequotas", "replicationcontrollers": "replicationcontrollers", "secrets": "secrets"}


class Objects(Protocol):
    """The objects quota reads: what the server holds, or what a controller's informers hold."""

    def list(self, group: str, resource: str, namespace: str | None) -> Iterable[Obj]:
        """The objects of a resource in ``namespace`` (None: every namespace, or a cluster-scoped resource)."""
        ...

    def get(self, group: str, resource: str, namespace: str, name: str) -> Obj | None: ...


class ScopeError(ValueError):
    """A scope selector that cannot be evaluated (a value that is not a label value)."""


def scope_selectors(quota: Obj) -> list[Obj]:
    """A quota's scopes as selector requirements: each of ``spec.scopes`` as Exists, then
    ``spec.scopeSelector.matchExpressions``."""
    quota_spec = spec(quota)
    selectors: list[Obj] = [{"scopeName": s, "operator": "Exists"} for s in quota_spec.get("scopes") or []]
    selectors += [e for e in (quota_spec.get("scopeSelector") or {}).get("matchExpressions") or [] if isinstance(e, dict)]
    return selectors


_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def _selector_matches(selector: Obj, labels: Mapping[str, str]) -> bool:
    """A scope selector read as a label selector on the key ``scopeName``."""
    operator = _OPERATORS.get(str(selector.get("operator") or ""))
    if operator is None:
        raise ScopeError(f"{selector.get('operator')} is not a valid scope selector operator")
    try:
        requirement = new_requirement(str(selector.get("scopeName") or ""), operator, [str(v) for v in selector.get("values") or []])
    except ApiError as exc:
        raise ScopeError(f"failed to parse and convert selector: {exc.message}") from None
    return requirement.matches(labels)


def _sorted_unique(names: Iterable[str]) -> list[str]:
    return sorted(set(names))


class Evaluator:
    """Counts objects of one resource: ``count/<resource>.<group>`` (and ``aliases``), one per object;
    kinds with more to count override the hooks."""

    group: str = ""
    resource: str = ""

    def __init__(self, objects: Objects, group: str = "", resource: str = "", aliases: Iterable[str] = ()) -> None:
        self.objects = objects
        if resource:
            self.group, self.resource = group, resource
        self.names = frozenset({object_count_name(self.group, self.resource), *aliases})

    def handles(self, operation: str, subresource: str, obj: Obj, old: Obj | None) -> bool:
        """Whether a write can change what this evaluator counts (object counts: creates)."""
        return not subresource and operation == CREATE

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        """The quota names among ``names`` this evaluator counts, sorted."""
        return _sorted_unique(n for n in names if n in self.names)

    def matches_scope(self, selector: Obj, obj: Obj) -> bool:
        """Whether ``obj`` falls under one scope selector (none for a kind without scopes)."""
        return False

    def matches(self, quota: Obj, obj: Obj) -> bool:
        """Whether ``quota`` limits ``obj``: it counts something this evaluator counts (by its
        status, which the controller fills in), and ``obj`` falls under all its scopes."""
        if not self.matching_resources(status(quota).get("hard") or {}):
            return False
        return all(self.matches_scope(selector, obj) for selector in scope_selectors(quota))

    def constraints(self, required: list[str], obj: Obj) -> str | None:
        """Why ``obj`` cannot be counted for ``required`` (None: it can)."""
        return None

    def usage(self, obj: Obj) -> ResourceList:
        """What one object uses."""
        one = Quantity(1)
        return {name: one for name in self.names}

    def usage_stats(self, namespace: str, names: list[str], selectors: list[Obj]) -> ResourceList:
        """What the objects of a namespace that fall under ``selectors`` use, each of ``names``
        present (zero when nothing uses it)."""
        used: ResourceList = {name: Quantity(0) for name in names}
        for obj in self.objects.list(self.group, self.resource, namespace):
            try:
                if not all(self.matches_scope(selector, obj) for selector in selectors):
                    continue
            except ScopeError:
                return used  # as upstream: what was counted so far
            used = add(used, self.usage(obj))
        return used


# ---- pods -------------------------------------------------------------------------------------

POD_RESOURCES = frozenset(
    {
        "count/pods", "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
        "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods",
    }
)  # fmt: skip
POD_RESOURCE_PREFIXES = ("hugepages-", "requests.hugepages-")
# Names a container must state a request or limit for when a quota limits them (upstream keeps
# this for compatibility and for these names only).
REQUIRED_EXPLICITLY = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
_NATIVE_COMPUTE = ("cpu", "memory", "ephemeral-storage")


def is_extended_resource_quota_name(name: str) -> bool:
    """``requests.<extended resource>`` or ``requests.deviceclass.resource.kubernetes.io/<class>``."""
    non_native = "/" in name and "kubernetes.io/" not in name
    return name.startswith(REQUESTS_PREFIX) and (non_native or name.startswith(IMPLICIT_EXTENDED_PREFIX))


def compute_usage(requests: Mapping[str, Quantity], limits: Mapping[str, Quantity]) -> ResourceList:
    """What requests and limits (a pod's or a container's) count for."""
    used: ResourceList = {"pods": Quantity(1)}
    for name in _NATIVE_COMPUTE:
        if name in requests:
            used[name] = used[REQUESTS_PREFIX + name] = requests[name]
        if name in limits:
            used["limits." + name] = limits[name]
    for name, amount in requests.items():
        if name.startswith("hugepages-"):
            used[name] = used[REQUESTS_PREFIX + name] = amount
        if is_dra_extended_resource_name(name):
            used[REQUESTS_PREFIX + name] = amount
    return used


def is_terminating(pod: Obj) -> bool:
    deadline = spec(pod).get("activeDeadlineSeconds")
    return isinstance(deadline, int) and deadline >= 0


def _timestamp(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def charged(pod: Obj, now: datetime | None = None) -> bool:
    """Whether a pod counts for more than ``count/pods``: not finished, and not deleted longer
    ago than its grace period (a pod stuck on a lost node must not block new ones)."""
    if status(pod).get("phase") in ("Succeeded", "Failed"):
        return False
    deleted, grace = meta(pod).get("deletionTimestamp"), meta(pod).get("deletionGracePeriodSeconds")
    if not deleted or not isinstance(grace, int):
        return True
    when = _timestamp(deleted)
    return when is None or (now or datetime.now(UTC)) <= when + timedelta(seconds=grace)


def pod_usage(pod: Obj, now: datetime | None = None) -> ResourceList:
    """What a pod uses of quotas (upstream's PodUsageFunc)."""
    used: ResourceList = {"count/pods": Quantity(1)}
    if not charged(pod, now):
        return used
    return add(used, compute_usage(pod_request_quantities(pod), pod_limit_quantities(pod)))


def _best_effort(pod: Obj) -> bool:
    return (status(pod).get("qosClass") or qos_class(pod)) == "BestEffort"


def _cross_namespace(terms: Any, weighted: bool) -> bool:
    for term in terms or []:
        if not isinstance(term, dict):
            continue
        term = (term.get("podAffinityTerm") or {}) if weighted else term
        if term.get("namespaces") or term.get("namespaceSelector") is not None:
            return True
    return False


def uses_cross_namespace_affinity(pod: Obj) -> bool:
    affinity = spec(pod).get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind) or {}
        if _cross_namespace(terms.get("requiredDuringSchedulingIgnoredDuringExecution"), False):
            return True
        if _cross_namespace(terms.get("preferredDuringSchedulingIgnoredDuringExecution"), True):
            return True
    return False


class PodEvaluator(Evaluator):
    group, resource = "", "pods"

    def handles(self, operation: str, subresource: str, obj: Obj, old: Obj | None) -> bool:
        if subresource == "resize":
            return operation == UPDATE
        if subresource:
            return False
        if operation == UPDATE and old is not None:
            # Only a change of scope changes what an existing pod counts for.
            return is_terminating(old) != is_terminating(obj)
        return operation == CREATE

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return _sorted_unique(
            n for n in names if n in POD_RESOURCES or n.startswith(POD_RESOURCE_PREFIXES) or is_extended_resource_quota_name(n)
        )  # fmt: skip

    def matches_scope(self, selector: Obj, obj: Obj) -> bool:
        scope = selector.get("scopeName")
        if scope == "Terminating":
            return is_terminating(obj)
        if scope == "NotTerminating":
            return not is_terminating(obj)
        if scope == "BestEffort":
            return _best_effort(obj)
        if scope == "NotBestEffort":
            return not _best_effort(obj)
        if scope == "PriorityClass":
            priority_class = str(spec(obj).get("priorityClassName") or "")
            if selector.get("operator") == "Exists":
                return bool(priority_class)
            return _selector_matches(selector, {"PriorityClass": priority_class} if priority_class else {})
        if scope == "CrossNamespacePodAffinity":
            return uses_cross_namespace_affinity(obj)
        return False

    def constraints(self, required: list[str], obj: Obj) -> str | None:
        """A quota on cpu or memory needs every container to state what it asks for them (unless
        the pod states it for all its containers)."""
        if pod_level_resources(obj, "requests") or pod_level_resources(obj, "limits"):
            return None
        wanted = REQUIRED_EXPLICITLY.intersection(required)
        missing: dict[str, set[str]] = {}
        pod_spec = spec(obj)
        for container in [*(pod_spec.get("containers") or []), *(pod_spec.get("initContainers") or [])]:
            resources = container.get("resources") or {}
            stated = compute_usage(parse_list(resources.get("requests")), parse_list(resources.get("limits")))
            for name in wanted.difference(stated):
                missing.setdefault(name, set()).add(str(container.get("name") or ""))
        if not missing:
            return None
        return "must specify " + "; ".join(f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing))

    def usage(self, obj: Obj) -> ResourceList:
        return pod_usage(obj)


# ---- services and persistent volume claims ---------------------------------------------------

SERVICE_RESOURCES = frozenset({"count/services", "services", "services.nodeports", "services.loadbalancers"})


class ServiceEvaluator(Evaluator):
    group, resource = "", "services"

    def __init__(self, objects: Objects) -> None:
        super().__init__(objects)
        self.names = SERVICE_RESOURCES

    def handles(self, operation: str, subresource: str, obj: Obj, old: Obj | None) -> bool:
        return not subresource and operation in (CREATE, UPDATE)

    def usage(self, obj: Obj) -> ResourceList:
        service = spec(obj)
        ports = [p for p in service.get("ports") or [] if isinstance(p, dict)]
        used: ResourceList = {"count/services": Quantity(1), "services": Quantity(1), "services.loadbalancers": Quantity(0), "services.nodeports": Quantity(0)}
        kind = service.get("type")
        if kind == "NodePort":
            used["services.nodeports"] = Quantity(len(ports))
        elif kind == "LoadBalancer":
            if service.get("allocateLoadBalancerNodePorts") is False:
                used["services.nodeports"] = Quantity(sum(1 for p in ports if p.get("nodePort")))
            else:
                used["services.nodeports"] = Quantity(len(ports))
            used["services.loadbalancers"] = Quantity(1)
        return used


PVC_RESOURCES = ("persistentvolumeclaims", "requests.storage")


def _rounded_up(amount: Quantity) -> Quantity:
    """An amount of storage in whole bytes (a fraction of a byte counts as one)."""
    if amount.as_fraction().denominator == 1:
        return amount
    return Quantity.from_scaled(amount.value(), 0).with_format(amount.format)


def storage_class_of(claim: Obj) -> str:
    annotated = (meta(claim).get("annotations") or {}).get(STORAGE_CLASS_ANNOTATION)
    return str(annotated if annotated is not None else spec(claim).get("storageClassName") or "")


def _attributes_classes(claim: Obj) -> set[str]:
    names = {spec(claim).get("volumeAttributesClassName"), status(claim).get("currentVolumeAttributesClassName")}
    names.add((status(claim).get("modifyVolumeStatus") or {}).get("targetVolumeAttributesClassName"))
    return {str(n) for n in names if n}


def _allocated_storage(claim: Obj) -> Quantity | None:
    return parse_quantity_or_none((status(claim).get("allocatedResources") or {}).get("storage"))


class PersistentVolumeClaimEvaluator(Evaluator):
    group, resource = "", "persistentvolumeclaims"

    def handles(self, operation: str, subresource: str, obj: Obj, old: Obj | None) -> bool:
        if not subresource:
            return operation in (CREATE, UPDATE)
        if subresource == "status" and old is not None:
            # The storage the volume got, or the attributes classes it has, changed.
            return _allocated_storage(old) != _allocated_storage(obj) or _attributes_classes(old) != _attributes_classes(obj)
        return False

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        by_class = tuple(STORAGE_CLASS_SUFFIX + r for r in PVC_RESOURCES)
        return _sorted_unique(n for n in names if n == "count/persistentvolumeclaims" or n in PVC_RESOURCES or n.endswith(by_class))

    def matches_scope(self, selector: Obj, obj: Obj) -> bool:
        if selector.get("scopeName") != "VolumeAttributesClass":
            return False
        classes = _attributes_classes(obj)
        if selector.get("operator") == "Exists":
            return bool(classes)
        if not classes:
            return _selector_matches(selector, {})
        return any(_selector_matches(selector, {"VolumeAttributesClass": name}) for name in classes)

    def usage(self, obj: Obj) -> ResourceList:
        used: ResourceList = {"persistentvolumeclaims": Quantity(1), "count/persistentvolumeclaims": Quantity(1)}
        storage_class = storage_class_of(obj)
        if storage_class:
            used[f"{storage_class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"] = Quantity(1)
        requested = parse_quantity_or_none(((spec(obj).get("resources") or {}).get("requests") or {}).get("storage"))
        if requested is None:
            return used
        storage = _rounded_up(requested)
        allocated = _allocated_storage(obj)
        if allocated is not None and allocated > storage:
            storage = _rounded_up(allocated)
        used["requests.storage"] = storage
        if storage_class:
            used[f"{storage_class}{STORAGE_CLASS_SUFFIX}requests.storage"] = storage
        return used


# ---- resource claims --------------------------------------------------------------------------

CLAIM_COUNT = object_count_name("resource.k8s.io", "resourceclaims")


def devices_of_class(class_name: str) -> str:
    """``<class>.deviceclass.resource.k8s.io/devices``."""
    return class_name + DEVICES_PER_CLASS_SUFFIX


def _devices_asked(request: Obj) -> int:
    mode = request.get("allocationMode")
    if mode == "ExactCount":
        count = request.get("count")
        return count if isinstance(count, int) and not isinstance(count, bool) else 0
    if mode == "All":
        return ALLOCATION_RESULTS_MAX
    return 0  # a mode this version does not know counts for nothing


def _controller(obj: Obj) -> Obj | None:
    for owner in meta(obj).get("ownerReferences") or []:
        if isinstance(owner, dict) and owner.get("controller"):
            return owner
    return None


def pod_of_special_claim(claim: Obj) -> Obj | None:
    """The controller reference to the pod whose extended resources a scheduler's claim serves."""
    if (meta(claim).get("annotations") or {}).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) != "true":
        return None
    owner = _controller(claim)
    if owner is None or owner.get("kind") != "Pod" or owner.get("apiVersion") != "v1":
        return None
    return owner


class ResourceClaimEvaluator(Evaluator):
    group, resource = "resource.k8s.io", "resourceclaims"

    def handles(self, operation: str, subresource: str, obj: Obj, old: Obj | None) -> bool:
        return not subresource and operation in (CREATE, UPDATE)

    def _classes(self) -> list[Obj]:
        return list(self.objects.list("resource.k8s.io", "deviceclasses", None))

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        names = list(names)
        matched = [n for n in names if n == CLAIM_COUNT or n.endswith(DEVICES_PER_CLASS_SUFFIX)]
        if any(n.startswith(REQUESTS_PREFIX) for n in names):
            classes = self._classes()
            named, served = class_resources(classes), resource_classes(classes)
            for name in names:
                if (name.startswith(IMPLICIT_EXTENDED_PREFIX) and named.get(name[len(IMPLICIT_EXTENDED_PREFIX) :])) or (is_extended_resource_quota_name(name) and name[len(REQUESTS_PREFIX) :] in served):
                    matched.append(name)
        return _sorted_unique(matched)

    def usage(self, obj: Obj) -> ResourceList:
        used: ResourceList = {CLAIM_COUNT: Quantity(1)}
        for request in (spec(obj).get("devices") or {}).get("requests") or []:
            if not isinstance(request, dict):
                continue
            alternatives = [s for s in request.get("firstAvailable") or [] if isinstance(s, dict)]
            if alternatives:
                # The most any alternative could get of each class.
                most: dict[str, int] = {}
                for sub in alternatives:
                    key = devices_of_class(str(sub.get("deviceClassName") or ""))
                    most[key] = max(most.get(key, 0), _devices_asked(sub))
                used = add(used, {key: Quantity(n) for key, n in most.items()})
            elif isinstance(request.get("exactly"), dict):
                exactly = request["exactly"]
                used = add(used, {devices_of_class(str(exactly.get("deviceClassName") or "")): Quantity(_devices_asked(exactly))})
        self._add_extended_resources(used, self._pod_usage(obj))
        return used

    def _add_extended_resources(self, used: ResourceList, pod_usage: ResourceList | None) -> None:
        """The devices of classes that serve extended resources, counted by those names too, less
        what the pod already counts for them."""
        named = class_resources(self._classes())
        extended: ResourceList = {}
        for name, amount in used.items():
            if not name.endswith(DEVICES_PER_CLASS_SUFFIX) or name == DEVICES_PER_CLASS_SUFFIX:
                continue
            class_name = name[: -len(DEVICES_PER_CLASS_SUFFIX)]
            extended[IMPLICIT_EXTENDED_PREFIX + class_name] = amount
            if named.get(class_name):
                extended[REQUESTS_PREFIX + named[class_name]] = amount
        for name, amount in extended.items():
            if pod_usage and name in pod_usage:
                amount = amount - pod_usage[name]
            if amount.sign > 0:
                used[name] = amount

    def _pod_usage(self, claim: Obj) -> ResourceList | None:
        """What the pod uses whose extended resources the claim (a scheduler's) serves, when the
        claim is that pod's one such claim; None otherwise."""
        owner = pod_of_special_claim(claim)
        if owner is None:
            return None
        claim_meta = meta(claim)
        namespace, name = str(claim_meta.get("namespace") or ""), str(claim_meta.get("name") or "")
        pod = self.objects.get("", "pods", namespace, str(owner.get("name") or ""))
        if pod is None or meta(pod).get("uid") != owner.get("uid"):
            return None
        recorded = status(pod).get("extendedResourceClaimStatus")
        if recorded is not None:
            if (recorded or {}).get("resourceClaimName") != name:
                return None
        else:
            # The pod names no claim yet: only its first one (by creation, then name) counts it.
            created = _timestamp(claim_meta.get("creationTimestamp"))
            for other in self.objects.list(self.group, self.resource, namespace):
                other_owner = pod_of_special_claim(other)
                if other_owner is None or other_owner.get("uid") != owner.get("uid"):
                    continue
                other_created = _timestamp(meta(other).get("creationTimestamp"))
                if created is None or other_created is None:
                    continue
                if other_created < created or (other_created == created and str(meta(other).get("name") or "") < name):
                    return None
        return pod_usage(pod)


# ---- the set of evaluators --------------------------------------------------------------------


class Registry:
    """The evaluators by (group, resource); resources without one of their own get an object
    count evaluator when first asked for (``get_or_count``)."""

    def __init__(self, objects: Objects, evaluators: Iterable[Evaluator]) -> None:
        self.objects = objects
        self._evaluators = {(e.group, e.resource): e for e in evaluators}

    def get(self, group: str, resource: str) -> Evaluator | None:
        return self._evaluators.get((group, resource))

    def get_or_count(self, group: str, resource: str) -> Evaluator:
        evaluator = self._evaluators.get((group, resource))
        if evaluator is None:
            evaluator = self._evaluators[(group, resource)] = Evaluator(self.objects, group, resource)
        return evaluator

    def evaluators(self) -> list[Evaluator]:
        return list(self._evaluators.values())


def new_registry(objects: Objects) -> Registry:
    """Upstream's evaluators: pods, services, claims of volumes and of devices, and the object
    counts that also go by their old names."""
    evaluators: list[Evaluator] = [PodEvaluator(objects), ServiceEvaluator(objects), PersistentVolumeClaimEvaluator(objects), ResourceClaimEvaluator(objects)]
    evaluators += [Evaluator(objects, "", resource, (alias,)) for resource, alias in LEGACY_COUNT_NAMES.items()]
    return Registry(objects, evaluators)


def calculate_usage(namespace: str, quota: Obj, registry: Registry) -> tuple[ResourceList, list[Exception]]:
    """What the namespace uses of everything ``quota`` limits (``spec.hard``) that some evaluator
    counts, and the errors of evaluators that could not count (their names are left out)."""
    hard = list(parse_list(spec(quota).get("hard")))
    evaluators = registry.evaluators()
    matched = set(hard).intersection(n for e in evaluators for n in e.matching_resources(hard))
    selectors = scope_selectors(quota)
    errors: list[Exception] = []
    used: ResourceList = {}
    for evaluator in evaluators:
        names = evaluator.matching_resources(matched)
        if not names:
            continue
        try:
            counted = evaluator.usage_stats(namespace, names, selectors)
        except Exception as exc:  # one resource that cannot be read must not stop the others
            errors.append(exc)
            matched.difference_update(names)
            continue
        used = add(used, counted)
    return {name: amount for name, amount in used.items() if name in matched}, errors
