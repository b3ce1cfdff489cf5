"""Where kubelet and plugins meet: the kubelet's ``--root-dir`` layout, one directory per simulated node.

Drivers create their registration sockets in ``<root>/<node>/plugins_registry`` and their
service sockets in ``<root>/<node>/plugins/<driver>/``; agents find PodResources at
``<root>/<node>/pod-resources/kubelet.sock``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# The simulator's --root-dir (and the example driver's) unless told otherwise: under the data directory.
DEFAULT_ROOT_DIR = Path("data") / "kubelet"
# Unix socket paths are limited by sockaddr_un.sun_path (108 bytes with the terminating NUL).
MAX_SOCKET_PATH = 107


class SocketPathTooLong(ValueError):
    """A socket path the operating system cannot bind or connect to."""


def check_socket_path(path: str | os.PathLike[str]) -> str:
    """``path`` as a string, or SocketPathTooLong naming the limit."""
    text = os.fspath(path)
    if len(text.encode()) > MAX_SOCKET_PATH:
        raise SocketPathTooLong(f"socket path {text} is {len(text.encode())} bytes long, more than the {MAX_SOCKET_PATH} a unix socket allows")
    return text


@dataclass(frozen=True)
class NodeDirs:
    """The kubelet directories of one simulated node: ``<root>/<node>/...``."""

    root: Path
    node: str

    @property
    def base(self) -> Path:
        return self.root / self.node

    @property
    def registry(self) -> Path:
        """Where drivers create their registration sockets (the kubelet's ``plugins_registry``)."""
        return self.base / "plugins_registry"

    @property
    def plugins(self) -> Path:
        """Where drivers put their service sockets, one directory per driver (the kubelet's ``plugins``)."""
        return self.base / "plugins"

    @property
    def pod_resources_socket(self) -> Path:
        return self.base / "pod-resources" / "kubelet.sock"

    def plugin_dir(self, driver: str) -> Path:
        """A driver's own directory for its service socket (``dra.sock``) and state."""
        return self.plugins / driver

    @property
    def checkpoint(self) -> Path:
        """The prepared-claims checkpoint (named like the kubelet's DRA manager state file)."""
        return self.base / "dra_manager_state"

    def create(self) -> None:
        """Make the directories drivers and agents expect to exist."""
        for path in (self.registry, self.plugins, self.pod_resources_socket.parent):
            path.mkdir(parents=True, exist_ok=True)
