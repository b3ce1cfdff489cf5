"""core/v1 kinds the DRA control plane serves: Namespace, Node, Pod, Event.

Each kind's module states the kind and its hooks; its ``<kind>_validation`` module holds the
field validation and gate drop rules, following upstream's pkg/apis/core/validation and
pkg/api/pod/util.go (v1.37 line). ObjectMeta is validated by the shared machinery
(app.registry.objectmeta); rules other groups share too live in app.registry.common.
"""
