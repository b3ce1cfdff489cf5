"""Names both sides of the kubelet plugin interfaces agree on, and conversion between API versions."""

from __future__ import annotations

from typing import Any, TypeVar

# The plugin type a DRA driver announces in GetInfo.
DRA_PLUGIN_TYPE = "DRAPlugin"
# Services as listed in GetInfo's supported_versions: "<proto package>.<service>".
DRA_V1 = "v1.DRAPlugin"
DRA_V1BETA1 = "v1beta1.DRAPlugin"
HEALTH_V1 = "v1.DRAResourceHealth"
HEALTH_V1ALPHA1 = "v1alpha1.DRAResourceHealth"

Message = TypeVar("Message")


def convert(message: Any, target: type[Message]) -> Message:
    """The same fields as a message of another API version: the versions share field numbers
    (v1beta1 DRAPlugin is v1 without share_id, v1alpha1 health is v1), so the bytes carry over."""
    return target.FromString(message.SerializeToString())  # type: ignore[attr-defined,no-any-return]
