"""Who the simulator is when it writes: each simulated node as its own kubelet
(``system:node:NAME``, by the bearer token issued for it), and each node's DRA drivers as a
service account whose token is bound to that node (so the API server lets them write device
status only for claims allocated there). Reads go through the simulator's own identity, which
watches every simulated node's objects at once.

Without node tokens every write goes through the simulator's own client, as before."""

from __future__ import annotations

import csv
import logging
import time
from pathlib import Path

from kube.client import KubeClient, resource_path

log = logging.getLogger("kubeletsim")

NODE_USER_PREFIX = "system:node:"
# Renew a driver token this long before it expires.
TOKEN_RENEW_MARGIN = 300.0
DRIVER_TOKEN_SECONDS = 3600


def read_node_tokens(path: str | Path) -> dict[str, str]:
    """node name -> token, from a token file (CSV ``token,user,uid,groups``) of node users."""
    tokens: dict[str, str] = {}
    with open(path, newline="") as handle:
        for record in csv.reader(handle):
            if len(record) >= 2 and record[1].startswith(NODE_USER_PREFIX):
                tokens[record[1][len(NODE_USER_PREFIX) :]] = record[0]
    return tokens


class Identities:
    """The clients the simulator writes with, per node."""

    def __init__(self, client: KubeClient, node_tokens: dict[str, str] | None = None, driver_account: tuple[str, str] | None = None) -> None:
        self.client = client
        self.node_tokens = node_tokens or {}
        self.driver_account = driver_account
        self._nodes: dict[str, KubeClient] = {}
        self._drivers: dict[str, tuple[KubeClient, float]] = {}

    def node(self, name: str) -> KubeClient:
        """The kubelet of node ``name``."""
        token = self.node_tokens.get(name)
        if token is None:
            return self.client
        client = self._nodes.get(name)
        if client is None:
            client = self._nodes[name] = self.client.as_user(token, f"kubelet/{name}")
        return client

    async def driver(self, node: str) -> KubeClient:
        """The DRA drivers of node ``node``: the driver service account with a token bound to the Node."""
        if self.driver_account is None:
            return self.node(node)
        known = self._drivers.get(node)
        if known is not None and known[1] - TOKEN_RENEW_MARGIN > time.time():
            return known[0]
        namespace, account = self.driver_account
        node_obj = await self.client.get(resource_path("", "v1", "nodes", name=node))
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": DRIVER_TOKEN_SECONDS,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_obj["metadata"]["uid"]},
            },
        }
        answer = await self.client.post_raw(resource_path("", "v1", "serviceaccounts", namespace, account, "token"), request)
        client = self.client.as_user(answer["status"]["token"], f"dra-driver/{node}")
        self._drivers[node] = (client, time.time() + DRIVER_TOKEN_SECONDS)
        return client
