"""The shared Kubernetes library: what the API server and every worker stand on.

The client runtime (client and transport, informers, leader election, the worker process
scaffold, labels, fields, quantities, feature gates and API errors), and beside it CEL
(``kube.cel``), DRA's rules the server and the workers share (``kube.dra``) and resource quota's
evaluators (``kube.quota``); the runtime imports none of them. Nothing here imports the server
(``app``) or a worker; the programs import this package, never each other.
"""

# Before any of the modules setup.py compiles is imported: pick compiled or source (kube/compiled.py).
from kube import compiled as _compiled  # noqa: F401
