"""Secret (v1, namespaced): named values, base64 in ``data``; ``stringData`` is written into
``data`` and never stored. Served so that tokens can be bound to a Secret (and drivers can keep
credentials), with upstream's validation."""

from __future__ import annotations

import base64

from app.registry.base import KindStrategy, Obj, PrinterColumn, RequestContext
from app.registry.columns import age_column, name_column
from app.registry.core.secret_validation import decode_value, validate_secret, validate_secret_update
from kube import errors
from kube.errors import FieldError

OPAQUE = "Opaque"


def _merge_string_data(obj: Obj) -> None:
    """``stringData`` entries overwrite ``data`` entries of the same key, as upstream's conversion
    does; a value that is not base64 fails decoding (400), as it does upstream."""
    string_data = obj.pop("stringData", None)
    data = obj.get("data")
    if not isinstance(data, dict):
        if data is not None:
            return  # validation reports the wrong type
        data = {}
    for value in data.values():
        try:
            decode_value(value)
        except ValueError as exc:
            raise errors.bad_request(f'Secret in version "v1" cannot be handled as a Secret: {exc}') from None
    if isinstance(string_data, dict):
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
    if data:
        obj["data"] = data
    else:
        obj.pop("data", None)


class SecretStrategy(KindStrategy):
    kind = "Secret"
    plural = "secrets"
    singular = "secret"
    namespaced = True
    tracks_generation = False
    spec_fields = ()
    create_example: Obj = {"stringData": {"example": "value"}}
    field_selectors = {"type": lambda o: o.get("type") or ""}
    printer_columns = (
        name_column(),
        PrinterColumn("Type", "string", "", lambda o: o.get("type") or ""),
        PrinterColumn("Data", "string", "", lambda o: len(o.get("data") or {})),
        age_column(),
    )

    def prepare_for_create(self, obj: Obj, ctx: RequestContext) -> None:
        super().prepare_for_create(obj, ctx)
        _merge_string_data(obj)

    def prepare_for_update(self, new: Obj, old: Obj, ctx: RequestContext) -> None:
        super().prepare_for_update(new, old, ctx)
        _merge_string_data(new)

    def default(self, obj: Obj, ctx: RequestContext) -> None:
        if not obj.get("type"):
            obj["type"] = OPAQUE

    def validate_create(self, obj: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_secret(obj)

    def validate_update(self, new: Obj, old: Obj, ctx: RequestContext) -> list[FieldError]:
        return validate_secret_update(new, old)


STRATEGY: SecretStrategy = SecretStrategy()
