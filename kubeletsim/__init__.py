"""Kubelet simulator: one process simulates many nodes (Node, heartbeat Lease, ResourceSlices
from a device profile) and runs the kubelet's part of DRA for pods bound to them (admission,
device prepare/unprepare with claim status.devices, pod lifecycle, graceful deletion).

Run it with ``python -m kubeletsim --server URL --nodes 10 --profile gpu``.
"""
