"""core/v1 kinds the DRA control plane serves: Namespace, Node, Pod, Event."""
