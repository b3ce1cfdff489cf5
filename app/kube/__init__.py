"""Pure Kubernetes API helpers shared by the server and the workers.

Nothing here imports the server (FastAPI, storage); workers import this package
to talk to the API server over HTTP.
"""
