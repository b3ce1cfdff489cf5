"""Tunables of one simulator process (from its command line)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from kubeletsim.nodes import DEFAULT_MAX_PODS
from kubeletsim.plugins.node import PluginSettings

_SHARD = re.compile(r"(\d+)/(\d+)")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` of one node range: a contiguous slice of it, the same for every
    process given the same node count, so that no two shards ever own one node."""

    index: int = 0
    count: int = 1

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``K/N`` (0 <= K < N); ValueError says what is wrong."""
        match = _SHARD.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"--shard must be K/N (shard K of N, counted from 0), not {text!r}")
        shard = cls(int(match.group(1)), int(match.group(2)))
        if shard.count < 1 or shard.index >= shard.count:
            raise ValueError(f"--shard {text}: K must be at least 0 and less than N (N at least 1)")
        return shard

    def numbers(self, nodes: int) -> range:
        """The node numbers of this shard among ``nodes``: shard sizes differ by at most one."""
        return range(self.index * nodes // self.count, (self.index + 1) * nodes // self.count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass
class Settings:
    """Tunables of one simulator process."""

    # The whole node range (<prefix>0 .. <prefix>nodes-1) and the part of it this process runs.
    nodes: int = 10
    node_prefix: str = "sim-"
    shard: Shard = field(default_factory=Shard)
    lease_interval: float = 10.0
    # Upstream's nodeStatusReportFrequency: with a Lease as the heartbeat, an unchanged node status
    # is posted every 5 minutes (at 8,000 nodes, 27 writes/s instead of 133 with 60 s).
    node_status_interval: float = 300.0
    resync_interval: float = 30.0
    # Concurrent reconcilers of each controller (nodes, slices, pods).
    workers: int = 64
    # Lease renewals (and node status heartbeats) in flight at once; 0 = enough for the rate (see below).
    heartbeat_concurrency: int = 0
    # The kubelet's --max-pods: the nodes' `pods` capacity (and the size of their pod address ranges).
    max_pods: int = DEFAULT_MAX_PODS
    # Devices with binding conditions: seconds until the simulated driver reports them attached,
    # and whether it reports the failure condition instead.
    binding_delay: float = 2.0
    binding_fail: bool = False
    # Where drivers meet the nodes (the kubelet's --root-dir) and the plugin side's timeouts.
    plugins: PluginSettings = field(default_factory=PluginSettings)

    @property
    def node_numbers(self) -> range:
        """The numbers of this process's nodes in the whole range (all of it without sharding)."""
        return self.shard.numbers(self.nodes)

    @property
    def node_names(self) -> list[str]:
        """This process's nodes: ``<prefix>0`` .. ``<prefix>N-1``, or its shard's part of them."""
        return [f"{self.node_prefix}{i}" for i in self.node_numbers]

    @property
    def node_index(self) -> dict[str, int]:
        """This process's node names -> their numbers in the whole range (addresses derive from them,
        so shards never hand out one address twice)."""
        return {f"{self.node_prefix}{i}": i for i in self.node_numbers}

    def heartbeats_in_flight(self, interval: float) -> int:
        """How many beats may be in flight: enough for ``nodes / interval`` per second at 250 ms each (16..128).

        Upstream every kubelet renews on its own connection; one process simulating thousands must
        keep enough requests in flight to get its share of a server that pod work keeps busy. Beats
        are only sent when due, so a generous limit costs nothing until the simulator falls behind,
        and then lets heartbeats win over pod work.
        """
        if self.heartbeat_concurrency > 0:
            return self.heartbeat_concurrency
        return max(16, min(128, math.ceil(len(self.node_numbers) / max(interval, 0.001) * 0.25)))

    def connections(self) -> int:
        """Connections worth keeping open: the steady load of the workers of one controller (pod
        work, once the nodes are registered) plus both heartbeat kinds."""
        return self.workers + self.heartbeats_in_flight(self.lease_interval) + self.heartbeats_in_flight(self.node_status_interval)
