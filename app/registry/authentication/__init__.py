"""authentication.k8s.io/v1: SelfSubjectReview."""
