"""discovery.k8s.io: EndpointSlice."""
