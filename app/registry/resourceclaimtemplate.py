"""ResourceClaimTemplate (resource.k8s.io/v1, namespaced)."""

from __future__ import annotations

from app.registry.base import KindStrategy
from app.registry.columns import age_column, name_column


class ResourceClaimTemplateStrategy(KindStrategy):
    group = "resource.k8s.io"
    kind = "ResourceClaimTemplate"
    plural = "resourceclaimtemplates"
    singular = "resourceclaimtemplate"
    namespaced = True
    tracks_generation = False
    printer_columns = (name_column(), age_column())


STRATEGY = ResourceClaimTemplateStrategy()
