"""scheduling.k8s.io kinds: PriorityClass (v1), Workload and PodGroup (v1beta1); each kind's rules in its ``*_validation`` module."""
