"""The controller process: ResourceClaim controller, garbage collection of generated claims,
and device taint eviction (``python -m controllers``)."""
