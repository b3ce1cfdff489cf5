"""resource.k8s.io/v1: the Dynamic Resource Allocation kinds.

Each kind's module states the kind and its hooks; its ``<kind>_validation`` module holds the
kind's validation, defaults and feature-gate drop rules. What several kinds share lives in
``common`` (and, for the ResourceClaimSpec that claims and templates both carry, ``claimspec``).
Behaviour follows upstream v1.37 (pkg/apis/resource/validation, the registry strategies and the
declarative rules in k8s.io/api/resource/v1): same field paths, limits and messages.
"""
