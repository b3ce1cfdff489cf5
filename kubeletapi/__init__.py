"""The kubelet's gRPC plugin interfaces, with Python stubs generated from this package's protos.

Each ``<api>/<version>/api.proto`` here declares the same packages, services, messages and field
numbers as the kubelet's published interface definitions (the ``pkg/apis`` tree of the
kubernetes/kubelet repository, revision 63b3249724f7d89a8aa48f9acb3811f193c9aa68), so real DRA
drivers and monitoring agents talk to the simulator unchanged. ``dra-health`` is spelled
``dra_health`` to be importable.

The generated modules (``api_pb2.py``, ``api_pb2.pyi``, ``api_pb2_grpc.py``) are checked in, so
an editable install needs no build step; ``python -m kubeletapi.generate`` rewrites them after a
proto changes (a test fails while they are out of date).
"""
