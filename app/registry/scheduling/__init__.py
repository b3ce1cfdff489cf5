"""scheduling.k8s.io kinds."""
