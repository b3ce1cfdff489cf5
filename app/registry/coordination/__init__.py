"""coordination.k8s.io/v1: Lease (its rules in ``lease_validation``)."""
