"""scheduling.k8s.io/v1: PriorityClass (its rules in ``priorityclass_validation``)."""
