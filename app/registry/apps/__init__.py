"""apps/v1 kinds: Deployment, ReplicaSet, StatefulSet, DaemonSet and ControllerRevision."""
