"""The controller process (``python -m controllers``): the ResourceClaim controller, the garbage
collector of pods, claims and events, and device taint eviction, on shared informers."""
