"""DRA's rules shared by the API server and the workers: claims, pods, device taints,
tolerations, device profiles, extended resources, pod groups and the scheduler's explanation
protocol. It stands on the client runtime (``kube``) and nothing else of the project."""
