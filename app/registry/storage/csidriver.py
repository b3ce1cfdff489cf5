"""CSIDriver (storage.k8s.io/v1, cluster-scoped), served as storage: the scheduler's volume limits
and binding watch it."""

from __future__ import annotations

from app.registry.base import Obj, PrinterColumn
from app.registry.columns import age_column, dig, name_column
from app.registry.storageonly import StorageOnlyKind, StorageOnlyStrategy

SPEC = "io.k8s.api.storage.v1.CSIDriverSpec"


def _flag(name: str, unset: bool) -> PrinterColumn:
    """A boolean of the spec, printed as upstream's default when unset."""
    return PrinterColumn(name[0].upper() + name[1:], "boolean", "", lambda o: bool(dig(o, "spec", name, default=unset)), doc=(SPEC, name))


def _audiences(obj: Obj) -> str:
    requests = dig(obj, "spec", "tokenRequests", default=None)
    if not isinstance(requests, list):
        return "<unset>"
    return ",".join(str(r.get("audience") or "") for r in requests if isinstance(r, dict))


def _modes(obj: Obj) -> str:
    modes = dig(obj, "spec", "volumeLifecycleModes", default=None)
    return ",".join(str(m) for m in modes) if isinstance(modes, list) and modes else "<none>"


STRATEGY: StorageOnlyStrategy = StorageOnlyStrategy(
    StorageOnlyKind(
        group="storage.k8s.io", kind="CSIDriver", plural="csidrivers", namespaced=False,
        create_example={"spec": {}},
        printer_columns=(
            name_column(),
            _flag("attachRequired", True),
            _flag("podInfoOnMount", False),
            _flag("storageCapacity", False),
            PrinterColumn("TokenRequests", "string", "", _audiences, doc=(SPEC, "tokenRequests")),
            _flag("requiresRepublish", False),
            PrinterColumn("Modes", "string", "", _modes, doc=(SPEC, "volumeLifecycleModes")),
            age_column(),
        ),
    )
)  # fmt: skip
