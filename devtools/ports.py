"""Free loopback ports for servers that tests, benchmarks and the dev stack start."""

from __future__ import annotations

import os
import random
import socket

# Under pytest-xdist each worker draws from its own block below the kernel's ephemeral range
# (32768+ on Linux): a port from bind(0) is free again the moment it is closed, so two workers
# starting servers at once could otherwise be handed the same one.
_WORKER_PORTS_START = 20000
_WORKER_PORTS_BLOCK = 1000
_WORKER_BLOCKS = 12
_random = random.Random()
_handed_out: set[int] = set()  # not yet listening, maybe: never hand one out twice


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else -1
    if 0 <= index < _WORKER_BLOCKS:
        start = _WORKER_PORTS_START + index * _WORKER_PORTS_BLOCK
        for _ in range(_WORKER_PORTS_BLOCK):
            port = _random.randrange(start, start + _WORKER_PORTS_BLOCK)
            if port in _handed_out:
                continue
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
