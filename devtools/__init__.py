"""Developer tooling, not part of any program: the local stack (``python -m devtools.devstack``,
what ``make run`` starts), a throwaway Postgres cluster, and helpers that start server
processes for tests and benchmarks."""
