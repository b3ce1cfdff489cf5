"""The kubelet's side of real DRA driver plugins, per simulated node, over gRPC on unix sockets.

- :mod:`.registration`: the plugin watcher (registration sockets, GetInfo, version negotiation,
  NotifyRegistrationStatus, deregistration, connection monitoring).
- :mod:`.draplugin`: the registered plugins of a node and the NodePrepareResources /
  NodeUnprepareResources client.
- :mod:`.health`: NodeWatchResources streams and the device health they report.
- :mod:`.checkpoint`: which claims are prepared for which pods, kept across restarts.
- :mod:`.manager`: prepare before a pod starts, unprepare after the last pod using a claim.
- :mod:`.podresources`: the node's PodResourcesLister service.
"""
