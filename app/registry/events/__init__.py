"""events.k8s.io/v1: Event, served from core/v1 Event's storage (its rules in core's ``event_validation``)."""
