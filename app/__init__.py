"""The API server (FastAPI app, storage, registry)."""

# Before any of the modules setup.py compiles is imported: pick compiled or source (kube/compiled.py).
from kube import compiled as _compiled  # noqa: F401
