"""apps/v1 kinds served as storage only (``app.registry.storageonly``): ReplicaSet, StatefulSet."""
