"""policy/v1 kinds served as storage only (``app.registry.storageonly``): PodDisruptionBudget."""
