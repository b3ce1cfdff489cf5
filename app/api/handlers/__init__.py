"""One handler per verb, in the shape of the apiserver's endpoint handlers: each takes the
generic store and a parsed ``RequestScope`` and returns the response.

``app.api.routing`` decides which handler a request reaches; ``app.api.negotiation`` decodes
bodies and writes the answers; the REST semantics live in ``app.api.generic.GenericStore``.
"""
