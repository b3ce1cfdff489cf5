"""Structured-parameters device allocation (upstream's DRA allocator, "incubating" flavour).

Pure logic, no I/O: the scheduler feeds it the objects its informers hold and writes the
results itself.

* :class:`ResourceIndex` holds ResourceSlices (DeviceTaintRules applied), DeviceClasses and a
  per-node view of usable pools. Build it once and update it incrementally
  (``set_slice``/``remove_slice``/...); per-device CEL results live on the prepared devices, so
  they survive as long as the slice (uid, generation) does.
* :class:`AllocatedState` says which devices, shares and capacity are already taken (allocated
  claims plus the scheduler's in-flight allocations).
* :class:`Allocator` (one per scheduling cycle) answers ``allocate(node, claims)`` with
  :class:`Allocated` (one ``status.allocation`` dict per claim) or :class:`Unschedulable`, and
  raises :class:`AllocationError` for problems with the input itself (bad CEL, unknown class,
  feature disabled), which the scheduler reports as an Error status like upstream.

The modules, lowest first: ``results`` (outcomes, errors, features, limits), ``devices`` (prepared
devices), ``index`` (:class:`ResourceIndex`), ``state`` (:class:`AllocatedState`), ``claims``
(prepared claims and per-device checks), ``search`` (the depth-first search and
:class:`SearchCache`), ``allocate`` (:class:`Allocator`) and ``nodeallocatable`` (what allocated
devices charge a pod in node allocatable resources). This package re-exports what other modules use.
"""

from __future__ import annotations

from schedulers.allocator.allocate import Allocator, allocate_claims
from schedulers.allocator.claims import (
    NotAdmin,
    PreparedClaim,
    PreparedRequest,
    attribute_value,
    from_fraction,
    round_to_policy,
    share_consumption,
)
from schedulers.allocator.devices import Device
from schedulers.allocator.index import NodeView, ResourceIndex
from schedulers.allocator.nodeallocatable import has_node_allocatable_mapping, node_allocatable_claim_status, node_allocatable_demand
from schedulers.allocator.results import (
    ADMIN_ACCESS_LABEL,
    BOUND_AFTER_STEPS,
    CANNOT_ALLOCATE,
    MAX_RESULTS,
    TIMED_OUT,
    Allocated,
    AllocationError,
    AllocationOutcome,
    AllocatorFeatures,
    DeviceID,
    Unschedulable,
)
from schedulers.allocator.search import Search, SearchCache
from schedulers.allocator.state import AllocatedState

__all__ = [
    "ADMIN_ACCESS_LABEL",
    "BOUND_AFTER_STEPS",
    "CANNOT_ALLOCATE",
    "MAX_RESULTS",
    "TIMED_OUT",
    "Allocated",
    "AllocatedState",
    "AllocationError",
    "AllocationOutcome",
    "Allocator",
    "AllocatorFeatures",
    "Device",
    "DeviceID",
    "NodeView",
    "NotAdmin",
    "PreparedClaim",
    "PreparedRequest",
    "ResourceIndex",
    "Search",
    "SearchCache",
    "Unschedulable",
    "allocate_claims",
    "attribute_value",
    "from_fraction",
    "has_node_allocatable_mapping",
    "node_allocatable_claim_status",
    "node_allocatable_demand",
    "round_to_policy",
    "share_consumption",
]
