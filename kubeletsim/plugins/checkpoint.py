"""The claims a node prepared, for which pods, and what their drivers returned, kept in a file.

Like the kubelet's DRA manager state, it survives a restart of the simulator: a claim prepared
before is not prepared again, and a pod that went away while the simulator was down still has
its claims unprepared. Every change is written at once (to a temporary file renamed over the
old one) with a checksum, so a torn or edited file is noticed instead of trusted.
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("kubeletsim.plugins")

CHECKPOINT_KIND = "DRAManagerCheckpoint"
CHECKPOINT_VERSION = 1


class CorruptCheckpoint(Exception):
    pass


@dataclass
class PreparedDevice:
    """One device a driver prepared for a claim."""

    pool: str
    device: str
    request_names: list[str] = field(default_factory=list)
    cdi_device_ids: list[str] = field(default_factory=list)
    share_id: str | None = None

    def serves(self, request: str) -> bool:
        """Whether a container asking for ``request`` of the claim (empty: the whole claim) gets this device."""
        return not request or not self.request_names or request in self.request_names


@dataclass
class ClaimInfo:
    """A claim this node knows: the pods using it here and, once prepared, each driver's devices."""

    uid: str
    name: str
    namespace: str
    pod_uids: set[str] = field(default_factory=set)
    drivers: dict[str, list[PreparedDevice]] = field(default_factory=dict)
    prepared: bool = False

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["pod_uids"] = sorted(self.pod_uids)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClaimInfo:
        drivers = {name: [PreparedDevice(**d) for d in devices] for name, devices in (data.get("drivers") or {}).items()}
        return cls(data["uid"], data["name"], data["namespace"], set(data.get("pod_uids") or ()), drivers, bool(data.get("prepared")))


def _checksum(claims: list[dict[str, Any]]) -> int:
    return zlib.crc32(json.dumps(claims, sort_keys=True, separators=(",", ":")).encode())


class Checkpoint:
    """The claim infos of one node, keyed by (namespace, claim name), backed by ``path`` (None: kept in memory only)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.claims: dict[tuple[str, str], ClaimInfo] = {}

    def load(self) -> None:
        """Read the file (nothing to read is an empty state); CorruptCheckpoint when it cannot be trusted."""
        if self.path is None:
            self.claims = {}
            return
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            self.claims = {}
            return
        try:
            data = json.loads(raw)
            claims = data["claims"]
            if data.get("kind") != CHECKPOINT_KIND or data.get("version") != CHECKPOINT_VERSION:
                raise CorruptCheckpoint(f"checkpoint {self.path} has kind {data.get('kind')!r} version {data.get('version')!r}")
            if data.get("checksum") != _checksum(claims):
                raise CorruptCheckpoint(f"checkpoint {self.path} is corrupted: checksum mismatch")
            self.claims = {(c["namespace"], c["name"]): ClaimInfo.from_json(c) for c in claims}
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptCheckpoint(f"checkpoint {self.path} is corrupted: {exc}") from None

    def save(self) -> None:
        if self.path is None:
            return
        claims = [info.to_json() for _, info in sorted(self.claims.items())]
        data = {"kind": CHECKPOINT_KIND, "version": CHECKPOINT_VERSION, "claims": claims, "checksum": _checksum(claims)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        scratch = self.path.with_name(f".{self.path.name}.tmp")
        scratch.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(scratch, self.path)

    def get(self, namespace: str, name: str) -> ClaimInfo | None:
        return self.claims.get((namespace, name))

    def add(self, info: ClaimInfo) -> None:
        self.claims[(info.namespace, info.name)] = info

    def delete(self, namespace: str, name: str) -> None:
        self.claims.pop((namespace, name), None)

    def pods(self) -> dict[str, tuple[str, list[str]]]:
        """pod uid -> (namespace, names of its claims held here)."""
        out: dict[str, tuple[str, list[str]]] = {}
        for info in self.claims.values():
            for uid in info.pod_uids:
                out.setdefault(uid, (info.namespace, []))[1].append(info.name)
        return out
