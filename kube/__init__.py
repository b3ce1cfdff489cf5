"""The shared Kubernetes library: what the API server and every worker stand on.

Client and transport, informers, leader election, the worker process scaffold,
labels, fields, quantities, CEL, tolerations, feature gates and API errors. Nothing here imports
the server (``app``) or a worker; the programs import this package, never each other.
"""

# Before any of the modules setup.py compiles is imported: pick compiled or source (kube/compiled.py).
from kube import compiled as _compiled  # noqa: F401
