"""Property-based contract tests: schemathesis drives the server from its own OpenAPI v3 documents."""
