"""resource.k8s.io/v1: the Dynamic Resource Allocation kinds."""
